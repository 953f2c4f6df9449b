"""Busy workers (issue 42): guarded expansions that wait, at once, while the
watch goes on, on real processes as `make up` runs them (beat, a worker for
the queue "watch", one for jobs). Used by tests/faults/test_busy_workers.py
and bench/busy_bench.py.

Each expansion's topic is read by a share group set to latest that left it:
the plan protects the group before, and nobody initialises the new
partitions, so the job waits in its watch step until
EXPANSION_WATCH_SECONDS. Producers write to every topic meanwhile. The
watch's pulse is read from Redis (groups.services.cadence), the polls'
from the cluster row, sampled while the jobs wait."""

from __future__ import annotations

import os
import re
import signal
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from controlplane.celery import app
from groups.models import Cluster, ConsumerGroup, ExpansionJob, RemediationJob
from groups.services.cadence import tick_counts
from groups.services.expansion.job import expansion_approve, expansion_request
from groups.services.expansion.plan import expansion_plan, expansion_plan_as_dict
from groups.services.remediation import job_approve
from tasks.expansion.verdict import partitions_verdict
from tests.factories import user_with_role
from tests.harness.kafka_clients import Broker, RateProducer, ShareGroupConsumer, set_share_reset, stop_all, wait_until
from tests.harness.workers import start_celery, stop_celery, worker_env

POLL_SECONDS = 3


def _verdict(cluster, topic: str, count: int):
    return partitions_verdict(cluster=cluster, topic=topic, count=count)


def share_group_that_left(broker: Broker, cluster: Cluster, topic: str, group_id: str, poll) -> None:
    """A share group set to latest that read ``topic`` and left: the plan protects it before."""
    set_share_reset(broker.bootstrap, group_id, "latest")
    member = ShareGroupConsumer(broker.bootstrap, group_id, topic, refresh_ms=2000)
    try:
        wait_until(lambda: broker.produce(topic, 0, 1) or member.count(0) > 0, interval=0.5,
                   what=f"{group_id} reading {topic}")
    finally:
        member.close()
    wait_until(lambda: poll(cluster) and ConsumerGroup.objects.filter(
        group_id=group_id, group_topics__topic__name=topic, member_count=0).exists(), interval=0.5,
        what=f"a poll to see {group_id}, empty, reading {topic}")


# Celery's own format ("[2026-11-30 06:49:40,959: INFO/MainProcess] ...") and Django's
# ("2026-11-30 06:49:40,959 INFO ...").
CELERY_LOG_TIME = re.compile(r"^\[?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})[: ]")


def watch_log_of(log_path: Path) -> Path:
    """Where ``run_busy`` keeps the watch worker's own log, beside ``log_path``."""
    return log_path.with_name(f"watch-{log_path.name}")


# "Task gapwatch.watch_cluster[3f1c...] received", as a worker logs each task it takes, at INFO.
TASK_RECEIVED = re.compile(r"Task ([\w.]+)\[[^\]]+\] received")


def _text(log: Path | list[str]) -> str:
    return "\n".join(log) if isinstance(log, list) else log.read_text(errors="replace")


def tasks_received(log: Path | list[str]) -> set[str]:
    """The names of the tasks a worker logging at INFO (to the file ``log``, or in its lines) took."""
    return set(TASK_RECEIVED.findall(_text(log)))


# "Task gapwatch.watch_cluster[3f1c...] succeeded in 8.42s: ...", as a worker logs each task's end, at INFO.
TASK_SUCCEEDED = re.compile(r"Task ([\w.]+)\[[^\]]+\] succeeded in ([0-9.]+)s")


def task_seconds(log: Path | list[str]) -> list[tuple[str, float]]:
    """Each task a worker logging at INFO (to the file ``log``, or in its lines) finished, with how long it ran."""
    return [(name, float(seconds)) for name, seconds in TASK_SUCCEEDED.findall(_text(log))]


def longest_gap(log_path: Path, times: list[float], start: float) -> tuple[float, list[str]]:
    """The longest gap between ``times`` (epoch seconds, from ``start``) and
    the lines of a worker's log stamped inside it: what the watch ran, or
    that it logged nothing, while no tick arrived."""
    edges = [start, *times]
    if len(edges) < 2:
        return 0.0, []
    begin, end = max(zip(edges, edges[1:]), key=lambda pair: pair[1] - pair[0])
    lines = []
    for line in log_path.read_text(errors="replace").splitlines():
        found = CELERY_LOG_TIME.match(line)
        if found:
            moment = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()  # local time, as logged
            if begin <= moment <= end:
                lines.append(line[:300])
    return end - begin, lines


