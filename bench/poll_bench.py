"""Full-poll benchmark: 2,000 partitions and 200 groups with committed offsets.

Run with `bash bench/run.sh` (starts the services, uses its own database).
Prints the median wall time of 5 full polls (after one warm-up poll) and how it
splits between Kafka calls and database writes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import django

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from groups.models import Cluster  # noqa: E402
from tasks.kafka.adapter import KafkaAdapter  # noqa: E402
from tasks.polling import poll_cluster  # noqa: E402


def prepare(bootstrap: str, topics: int, partitions_per_topic: int, groups: int) -> None:
    """Idempotent: topics bench.t000.. and groups bench.g000.. with a commit on every partition of one topic."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"bench.t{n:03d}" for n in range(topics)]
    existing = admin.list_topics(timeout=30).topics
    missing = [NewTopic(n, num_partitions=partitions_per_topic, replication_factor=1) for n in names if n not in existing]
    if missing:
        for future in admin.create_topics(missing, request_timeout=120).values():
            future.result()
        time.sleep(5)  # new partitions need their leaders before producing
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
        for name in names:
            for partition in range(partitions_per_topic):
                for number in range(3):
                    producer.produce(name, value=b"x", partition=partition)
        producer.flush(120)
    for number in range(groups):
        topic = names[number % topics]
        offsets = [TopicPartition(topic, p, 1 + (number % 3)) for p in range(partitions_per_topic)]
        futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(f"bench.g{number:03d}", offsets)])
        for future in futures.values():
            future.result()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions-per-topic", type=int, default=20)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--polls", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the bench.* topics and groups for the next run")
    args = parser.parse_args()

    started = time.monotonic()
    prepare(args.bootstrap, args.topics, args.partitions_per_topic, args.groups)
    print(f"prepared in {time.monotonic() - started:.1f}s")
    cluster, _ = Cluster.objects.update_or_create(name="bench", defaults={"bootstrap_servers": args.bootstrap})

    adapter = KafkaAdapter(cluster.client_config(), timeout=30)
    snapshot_times, stage_times = [], []
    for _ in range(args.polls):
        begin = time.monotonic()
        adapter.snapshot(cluster="bench", now=django.utils.timezone.now())
        snapshot_times.append(time.monotonic() - begin)
        stage_times.append(dict(getattr(adapter, "last_timings", {}) or {}))

    poll_cluster(cluster_id=cluster.id)  # warm-up: the first poll creates every row
    totals, kafka, writes, summary = [], [], [], None
    for _ in range(args.polls):
        summary = poll_cluster(cluster_id=cluster.id)
        assert summary.ok, summary.error
        totals.append(summary.kafka_seconds + summary.write_seconds)
        kafka.append(summary.kafka_seconds)
        writes.append(summary.write_seconds)

    median = statistics.median
    print(f"cluster: {summary.topics} topics, {summary.partitions} partitions, {summary.groups} groups")
    print(f"full poll median of {args.polls}: {median(totals):.3f}s "
          f"(kafka {median(kafka):.3f}s, database {median(writes):.3f}s); all: "
          + ", ".join(f"{t:.3f}" for t in totals))
    print(f"adapter snapshot alone median: {median(snapshot_times):.3f}s")
    if stage_times and stage_times[0]:
        for stage in stage_times[0]:
            print(f"  {stage}: {median(t[stage] for t in stage_times):.3f}s")
    if not args.keep:
        cleanup(args.bootstrap, args.topics, args.groups)


def cleanup(bootstrap: str, topics: int, groups: int) -> None:
    """Leave the local broker as the demo expects it: no bench.* topics or groups."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_consumer_groups([f"bench.g{n:03d}" for n in range(groups)]).values():
        future.result()
    for future in admin.delete_topics([f"bench.t{n:03d}" for n in range(topics)]).values():
        future.result()


if __name__ == "__main__":
    main()
