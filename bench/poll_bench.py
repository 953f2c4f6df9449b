"""Full-poll cost against Kafka's own `kafka-consumer-groups --describe --all-groups`.

Run with `bash bench/run.sh poll` (starts the services, uses its own database).
For each size (default 1k, 5k and 10k partitions: topics of 8 partitions and
one group per 2.5 topics, each group committing on every partition of one
topic) it creates the bench.* topics in batches (the broker refuses one
create_topics call with ~1,000+ topics), then measures, in the same run:

- Gapwatch's full poll (adapter snapshot + database writes), median of N;
- the adapter snapshot alone, by stage;
- the CLI (ConsumerGroupCommand in the broker's jars), median of N, JVM start included;

and deletes the bench topics and groups before the next size, so the shared
local broker (about 10k partitions under its open-files limit) never holds
more than one size at a time.

``--share-groups N`` adds N share groups (KIP-932), each made by a
confluent-kafka ``ShareConsumer`` that reads a record from every partition of
one bench topic and leaves: the poll then reads them too, through Kafka's
Java Admin in this process's JVM (the ``share_groups`` stage; the JVM's start
is printed once). The CLI's describe-all lists consumer groups only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import django

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from django.utils import timezone  # noqa: E402

from groups.models import Cluster  # noqa: E402
from adapters.kafka.adapter import KafkaAdapter  # noqa: E402
from tasks.polling import poll_cluster  # noqa: E402
from bench.big_cluster import cli_describe_all  # noqa: E402
from bench.share_groups_bench import make_share_group  # noqa: E402
from adapters.kafka import jvm  # noqa: E402

TOPICS_PER_CREATE = 200
PARTITIONS_PER_TOPIC = 8


def topic_names(topics: int) -> list[str]:
    return [f"bench.t{n:04d}" for n in range(topics)]


def group_names(groups: int) -> list[str]:
    return [f"bench.g{n:03d}" for n in range(groups)]


def share_group_names(groups: int) -> list[str]:
    return [f"bench.s{n:03d}" for n in range(groups)]


def prepare_share_groups(bootstrap: str, topics: int, groups: int) -> None:
    """Share groups, each initialised on every partition of one bench topic. The
    consumers start at the log end (latest): records are written until each read one."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    names = topic_names(topics)
    with ThreadPoolExecutor(max_workers=10) as pool:
        futures = [pool.submit(make_share_group, bootstrap, group, names[n % topics])
                   for n, group in enumerate(share_group_names(groups))]
        while not all(future.done() for future in futures):
            for n in range(min(groups, topics)):
                for partition in range(PARTITIONS_PER_TOPIC):
                    producer.produce(names[n], value=b"s", partition=partition)
            producer.poll(0)
            time.sleep(0.2)
        for future in futures:
            future.result()
    producer.flush(30)


def prepare(admin: AdminClient, bootstrap: str, topics: int, groups: int) -> None:
    """Topics of 8 partitions with 3 messages each, created in batches, and
    groups with a commit on every partition of one topic."""
    names = topic_names(topics)
    existing = admin.list_topics(timeout=30).topics
    missing = [n for n in names if n not in existing]
    for start in range(0, len(missing), TOPICS_PER_CREATE):
        batch = [NewTopic(n, num_partitions=PARTITIONS_PER_TOPIC, replication_factor=1)
                 for n in missing[start:start + TOPICS_PER_CREATE]]
        for future in admin.create_topics(batch, request_timeout=120).values():
            future.result()
    if missing:
        time.sleep(5)  # new partitions need their leaders before producing
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
        for name in missing:
            for partition in range(PARTITIONS_PER_TOPIC):
                for _ in range(3):
                    producer.produce(name, value=b"x", partition=partition)
                producer.poll(0)
        producer.flush(120)
    wait_visible = time.monotonic() + 120
    while not set(names) <= set(admin.list_topics(timeout=30).topics) and time.monotonic() < wait_visible:
        time.sleep(1)
    for number, group in enumerate(group_names(groups)):
        topic = names[number % topics]
        offsets = [TopicPartition(topic, p, 1 + (number % 3)) for p in range(PARTITIONS_PER_TOPIC)]
        for future in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)]).values():
            future.result()


def cleanup(admin: AdminClient, topics: int, groups: int, share_groups: int = 0) -> None:
    """Leave the broker as it was: no bench.* topics or groups."""
    existing_groups = {g.group_id for g in admin.list_consumer_groups().result().valid}
    doomed = [g for g in group_names(groups) if g in existing_groups]
    for future in (admin.delete_consumer_groups(share_group_names(share_groups)).values() if share_groups else ()):
        try:
            future.result()
        except Exception:  # noqa: BLE001 - a share group never made, or already gone
            pass
    for start in range(0, len(doomed), 100):
        for future in admin.delete_consumer_groups(doomed[start:start + 100]).values():
            future.result()
    existing = admin.list_topics(timeout=30).topics
    doomed = [t for t in topic_names(topics) if t in existing]
    for start in range(0, len(doomed), TOPICS_PER_CREATE):
        for future in admin.delete_topics(doomed[start:start + TOPICS_PER_CREATE], operation_timeout=120).values():
            future.result()
    # Deletion finishes after the call returns: wait, or the next size would find
    # half-deleted names "existing", skip creating them and lose them a moment later.
    deadline = time.monotonic() + 300
    while any(t in admin.list_topics(timeout=30).topics for t in doomed) and time.monotonic() < deadline:
        time.sleep(1)