def gap_log(log_path: Path, times: list[float], start: float, *, most: int = 60) -> str:
    """``longest_gap`` in words, at most ``most`` of its lines."""
    if not times:
        return "no gap: no tick"
    seconds, lines = longest_gap(log_path, times, start)
    shown = lines if len(lines) <= most else [*lines[:most // 2], "...", *lines[-(most // 2):]]
    return f"the longest gap, {seconds:.1f} s: {len(lines)} log lines\n" + "\n".join(shown)


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


@dataclass
class Pulse:
    """What the watch did while the jobs waited: ``ticks`` the arrivals,
    ``polls`` the full polls' ends (sampled), ``span`` the window in seconds."""

    span: float = 0.0
    ticks: list[float] = field(default_factory=list)
    ticks_ran: int = 0
    ticks_skipped: int = 0
    polls: list[float] = field(default_factory=list)
    polls_total: int = 0
    jobs: dict[int, tuple[str, str]] = field(default_factory=dict)  # id -> (status, error)
    backfills: list[int] = field(default_factory=list)  # remediation job ids
    backfills_running_when_expansions_ended: int = 0

    @staticmethod
    def delays(times: list[float], interval: float, start: float) -> list[float]:
        """How late each arrival came after the one before was due again (never below 0)."""
        previous, late = start, []
        for moment in times:
            late.append(max(0.0, moment - previous - interval))
            previous = moment
        return late

    @staticmethod
    def spread(late: list[float]) -> str:
        """Delays as "p50 / p95 / max" in seconds, "-" when there are none."""
        if not late:
            return "-"
        return f"{statistics.median(late):.2f} / {nearest_rank(late, 0.95):.2f} / {max(late):.2f}"

    def summary(self, start: float, interval: float, times: list[float]) -> str:
        return (f"{len(times)} in {self.span:.0f} s; delay p50 / p95 / max "
                f"{self.spread(self.delays(times, interval, start))} s")


def run_busy(broker: Broker, cluster: Cluster, *, expansions: int, tag: str, log_path: Path, poll,
             kill_jobs_worker: bool, watch_gives_up: int = 30, backfills: int = 0,
             backfill_output: Path | None = None) -> tuple[Pulse, float]:
    """``expansions`` guarded expansions waiting at once (see the module); with
    ``kill_jobs_worker`` the jobs' worker is SIGKILLed once they all wait and a
    new one started. ``backfills``: that many long Parquet backfills
    (``tests.harness.backfills.Scenario`` of BIG records a partition, on
    clusters of their own) approved just before the expansions, run by
    drivers (BACKFILL_DRIVER=process) into ``backfill_output``. Returns the
    pulse and the window's start (epoch seconds). With 0 expansions the
    window is ``watch_gives_up`` seconds of an idle watch."""
    from tests.harness.backfills import BIG, Scenario

    topics = [f"busy-{n}-{tag}" for n in range(expansions)]
    alice, bob = user_with_role(f"alice-{tag}", "approver"), user_with_role(f"bob-{tag}", "approver")
    jobs, producers = [], []
    scenarios = [Scenario(broker, f"busy-bf-{n}-{tag}", f"busy-bf-{n}-{tag}", BIG) for n in range(backfills)]
    for n, topic in enumerate(topics):
        broker.create_topic(topic, 2)
        share_group_that_left(broker, cluster, topic, f"busy-share-{n}-{tag}", poll)
        shown = expansion_plan_as_dict(expansion_plan(user=alice, cluster=cluster.name, topic=topic, partitions=4,
                                                      dry_run=True, verdict=_verdict))
        assert [g["outcome"] for g in shown["groups"]] == ["protected_before"], shown["groups"]
        jobs.append(expansion_request(user=alice, cluster=cluster.name, topic=topic, partitions=4,
                                      fingerprint=shown["fingerprint"], verdict=_verdict).id)
        producers.append(RateProducer(broker.bootstrap, topic, rate=20, partitions=[0, 1]))

    env = worker_env(POLL_INTERVAL_SECONDS=str(POLL_SECONDS), WATCH_INTERVAL_SECONDS="1",
                     EXPANSION_WATCH_SECONDS=str(watch_gives_up), EXPANSION_STALL_SECONDS="3",
                     EXPANSION_RECOVERY_SECONDS="2", POLL_LOCK_SECONDS="10", BACKFILL_DRIVER="process",
                     BACKFILL_OUTPUT=str(backfill_output or log_path.parent / "backfills"), SPARK_MASTER="local[1]",
                     JOB_RECOVERY_SECONDS="2")
    log = open(log_path, "ab")  # noqa: SIM115 - shared by the processes below
    # The watch's worker logs at INFO to a file of its own (watch_log_of): each task's arrival and end, to
    # tell what it ran, and what it did in a gap (gap_log).
    watch_log = open(watch_log_of(log_path), "ab")  # noqa: SIM115 - closed with the other
    watch = start_celery(["worker", "-Q", "watch", "--pool", "threads", "--concurrency", "4", "-l", "INFO",
                          "-n", f"watch-{tag}@%h"], env, watch_log)
    jobs_worker = start_celery(["worker", "-Q", "celery", "--pool", "threads", "--concurrency", "2",
                                "-n", f"jobs-{tag}@%h"], env, log)
    beat = start_celery(["beat", "--pidfile=", "-S", "django_celery_beat.schedulers:DatabaseScheduler"], env, log)
    processes = [watch, jobs_worker, beat]
    pulse = Pulse()
    try:
        for scenario in scenarios:
            backfill = scenario.request_job(alice, "parquet")  # approved at once without FOUR_EYES
            if backfill.status == RemediationJob.Status.REQUESTED:
                backfill = job_approve(user=bob, job_id=backfill.id)
            pulse.backfills.append(backfill.id)
        for job_id in jobs:
            expansion_approve(user=bob, job_id=job_id, verdict=_verdict)

        def all_waiting() -> bool:
            rows = list(ExpansionJob.objects.filter(id__in=jobs))
            assert not [r for r in rows if r.status in ExpansionJob.FINISHED], [(r.id, r.error) for r in rows]
            return all("add_partitions" in r.steps for r in rows)
        wait_until(all_waiting, timeout=180, interval=0.5, what="every expansion waiting in its watch step")
        wait_until(lambda: tick_counts(cluster_id=cluster.id)["last"] is not None, timeout=120, interval=0.5,
                   what="the watch's first tick")
        begun, start = tick_counts(cluster_id=cluster.id), time.time()
        polls_before = Cluster.objects.get(id=cluster.id).polls_total
        seen_polls: list[float] = []

        def sample_polls() -> None:
            last = Cluster.objects.values_list("last_poll_at", flat=True).get(id=cluster.id)
            if last is not None and last.timestamp() > start and (not seen_polls or last.timestamp() > seen_polls[-1]):
                seen_polls.append(last.timestamp())

        if kill_jobs_worker:
            # The jobs' worker dies with their next runs' messages; a new one takes the jobs over.
            os.killpg(jobs_worker.pid, signal.SIGKILL)
            jobs_worker.wait(timeout=30)
            tokens = dict(ExpansionJob.objects.filter(id__in=jobs).values_list("id", "run_token"))
            processes.append(start_celery(["worker", "-Q", "celery", "--pool", "threads", "--concurrency", "2",
                                           "-n", f"jobs-again-{tag}@%h"], env, log))
            wait_until(lambda: sample_polls() or all(
                row.run_token != tokens[row.id] or row.status in ExpansionJob.FINISHED
                for row in ExpansionJob.objects.filter(id__in=jobs)),
                timeout=120, interval=0.2, what="the new worker to take every expansion over")
        deadline = start + watch_gives_up
        wait_until(lambda: sample_polls() or (
            all(row.status in ExpansionJob.FINISHED for row in ExpansionJob.objects.filter(id__in=jobs))
            and time.time() >= (deadline if not jobs else 0)),
            timeout=watch_gives_up + 180, interval=0.2, what="every expansion to end")
        pulse.backfills_running_when_expansions_ended = RemediationJob.objects.filter(
            id__in=pulse.backfills, status=RemediationJob.Status.RUNNING).count()
        wait_until(lambda: sample_polls() or not RemediationJob.objects.filter(
            id__in=pulse.backfills).exclude(status__in=RemediationJob.FINISHED).exists(),
            timeout=600, interval=0.5, what="every backfill to end")
        ended = tick_counts(cluster_id=cluster.id)
        pulse.polls_total = Cluster.objects.get(id=cluster.id).polls_total - polls_before
    finally:
        stop_all(producers)
        # Beat first, then the workers, then what beat sent meanwhile: a poll of every cluster left
        # in the queue would run in the next test's worker, on its clusters.
        for process in [beat, *(p for p in processes if p is not beat)]:
            stop_celery(process)
        app.control.purge()
        log.close()
        watch_log.close()
    pulse.ticks = [a for a in ended["arrivals"] if a > start]
    pulse.span = (pulse.ticks[-1] if pulse.ticks else time.time()) - start
    pulse.ticks_ran, pulse.ticks_skipped = ended["ran"] - begun["ran"], ended["skipped"] - begun["skipped"]
    pulse.polls = seen_polls
    pulse.jobs = {row.id: (row.status, row.error) for row in ExpansionJob.objects.filter(id__in=jobs)}
    return pulse, start
