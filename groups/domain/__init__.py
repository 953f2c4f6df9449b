"""The pure domain: plain functions over frozen dataclasses. No Django, no Kafka, no clock."""
