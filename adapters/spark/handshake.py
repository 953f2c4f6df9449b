"""How one backfill attempt and the runner that started it talk: two files in
the attempt's work folder and one decision. The Spark job
(``adapters.spark.backfill_job``) is one side; the runner
(``tasks.backfill.runner``, in the worker) is the other;
``tasks.backfill.launch`` carries the decision.

The staged -> explain -> publish protocol of a sink that must be published
(Parquet; ``sink.needs_publish``):

1. The job writes the records into staging and counts what staging holds,
   rewriting the progress file as it goes (``ProgressFile``: phase, records
   done of total).
2. It writes the result file with status ``staged`` (its per-partition
   counts), then the progress phase ``staged``, and waits
   (``await_decision``).
3. The runner, reading the progress file, sees ``staged``, reads the staged
   counts from the result file, explains every missing offset against the
   cluster (``tasks.backfill.checks``) and decides (``decision_for``):
   ``publish`` when everything is explained, ``discard`` otherwise, or when
   explaining failed.
4. The decision reaches the job once: a line on the job process's stdin,
   read by ``ParentPipe``, or a ``Decision`` in the worker's own process for
   an attempt on a Spark Connect session.
5. The job publishes (staging becomes ``<output>/<job id>/``) or discards,
   and writes the result file with status ``published`` or ``discarded``.

If the runner's process dies before step 4, the job's stdin closes and it
exits unpublished (``EXIT_PARENT_GONE``; on Spark Connect the attempt's
watchdog interrupts it). Without a channel (the job run by hand) the job
decides alone: publish unless it holds duplicates or records outside the
range. Sinks that deliver as they write (kafka, handler) skip steps 2 to 5:
status ``delivered``.

Both files are written whole (a rename), so neither side reads half a file.
Pure: no Spark, no Django.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from groups.domain.backfill import report_explained

PROGRESS_FILE = "progress.json"
RESULT_FILE = "result.json"
STAGED = "staged"
PUBLISH = "publish"
DISCARD = "discard"
# The statuses of a complete result: after step 5, or from a sink that delivers as it writes.
PUBLISHED = "published"
DISCARDED = "discarded"
DELIVERED = "delivered"
FINISHED = (PUBLISHED, DELIVERED, DISCARDED)
EXIT_PARENT_GONE = 3


def write_json(path: str | Path, payload: dict) -> None:
    """Write ``payload`` whole: to a temporary file, then renamed into place."""
    target = Path(path)
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps(payload, indent=1, default=str))
    os.replace(temporary, target)


def read_json(path: str | Path) -> dict | None:
    """The file's object, or None while it is not there (or not JSON)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


class ProgressFile:
    """The job's progress: ``{"phase", "done", "total", "at", "phases", ...}``,
    rewritten whole at every change; ``phases`` says when each phase so far
    began (epoch seconds), so a reader that missed one still knows it."""

    def __init__(self, path: str, total: int) -> None:
        self.path = Path(path)
        self.total = total
        self._lock = threading.Lock()
        self._phases: dict[str, float] = {}

    def write(self, phase: str, done: int, **extra) -> None:
        """``phase`` now, unless the job has left it: a phase left is never
        written again (a progress tracker's late "writing" once overwrote
        "staged", and the runner, waiting for "staged", never decided)."""
        with self._lock:  # the progress trackers write from their own threads
            if phase in self._phases and phase != next(reversed(self._phases)):
                return
            at = time.time()
            self._phases.setdefault(phase, at)
            write_json(self.path, {"phase": phase, "done": int(done), "total": self.total, "at": at,
                                   "phases": dict(self._phases), **extra})


class ParentPipe(threading.Thread):
    """Step 4 for a job process: reads the runner's decision from stdin; if
    stdin closes before one arrives, the runner is gone and so is the job."""

    def __init__(self) -> None:
        super().__init__(name="backfill-parent-pipe", daemon=True)
        self.decision: str | None = None
        self.decided = threading.Event()

    def run(self) -> None:
        # Raw reads of fd 0: a daemon thread blocked in sys.stdin's buffered
        # reader makes the interpreter abort at exit (it holds the buffer lock).
        pending = b""
        while chunk := os.read(0, 4096):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace").strip()
                if line in (PUBLISH, DISCARD) and not self.decided.is_set():
                    self.decision = line
                    self.decided.set()
        if not self.decided.is_set():
            sys.stderr.write("backfill job: the parent closed its pipe without a decision; exiting unpublished\n")
            sys.stderr.flush()
            # The JVM exits by itself when this process's pipe to it closes.
            os._exit(EXIT_PARENT_GONE)


class Decision:
    """Step 4 for an attempt in the runner's own process (Spark Connect): what
    ``ParentPipe`` is to a job process. The first decision counts.
    ``asked`` is set when the job waits for it (step 2), so the runner in
    the same process need not poll for that."""

    def __init__(self, asked: threading.Event | None = None) -> None:
        self.decision: str | None = None
        self.decided = threading.Event()
        self.asked = asked or threading.Event()

    def decide(self, decision: str) -> None:
        if not self.decided.is_set():
            self.decision = decision
            self.decided.set()


def await_decision(*, channel: ParentPipe | Decision | None, result: dict, result_file: str,
                   progress: ProgressFile) -> str:
    """Steps 2 and 4, the job's side, once its staged counts are in
    ``result["partitions"]``: tell the runner and wait for its decision; with
    no ``channel``, decide alone (publish unless there are duplicates or
    records outside the range)."""
    if channel is None:
        clean = all(p["duplicates"] == 0 and p["outside_range"] == 0 for p in result["partitions"])
        return PUBLISH if clean else DISCARD
    result["status"] = STAGED
    write_json(result_file, result)
    progress.write(STAGED, progress.total)
    asked = getattr(channel, "asked", None)
    if asked is not None:
        asked.set()
    channel.decided.wait()
    return channel.decision


def decision_for(report: list[dict]) -> str:
    """Step 3, the runner's decision on the explained staged counts."""
    return PUBLISH if report_explained(report) else DISCARD
