"""Spark backfill: the runner (preflight, attempts, verification) and how a Spark job is launched."""
