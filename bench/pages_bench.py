"""Server time of the pages, the findings API and /metrics at issue 24's
scale: 100,000 findings (20,000 open, 80,000 closed), 3,000 groups, and
30 days of lag samples (one a minute) for a few groups; and issue 44's list
pages (every sort, the hidden rows shown, searches, deep pages) with
``--topics`` topics (a fifth of them deleted, a tenth of the groups gone).

Run with `bash bench/run_pages.sh [--findings N] [--open N] [--groups N] [--topics N]`.
Measures Django's full request handling in process (test client: middleware,
session, queries, template rendering), 50 requests each after 3 warm-up
requests (10 after 1 for /metrics); prints median, p95, the answer's size and
the CPU time a request took in Django and in PostgreSQL.

The data is written once per size (COPY for the big tables) and kept in the
bench's own database: a run with the same sizes reuses it, other sizes
replace it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
# The application as gunicorn loads it, garbage-collector freeze included.
import controlplane.wsgi  # noqa: E402, F401

from django.contrib.auth.models import User  # noqa: E402
from django.db import connection, models, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from groups.models import (  # noqa: E402
    Cluster, ConsumerGroup, Finding, FindingUrgency, GroupTopic, JobFinding, LagSample, PartitionGeneration,
    RemediationJob, Topic,
)

CLUSTER = "pages-bench"
# Bumped when the data's shape changes, so a kept database is written again
# (stored in the cluster's never-contacted bootstrap address).
LAYOUT = 3
BOOTSTRAP = f"bench-layout-{LAYOUT}.invalid:9092"
TOPICS_PER_GROUP = 2
# Each topic grew three times by 10 partitions: 10 -> 20 -> 30 -> 40.
GENERATIONS = (2, 3, 4)
ADDED_PER_GENERATION = 10
SAMPLED_GROUPS, DAYS = 5, 30
# Open findings by state, and how closed ones left the list (fractions of each).
OPEN_STATES = [("gap", 12), ("covered", 3), ("pending", 2), ("undecided", 1), ("unowned", 1), ("expired", 1)]
RESOLUTIONS = [("repaired", 10), ("partial", 1), ("dismissed", 7), ("expired", 2)]


def _weighted(choices: list[tuple[str, int]], n: int) -> str:
    """The n-th value of a deterministic round robin weighted by ``choices``."""
    slot = n % sum(weight for _, weight in choices)
    for value, weight in choices:
        if slot < weight:
            return value
        slot -= weight
    raise AssertionError


def copy_rows(model: type[models.Model], columns: Sequence[str], rows: Iterable[tuple]) -> None:
    """COPY ``rows`` into ``model``'s table (psycopg 3): several times faster than bulk_create."""
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(model._meta.get_field(c).column) for c in columns)
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _populated(cluster: Cluster, *, findings: int, open_findings: int, groups: int, topics: int) -> bool:
    return (cluster.bootstrap_servers == BOOTSTRAP
            and ConsumerGroup.objects.filter(cluster=cluster).count() == groups
            and Topic.objects.filter(cluster=cluster).count() == topics
            and Finding.objects.filter(cluster=cluster).count() == findings
            and Finding.objects.filter(cluster=cluster, closed_at__isnull=True).count() == open_findings)


def prepare(*, findings: int, open_findings: int, groups: int, topics: int) -> ConsumerGroup:
    """The bench's data, reused when it has these sizes; returns the measured
    group (one with lag samples and findings)."""
    cluster = Cluster.objects.filter(name=CLUSTER).first()
    if cluster is not None and _populated(cluster, findings=findings, open_findings=open_findings, groups=groups,
                                          topics=topics):
        return ConsumerGroup.objects.filter(cluster=cluster).order_by("id").first()
    slots = TOPICS_PER_GROUP * len(GENERATIONS) * ADDED_PER_GENERATION
    if findings > groups * slots:
        raise SystemExit(f"at most {slots} findings a group: {findings} findings need {-(-findings // slots)} groups")
    with connection.cursor() as cursor:
        # The bench's own database: every table that refers to a cluster goes with it.
        cursor.execute(f"TRUNCATE {Cluster._meta.db_table} CASCADE")
    with transaction.atomic():
        group = _populate(findings=findings, open_findings=open_findings, groups=groups, topics=topics)
    with connection.cursor() as cursor:
        cursor.execute("vacuum analyze")
    return group


