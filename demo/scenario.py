"""The demo scenario that `make up` runs, as one managed background process.

1. Topic ``demo.orders`` with 2 partitions; a producer writes a few messages a
   second to every partition it knows (refreshing its metadata every 5 s,
   like a producer in production does).
2. Two real consumer groups read it and commit: ``demo-latest``
   (``auto.offset.reset=latest``) and ``demo-earliest`` (``earliest``, and
   slow). Both refresh metadata only every 90 s, as slow clients do.
3. Once both groups have committed, the topic is raised to 4 partitions (once:
   a marker file in the state dir remembers it). The producer writes to the new
   partitions at once; the groups notice them up to 90 s later. ``demo-latest``
   then starts at the end, and every message written in between is the gap.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

TOPIC = "demo.orders"
INITIAL_PARTITIONS = 2
RAISED_PARTITIONS = 4
CONSUMER_REFRESH_MS = 90_000
# The two groups: their auto.offset.reset and seconds of work per message.
# demo-earliest reads slowly (0.1 s a message), so its backlog on the new
# partitions takes several polls to drain: the evidence that it is covered.
GROUPS = {"demo-latest": ("latest", 0.0), "demo-earliest": ("earliest", 0.1)}
log = logging.getLogger("gapwatch.demo")
stopping = threading.Event()


def ensure_topic(admin: AdminClient, topic: str = TOPIC) -> int:
    topics = admin.list_topics(timeout=10).topics
    if topic not in topics:
        future = admin.create_topics([NewTopic(topic, num_partitions=INITIAL_PARTITIONS, replication_factor=1)])
        future[topic].result()
        log.info("created %s with %d partitions", topic, INITIAL_PARTITIONS)
        return INITIAL_PARTITIONS
    return len(topics[topic].partitions)


def produce_forever(bootstrap: str, topic: str = TOPIC, stop: threading.Event = stopping) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "topic.metadata.refresh.interval.ms": 5000, "linger.ms": 50})
    sequence = 0
    while not stop.is_set():
        try:
            partitions = producer.list_topics(topic, timeout=10).topics[topic].partitions
            for partition in sorted(partitions):
                producer.produce(topic, key=f"order-{sequence}", value=f'{{"order": {sequence}}}',
                                 partition=partition)
                sequence += 1
            producer.poll(0)
        except (KafkaException, BufferError) as error:
            # A broker restart (the test suite does one) must not end the demo.
            log.warning("producer: %s; retrying", error)
        stop.wait(1.0)
    producer.flush(10)


def consume_forever(bootstrap: str, group_id: str, offset_reset: str, committed: threading.Event,
                    seconds_per_message: float, topic: str = TOPIC, stop: threading.Event = stopping,
                    refresh_ms: int = CONSUMER_REFRESH_MS) -> None:
    """Consume and commit after every message; a slow consumer lets a poll see
    a commit in the middle of its backlog (Gapwatch's evidence of `earliest`)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "client.id": f"{group_id}-client",
            "auto.offset.reset": offset_reset,
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": refresh_ms,
        }
    )
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            try:
                consumer.commit(message=message, asynchronous=False)
            except KafkaException as error:
                log.warning("%s: commit failed: %s", group_id, error)
                continue
            committed.set()
            stop.wait(seconds_per_message)
    finally:
        consumer.close()


def start_clients(bootstrap: str, *, topic: str = TOPIC, groups: dict[str, str] | None = None,
                  stop: threading.Event = stopping, refresh_ms: int = CONSUMER_REFRESH_MS,
                  ) -> tuple[list[threading.Thread], dict[str, threading.Event]]:
    """Steps 1 and 2: the producer and the two consumer groups, each in a
    daemon thread until ``stop`` is set. ``groups`` maps each of ``GROUPS``
    to the group id to use (tests sharing a broker give theirs unique ids).
    Returns the threads and, per group id, an event set at its first commit."""
    names = groups or {name: name for name in GROUPS}
    committed = {names[name]: threading.Event() for name in GROUPS}
    threads = [threading.Thread(target=produce_forever, args=(bootstrap, topic, stop), daemon=True)]
    threads += [
        threading.Thread(
            target=consume_forever, daemon=True,
            args=(bootstrap, names[name], offset_reset, committed[names[name]], pace, topic, stop, refresh_ms),
        )
        for name, (offset_reset, pace) in GROUPS.items()
    ]
    for thread in threads:
        thread.start()
    return threads, committed


def raise_partitions(admin: AdminClient, topic: str = TOPIC) -> None:
    """Step 3: the topic raised to RAISED_PARTITIONS (nothing if it has them)."""
    current = len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    if current < RAISED_PARTITIONS:
        admin.create_partitions([NewPartitions(topic, RAISED_PARTITIONS)])[topic].result()
        log.info("raised %s from %d to %d partitions", topic, current, RAISED_PARTITIONS)


def raise_partitions_once(admin: AdminClient, marker: Path) -> None:
    if marker.exists():
        return
    raise_partitions(admin)
    marker.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--settle-seconds", type=float, default=15.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    args.state_dir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    ensure_topic(admin)
    threads, committed = start_clients(args.bootstrap)
    # The gap needs groups that already consumed the topic before it grows.
    deadline = time.monotonic() + 120
    while not stopping.is_set() and not all(e.is_set() for e in committed.values()) and time.monotonic() < deadline:
        time.sleep(0.5)
    stopping.wait(args.settle_seconds)
    if not stopping.is_set():
        try:
            raise_partitions_once(admin, args.state_dir / "partitions-raised")
        except KafkaException as error:
            log.error("could not raise partitions: %s", error)
    while not stopping.is_set():
        stopping.wait(1.0)
    for thread in threads:
        thread.join(timeout=15)


if __name__ == "__main__":
    main()