def measure(bootstrap: str, polls: int, topics: int, groups: int) -> dict:
    cluster, _ = Cluster.objects.update_or_create(name="bench", defaults={"bootstrap_servers": bootstrap})
    adapter = KafkaAdapter(cluster.cluster_config(), timeout=30)
    snapshots, stages = [], []
    for _ in range(polls):
        begin = time.monotonic()
        adapter.snapshot(cluster="bench", now=timezone.now())
        snapshots.append(time.monotonic() - begin)
        stages.append(dict(adapter.last_timings))
    # The watcher's targeted snapshot of one topic: of its stored readers only (a
    # tick that observes a pickup), and of every listed group (a tick that sees a
    # partition count change: tasks/watching.py reads them all, so a group that
    # took the topic up since the last full poll is not missed).
    topic = topic_names(1)[0]
    readers = {g for n, g in enumerate(group_names(groups)) if n % topics == 0}  # as prepare() commits
    targeted = {"readers": [], "every group": []}
    for _ in range(polls):
        for label, groups in (("readers", readers), ("every group", None)):
            begin = time.monotonic()
            adapter.snapshot(cluster="bench", now=timezone.now(), topics={topic}, groups=groups)
            targeted[label].append(time.monotonic() - begin)
    poll_cluster(cluster_id=cluster.id)  # warm-up: the first poll creates every row
    totals, kafka, writes, summary = [], [], [], None
    for _ in range(polls):
        summary = poll_cluster(cluster_id=cluster.id)
        assert summary.ok, summary.error
        totals.append(summary.kafka_seconds + summary.write_seconds)
        kafka.append(summary.kafka_seconds)
        writes.append(summary.write_seconds)
    cli = [cli_describe_all(bootstrap) for _ in range(polls)]
    median = statistics.median
    return {
        "partitions": summary.partitions, "groups": summary.groups, "topics": summary.topics,
        "poll": median(totals), "poll_all": totals, "kafka": median(kafka), "writes": median(writes),
        "snapshot": median(snapshots), "stages": {s: median(t[s] for t in stages) for s in stages[0]},
        "cli": median(cli), "cli_all": cli,
        "targeted": {label: median(times) for label, times in targeted.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    parser.add_argument("--sizes", default="125:50,625:250,1240:500",
                        help="topics:groups per size, comma-separated (topics have 8 partitions)")
    parser.add_argument("--polls", type=int, default=5)
    parser.add_argument("--share-groups", type=int, default=0,
                        help="share groups to add at each size (each initialised on one topic's 8 partitions)")
    args = parser.parse_args()
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    rows = []
    for size in args.sizes.split(","):
        topics, groups = (int(n) for n in size.split(":"))
        started = time.monotonic()
        try:
            prepare(admin, args.bootstrap, topics, groups)
            if args.share_groups:
                prepare_share_groups(args.bootstrap, topics, args.share_groups)
            print(f"prepared {topics} topics x {PARTITIONS_PER_TOPIC}, {groups} groups, {args.share_groups} share "
                  f"groups in {time.monotonic() - started:.1f}s", flush=True)
            row = measure(args.bootstrap, args.polls, topics, groups)
            if jvm.last_start_seconds is not None:
                print(f"the JVM reading share and streams groups started in {jvm.last_start_seconds:.3f}s "
                      "(once per worker process; in the first poll only)", flush=True)
        finally:
            cleanup(admin, topics, groups, args.share_groups)
            Cluster.objects.filter(name="bench").delete()
        rows.append(row)
        print(f"{row['partitions']} partitions, {row['groups']} groups: full poll {row['poll']:.3f}s "
              f"(kafka {row['kafka']:.3f}s, database {row['writes']:.3f}s; all "
              + ", ".join(f"{t:.3f}" for t in row["poll_all"]) + f"); snapshot alone {row['snapshot']:.3f}s ("
              + ", ".join(f"{s} {t:.3f}s" for s, t in row["stages"].items()) + f"); CLI describe-all "
              f"{row['cli']:.3f}s (all " + ", ".join(f"{t:.3f}" for t in row["cli_all"])
              + f"); ratio poll/CLI {row['poll'] / row['cli']:.2f}x; watcher's snapshot of one topic: "
              + ", ".join(f"{label} {t:.3f}s" for label, t in row["targeted"].items()), flush=True)
    print("\n| partitions | groups | full poll | snapshot | CLI describe-all | poll / CLI |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['partitions']:,} | {row['groups']} | {row['poll']:.3f} s | {row['snapshot']:.3f} s | "
              f"{row['cli']:.3f} s | {row['poll'] / row['cli']:.2f}x |")


if __name__ == "__main__":
    main()