def default_topics(groups: int) -> int:
    return max(1, groups * TOPICS_PER_GROUP // 6)  # six groups read each topic


def _populate(*, findings: int, open_findings: int, groups: int, topics: int) -> ConsumerGroup:
    now = timezone.now()
    cluster = Cluster.objects.create(name=CLUSTER, bootstrap_servers=BOOTSTRAP)
    topic_count = topics
    # Topics no group reads (topic_count above the groups' share) are deleted ones, up to a fifth of all.
    read_topics = min(topic_count, max(default_topics(groups), topic_count - topic_count // 5))
    last_partitions = ADDED_PER_GENERATION * (1 + len(GENERATIONS))
    topics = Topic.objects.bulk_create(
        Topic(cluster=cluster, name=f"topic-{n:05d}", kafka_topic_id=f"id{n}", partition_count=last_partitions,
              first_seen_at=now - timedelta(days=90), updated_at=now - timedelta(minutes=n),
              deleted=n >= read_topics)
        for n in range(topic_count)
    )
    generations = PartitionGeneration.objects.bulk_create(
        (PartitionGeneration(topic=t, number=number, kafka_topic_id=t.kafka_topic_id,
                             partitions=list(range(ADDED_PER_GENERATION * number)),
                             added_partitions=list(range(ADDED_PER_GENERATION * (number - 1),
                                                         ADDED_PER_GENERATION * number)),
                             observed_at=now - timedelta(days=10 * (GENERATIONS[-1] - number)))
         for t in topics for number in GENERATIONS),
        batch_size=5000,
    )
    generation_of = {(g.topic_id, g.number): g.id for g in generations}
    consumer_groups = ConsumerGroup.objects.bulk_create(
        (ConsumerGroup(cluster=cluster, group_id=f"group-{n:05d}", state="Stable" if n % 10 else "Dead",
                       type="classic", member_count=2 if n % 10 else 0, present=n % 10 != 9,
                       first_seen_at=now - timedelta(days=90), last_seen_at=now - timedelta(seconds=n))
         for n in range(groups)),
        batch_size=5000,
    )

    def topics_of(n: int) -> list[Topic]:
        return [topics[(n * TOPICS_PER_GROUP + k) % read_topics] for k in range(TOPICS_PER_GROUP)]

    partitions = [{"partition": p, "log_start": 0, "committed": 900, "high_watermark": 1000, "lag": 100,
                   "client_id": "bench", "host": "/10.0.0.1"} for p in range(last_partitions)]
    copy_rows(GroupTopic, ["group", "topic", "lag", "first_seen_at", "updated_at", "partitions"],
              ((g.id, t.id, 100 * last_partitions, now, now, json.dumps(partitions))
               for n, g in enumerate(consumer_groups) for t in topics_of(n)))

    # Finding n belongs to group n % groups; its slot among that group's
    # (topic, generation, partition) places comes from n // groups. A stride
    # coprime with the count picks which are open: exactly open_findings,
    # spread over every group (not every fifth one).
    stride = next(p for p in range(7919, 2 * 7919 + findings) if math.gcd(p, findings) == 1)
    findings_rows, repaired = [], []
    for n in range(findings):
        group = consumer_groups[n % groups]
        slot = n // groups
        topic = topics_of(n % groups)[slot // (len(GENERATIONS) * ADDED_PER_GENERATION)]
        number = GENERATIONS[(slot // ADDED_PER_GENERATION) % len(GENERATIONS)]
        partition = ADDED_PER_GENERATION * (number - 1) + slot % ADDED_PER_GENERATION
        is_open = n * stride % findings < open_findings
        created = now - timedelta(minutes=n)
        state = _weighted(OPEN_STATES, n) if is_open else "gap"
        resolution = "" if is_open else _weighted(RESOLUTIONS, n)
        closed_at = None if is_open else created + timedelta(hours=6)
        lag = 0 if state == "covered" else 100 + n % 5000
        findings_rows.append((
            cluster.id, group.id, topic.id, partition, generation_of[(topic.id, number)], state, created,
            closed_at or now, 0, 0, 1000, 900, lag, 500, 20, 0, 520, "assumed", "assumed latest", resolution,
            closed_at, "", "", "", "", 0, 0, ""))
        if resolution in ("repaired", "partial"):
            repaired.append((n, group.id))
    copy_rows(Finding, [
        "cluster", "group", "topic", "partition", "generation", "state", "created_at", "updated_at",
        "first_log_start", "log_start_offset", "high_watermark", "committed_offset", "lag", "missed_definite",
        "missed_possible", "backfill_start", "backfill_end", "policy_source", "explanation", "resolution",
        "closed_at", "closed_reason", "owner_member_id", "owner_client_id", "owner_host", "polls_without_owner",
        "expired", "likely_start_evidence"], findings_rows)
    _add_repair_jobs(cluster, repaired, now)
    # Every open finding's urgency as the worker stores it (tasks.urgency): expiries spread over a week.
    copy_rows(FindingUrgency, ["finding", "read_at", "retention_ms", "retention_bytes", "cleanup_policy",
                               "timestamp_type", "first_offset", "first_timestamp", "expires_at", "error"],
              ((finding_id, now, 7 * 86_400_000, -1, "delete", "CreateTime", 0, now - timedelta(minutes=n % 10_080),
                now - timedelta(minutes=n % 10_080) + timedelta(days=7), "")
               for n, finding_id in enumerate(Finding.objects.filter(cluster=cluster, closed_at__isnull=True)
                                              .order_by("id").values_list("id", flat=True))))

    minutes = DAYS * 24 * 60
    for n, group in enumerate(consumer_groups[:SAMPLED_GROUPS]):
        copy_rows(LagSample, ["group", "topic", "at", "lag"],
                  ((group.id, topics_of(n)[0].id, now - timedelta(minutes=m), (m * 37) % 5000)
                   for m in range(minutes)))
    return consumer_groups[0]


def _add_repair_jobs(cluster: Cluster, repaired: list[tuple[int, int]], now: datetime) -> None:
    """One succeeded backfill per group for its repaired findings, linked as
    the jobs that resolved them (the history's Remediation column, /metrics'
    recovered messages)."""
    by_group: dict[int, list[int]] = {}
    for n, group_id in repaired:
        by_group.setdefault(group_id, []).append(n)
    jobs = RemediationJob.objects.bulk_create(
        (RemediationJob(cluster=cluster, group_id=group_id, kind="backfill", status="succeeded", finished_at=now)
         for group_id in by_group),
        batch_size=5000,
    )
    ids = dict(Finding.objects.filter(cluster=cluster, resolution__in=("repaired", "partial"))
               .values_list("created_at", "id"))
    finding_ids = {n: ids[now - timedelta(minutes=n)] for n, _ in repaired}
    copy_rows(JobFinding, ["job", "finding", "kind", "active"],
              ((job.id, finding_ids[n], "backfill", False) for job in jobs for n in by_group[job.group_id]))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Finding._meta.db_table} f SET resolved_by_job_id = l.job_id, recovered_messages = 520,"
            f" redelivered_messages = 0 FROM {JobFinding._meta.db_table} l WHERE l.finding_id = f.id")


def _backend_cpu_seconds() -> tuple[int, float]:
    """The PostgreSQL backend serving this process's connection: its pid and
    the CPU time it has used (``/proc``; the database runs on this machine)."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return pid, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(client: Client, url: str, runs: int = 50, warmups: int = 3) -> tuple[float, float, int, str]:
    """Median and p95 wall time (ms), the answer's size, and the CPU time a
    request used in Django and in its PostgreSQL backend: on a shared
    machine, wall times follow the load; CPU time much less."""
    for _ in range(warmups):
        assert client.get(url).status_code == 200, url
    times = []
    pid, backend_before = _backend_cpu_seconds()
    process_before = time.process_time()
    for _ in range(runs):
        begin = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - begin) * 1000)
        assert response.status_code == 200
    django_cpu = (time.process_time() - process_before) * 1000 / runs
    same_pid, backend_after = _backend_cpu_seconds()
    backend_cpu = (backend_after - backend_before) * 1000 / runs if same_pid == pid else None
    cpu = (f"CPU a request: Django {django_cpu:.1f} ms + PostgreSQL {backend_cpu:.1f} ms" if backend_cpu is not None
           else f"CPU a request: Django {django_cpu:.1f} ms + PostgreSQL n/a (reconnected)")
    times.sort()
    return statistics.median(times), times[max(0, int(0.95 * len(times)) - 1)], len(response.content), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--findings", type=int, default=100_000, help="findings, open and closed (100,000)")
    parser.add_argument("--open", type=int, default=20_000, dest="open_findings",
                        help="how many of them are open (20,000)")
    parser.add_argument("--groups", type=int, default=3_000, help="consumer groups (3,000)")
    parser.add_argument("--topics", type=int, default=None,
                        help="topics (default: a third of the groups' two topics each, 1,000 at 3,000 groups)")
    parser.add_argument("--only", default="", help="measure only the pages whose label contains this text")
    args = parser.parse_args()
    if not 0 <= args.open_findings <= args.findings:
        parser.error("--open must be between 0 and --findings")

    topics = args.topics if args.topics is not None else default_topics(args.groups)
    if topics < default_topics(args.groups):
        parser.error(f"--topics must be at least {default_topics(args.groups)} (six groups read each topic)")
    started = time.monotonic()
    group = prepare(findings=args.findings, open_findings=args.open_findings, groups=args.groups, topics=topics)
    print(f"prepared in {time.monotonic() - started:.1f}s: {Finding.objects.count()} findings "
          f"({Finding.objects.filter(closed_at__isnull=True).count()} open), "
          f"{ConsumerGroup.objects.count()} groups ({ConsumerGroup.objects.filter(present=False).count()} gone), "
          f"{Topic.objects.count()} topics ({Topic.objects.filter(deleted=True).count()} deleted), "
          f"{LagSample.objects.count()} lag samples")
    user, _ = User.objects.get_or_create(username="bench", defaults={"is_superuser": True, "is_staff": True})
    client = Client()
    client.force_login(user)
    findings, groups = f"{args.findings:,}", f"{args.groups:,}"
    topic = GroupTopic.objects.filter(group=group).order_by("topic__name").values_list("topic__name", flat=True)[0]
    pages = [
        (f"home page (triage of {args.open_findings:,} open findings)", "/"),
        ("home page, open findings per partition, sorted by lag, page 100", "/?view=partitions&sort=lag&page=100"),
        ("findings table fragment (live refresh)", "/findings/table"),
        (f"history, first page of {findings} findings", "/?view=history"),
        ("history, filtered by group and resolution", f"/?view=history&group={group.group_id}&resolution=repaired"),
        ("history, page 1,000", "/?view=history&page=1000"),
        ("group page, default chart (fitted to its events)", f"/groups/{group.id}/"),
        ("group page, 24 h chart", f"/groups/{group.id}/?window=24h"),
        (f"group page, {DAYS}-day chart over {DAYS} days of samples", f"/groups/{group.id}/?window=30d"),
        (f"groups list, first page of {groups}", "/groups/"),
        ("groups list, searched", "/groups/?q=group-009"),
        ("groups list, by lag", "/groups/?sort=lag"),
        ("groups list, by open findings", "/groups/?sort=findings"),
        ("groups list, by state", "/groups/?sort=state"),
        ("groups list, by last seen", "/groups/?sort=last_seen"),
        ("groups list, gone ones shown, page 50", "/groups/?all=1&page=50"),
        ("groups list, searched, by lag", "/groups/?q=group-01&sort=lag"),
        (f"topics list, first page of {topics:,}", "/topics/"),
        ("topics list, by open findings", "/topics/?sort=findings"),
        ("topics list, by groups reading", "/topics/?sort=groups"),
        ("topics list, by partitions", "/topics/?sort=partitions"),
        ("topics list, by last change", "/topics/?sort=changed"),
        ("topics list, deleted ones shown, page 80", "/topics/?all=1&page=80"),
        ("topics list, searched", "/topics/?q=topic-012"),
        ("home page, by soonest expiry", "/?sort=expires"),
        ("home page, filtered by group, as typed", "/?group=group-00"),
        ("API findings, default page (open)", "/api/v1/findings"),
        ("API findings, closed included, page 500", "/api/v1/findings?include_closed=true&page=500"),
        ("API findings, filtered by topic and state", f"/api/v1/findings?topic={topic}&state=gap"),
        ("API findings, a group's, closed included",
         f"/api/v1/findings?group={group.group_id}&include_closed=true"),
    ]
    for label, url in pages:
        if args.only in label:
            median, p95, size, cpu = measure(client, url)
            print(f"{label}: median {median:.1f} ms, p95 {p95:.1f} ms ({size // 1024} KiB); {cpu}")
    if args.only in "/metrics":
        median, p95, size, cpu = measure(client, "/metrics", runs=10, warmups=1)
        print(f"/metrics: median {median:.1f} ms, p95 {p95:.1f} ms ({size:,} bytes); {cpu}")


if __name__ == "__main__":
    main()
