"""Backfill handlers for the tests, imported by Spark's Python workers."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path


def handled_file(topic: str) -> Path:
    return Path(tempfile.gettempdir()) / f"gapwatch-handler-{topic}.txt"


def record_log(records, *, pause: float = 0.0) -> None:
    """Appends ``partition offset origin`` of every record to
    ``handled_file(topic)``, origin the file this module was imported from
    (in a session's shipped code: a path inside its zip)."""
    for record in records:
        time.sleep(pause)
        with open(handled_file(record["topic"]), "a") as log:
            log.write(f"{record['partition']} {record['offset']} {__file__}\n")


def slow_record_log(records) -> None:
    """``record_log`` 0.5 s a record: slow enough to be stopped half-way,
    even on a loaded machine."""
    record_log(records, pause=0.5)
