"""Handlers for the bench's handler-sink rows (``bench/backfill_bench.py --big``)."""

from __future__ import annotations

from collections.abc import Iterator


def drain(records: Iterator[dict]) -> None:
    """Pulls every record and keeps none: the handler sink's own cost."""
    for _ in records:
        pass
