"""Server time of the home page and a group page with 10,000 findings, 1,000
groups and 30 days of lag samples (one a minute) for the measured groups.

Run with `bash bench/run_pages.sh`. Measures Django's full request handling in
process (test client: middleware, session, queries, template rendering), 50
requests each after 3 warm-up requests; prints median and p95.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import timedelta


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
# The application as gunicorn loads it, garbage-collector freeze included.
import controlplane.wsgi  # noqa: E402, F401

from django.contrib.auth.models import User  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from groups.models import Cluster, ConsumerGroup, Finding, GroupTopic, LagSample, PartitionGeneration, Topic  # noqa: E402

GROUPS, FINDINGS, SAMPLED_GROUPS, DAYS = 1000, 10_000, 5, 30


def prepare() -> ConsumerGroup:
    cluster, created = Cluster.objects.get_or_create(name="pages-bench", defaults={"bootstrap_servers": "127.0.0.1:1"})
    if not created and Finding.objects.filter(cluster=cluster).count() >= FINDINGS:
        return ConsumerGroup.objects.filter(cluster=cluster).order_by("id").first()
    now = timezone.now()
    topics = Topic.objects.bulk_create(
        Topic(cluster=cluster, name=f"t{n:03d}", kafka_topic_id=f"id{n}", partition_count=20, first_seen_at=now,
              updated_at=now)
        for n in range(100)
    )
    generations = PartitionGeneration.objects.bulk_create(
        PartitionGeneration(topic=t, number=2, kafka_topic_id=t.kafka_topic_id, partitions=list(range(20)),
                            added_partitions=list(range(10, 20)), observed_at=now)
        for t in topics
    )
    groups = ConsumerGroup.objects.bulk_create(
        ConsumerGroup(cluster=cluster, group_id=f"group-{n:04d}", state="Stable", type="classic", member_count=2,
                      first_seen_at=now, last_seen_at=now)
        for n in range(GROUPS)
    )
    GroupTopic.objects.bulk_create(
        GroupTopic(group=g, topic=topics[n % 100], lag=n, first_seen_at=now, updated_at=now)
        for n, g in enumerate(groups)
    )
    Finding.objects.bulk_create(
        (
            Finding(cluster=cluster, group=groups[n % GROUPS], topic=topics[n % 100],
                    generation=generations[n % 100], partition=10 + (n // GROUPS) % 10, state="gap",
                    created_at=now - timedelta(seconds=n), updated_at=now, first_log_start=0, log_start_offset=0,
                    high_watermark=1000, committed_offset=900, lag=100, missed_definite=500, missed_possible=20,
                    backfill_start=0, backfill_end=520, policy_source="assumed", explanation="assumed latest")
            for n in range(FINDINGS)
        ),
        batch_size=2000,
    )
    minutes = DAYS * 24 * 60
    for g in groups[:SAMPLED_GROUPS]:
        topic = topics[groups.index(g) % 100]
        LagSample.objects.bulk_create(
            (LagSample(group=g, topic=topic, at=now - timedelta(minutes=m), lag=(m * 37) % 5000)
             for m in range(minutes)),
            batch_size=5000,
        )
    with connection.cursor() as cursor:
        cursor.execute("analyze")
    return groups[0]


def measure(client: Client, url: str, runs: int = 50) -> tuple[float, float, int]:
    for _ in range(3):
        assert client.get(url).status_code == 200, url
    times = []
    for _ in range(runs):
        begin = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - begin) * 1000)
        assert response.status_code == 200
    times.sort()
    return statistics.median(times), times[int(0.95 * len(times)) - 1], len(response.content)


def main() -> None:
    started = time.monotonic()
    group = prepare()
    print(f"prepared in {time.monotonic() - started:.1f}s: {Finding.objects.count()} findings, "
          f"{ConsumerGroup.objects.count()} groups, {LagSample.objects.count()} lag samples")
    user, _ = User.objects.get_or_create(username="bench", defaults={"is_superuser": True, "is_staff": True})
    client = Client()
    client.force_login(user)
    for label, url in [("home page (first page of 10,000 findings)", "/"),
                       ("home page sorted by lag, page 100", "/?sort=lag&page=100"),
                       ("findings table fragment (live refresh)", "/findings/table"),
                       ("group page, default chart (fitted to its events)", f"/groups/{group.id}/"),
                       ("group page, 24 h chart", f"/groups/{group.id}/?window=24h"),
                       ("groups list, first page of 1,000", "/groups/"),
                       ("groups list, searched", "/groups/?q=group-09"),
                       ("topics list", "/topics/"),
                       (f"group page, {DAYS}-day chart over {DAYS} days of samples", f"/groups/{group.id}/?window=30d")]:
        median, p95, size = measure(client, url)
        print(f"{label}: median {median:.1f} ms, p95 {p95:.1f} ms ({size // 1024} KiB)")


if __name__ == "__main__":
    main()
