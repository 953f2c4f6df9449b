"""The demo scenario of `make up`: a client application of the local broker, not part of Gapwatch."""
