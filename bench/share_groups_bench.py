"""The cost of reading every share group with Kafka's Java Admin
(``adapters.kafka.java_admin``): the JVM gateway's start, then one
``read_all`` (list, describe, start offsets, configs) with N share groups.

    source scripts/env.sh; .venv/bin/python -m bench.share_groups_bench --groups 5 50

Each group is made by a confluent-kafka ``ShareConsumer`` that joins, reads
a record from each of the topic's partitions and leaves (the group stays,
Empty, with its start offsets). Groups and the topic are this run's own
(a random suffix); they are deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import ShareConsumer

from groups.domain.cluster_config import ClusterConfig
from adapters.kafka import jvm
from adapters.kafka.java_admin import JavaAdmin
from tests.harness.kafka_clients import Broker, wait_until

PARTITIONS = 4
RUNS = 5


def make_share_group(bootstrap: str, group_id: str, topic: str) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group_id})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if consumer.poll(1.0):
                break
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, nargs="+", default=[5, 50])
    arguments = parser.parse_args()
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    suffix = uuid.uuid4().hex[:8]
    broker = Broker(bootstrap)
    topic = f"share-bench-{suffix}"
    broker.create_topic(topic, PARTITIONS)

    started = time.monotonic()
    reader = JavaAdmin(ClusterConfig(bootstrap), timeout=30)
    reader.list_group_ids()
    print(f"JVM gateway start: {jvm.last_start_seconds:.3f} s; first call incl. Admin.create: "
          f"{time.monotonic() - started:.3f} s")

    made: list[str] = []
    try:
        for count in arguments.groups:
            wanted = [f"share-bench-{suffix}-{number}" for number in range(count)]
            new = [group_id for group_id in wanted if group_id not in made]
            # The groups' share consumers fetch from the log end (latest): keep writing until each has read.
            with ThreadPoolExecutor(max_workers=10) as pool:
                futures = [pool.submit(make_share_group, bootstrap, group_id, topic) for group_id in new]
                while not all(future.done() for future in futures):
                    for partition in range(PARTITIONS):
                        broker.produce(topic, partition, 1)
                    time.sleep(0.2)
                for future in futures:
                    future.result()
            made += new
            wait_until(lambda: set(made) <= set(reader.list_group_ids()), what=f"{count} share groups listed")
            timings = []
            for _ in range(RUNS):
                started = time.monotonic()
                states = reader.read_all()
                timings.append(time.monotonic() - started)
            stages, group_ids = {}, None
            for stage, call in (("list", lambda: reader.list_group_ids()), ("describe", lambda: reader.describe(group_ids)),
                                ("offsets", lambda: reader.start_offsets(group_ids)),
                                ("configs", lambda: reader.auto_offset_resets(group_ids))):
                started = time.monotonic()
                answer = call()
                stages[stage] = time.monotonic() - started
                group_ids = answer if stage == "list" else group_ids
            ours = [state for state in states if state.description.group_id in made]
            partitions = sum(len(state.start_offsets) for state in ours)
            print(f"{len(states)} share groups listed ({len(ours)} of this run, {partitions} start offsets): "
                  f"read_all median {statistics.median(timings) * 1000:.0f} ms, "
                  f"min {min(timings) * 1000:.0f} ms, max {max(timings) * 1000:.0f} ms ({RUNS} runs); one more by stage: "
                  + ", ".join(f"{stage} {seconds * 1000:.0f} ms" for stage, seconds in stages.items()))
    finally:
        reader.close()
        jvm.gateway_shutdown()
        if made:
            # Share groups are groups to DeleteGroups; one still leaving is left behind.
            for future in broker.admin.delete_consumer_groups(made).values():
                try:
                    future.result(timeout=30)
                except Exception:  # noqa: BLE001 - best-effort cleanup
                    pass
        broker.close()


if __name__ == "__main__":
    main()
