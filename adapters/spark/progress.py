"""How far a backfill's write has come, estimated from Spark's tasks: each
range is split into tasks of near-equal offset counts, so records done are
the total times the share of tasks done. Written to the attempt's progress
file (``adapters.spark.handshake.ProgressFile``) as phase ``writing``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from adapters.spark.handshake import ProgressFile


class TaskProgress(threading.Thread):
    """Estimates records done from the write's completed Spark tasks (Spark
    splits each range into tasks of near-equal offset counts), from the
    status tracker of a session of this process's own SparkContext."""

    def __init__(self, spark, progress: ProgressFile, group: str, interval: float = 0.5) -> None:
        super().__init__(name="backfill-progress", daemon=True)
        self.tracker = spark.sparkContext.statusTracker()
        self.progress = progress
        self.group = group
        self.interval = interval
        self.stopped = threading.Event()

    def stop(self) -> None:
        """No write after this returns (a write under way ends first)."""
        self.stopped.set()
        if self.is_alive() and self is not threading.current_thread():
            self.join(timeout=10)

    def run(self) -> None:
        last = None
        while not self.stopped.wait(self.interval):
            try:
                done_tasks = total_tasks = 0
                for job_id in self.tracker.getJobIdsForGroup(self.group):
                    job = self.tracker.getJobInfo(job_id)
                    for stage_id in job.stageIds if job else []:
                        stage = self.tracker.getStageInfo(stage_id)
                        if stage:
                            done_tasks += stage.numCompletedTasks
                            total_tasks += stage.numTasks
            except Exception:  # noqa: BLE001 - progress is best effort; the JVM may be stopping
                continue
            if total_tasks and (done_tasks, total_tasks) != last:
                last = (done_tasks, total_tasks)
                done = self.progress.total * done_tasks // total_tasks
                self.progress.write("writing", done, tasks_done=done_tasks, tasks_total=total_tasks)


class ConnectProgress:
    """The same estimate for a Spark Connect session, from its progress
    handler (the stages of the running operation: tasks done of total)."""

    def __init__(self, spark, progress: ProgressFile) -> None:
        self.spark = spark
        self.progress = progress
        self.active = False
        self._last = None

    def start(self) -> None:
        self.active = True
        self.spark.registerProgressHandler(self._handle)

    def stop(self) -> None:
        self.active = False
        self.spark.removeProgressHandler(self._handle)

    def _handle(self, stages, inflight_tasks, operation_id, done) -> None:
        total_tasks = sum(stage.num_tasks for stage in stages)
        done_tasks = sum(stage.num_completed_tasks for stage in stages)
        if not self.active or not total_tasks or (done_tasks, total_tasks) == self._last:
            return
        self._last = (done_tasks, total_tasks)
        self.progress.write("writing", self.progress.total * done_tasks // total_tasks,
                            tasks_done=done_tasks, tasks_total=total_tasks)


@contextmanager
def tracked(spark, progress: ProgressFile, *, connect: bool, tag: str, description: str) -> Iterator[None]:
    """Progress estimated while the block writes: from the Connect session's
    progress handler, or on a session of this process from the tasks of the
    block's Spark jobs (a job group of their own, ``<tag>-write``; what
    follows runs as ``<tag>-verify``)."""
    progress.write("writing", 0)
    if connect:
        tracker = ConnectProgress(spark, progress)
        tracker.start()
    else:
        tracker = TaskProgress(spark, progress, f"{tag}-write")
        tracker.start()
        spark.sparkContext.setJobGroup(f"{tag}-write", description)
    try:
        yield
    finally:
        tracker.stop()
        if not connect:
            spark.sparkContext.setJobGroup(f"{tag}-verify", "count what the sink holds")
