"""A guarded expansion's writes: ``plan`` (the plan a person asks for, from
stored state and the broker's verdict) and ``job`` (request, approve, refuse,
the steps a run records, finish)."""
