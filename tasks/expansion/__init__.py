"""A guarded expansion outside a request: ``verdict`` (the broker's answer to a
plan, asked by a worker) and ``run`` (an approved expansion's short runs,
step by step)."""
