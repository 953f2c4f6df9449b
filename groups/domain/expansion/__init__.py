"""A guarded expansion in the pure domain: ``plan`` (what adding partitions
would cost each group, and the broker's verdict) and ``job`` (an approved
expansion's steps, fingerprint and verdicts)."""
