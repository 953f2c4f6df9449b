"""Protection by membership (issue 43, item 6), measured on the local broker
with clients nobody here wrote, producers writing to every partition:

  announced --raises N   an expansion's join, add, commit, leave (the job's
                         own calls), N times on one topic read by one group
                         of each client kind; per kind: the share of new
                         partitions the group's own first read was offset 0,
                         the longest pause its member saw, join and total times.
  standing --raises N    partitions added behind Gapwatch's back (AdminClient
                         and kafka-topics --alter, alternately) under a protect
                         rule, the protector (tasks/protector.py) running;
                         per kind: the share won, the time from the add
                         returning to the commit, the first reads.
  many --groups N        one topic read by N live groups (half classic, half
                         KIP-848): the time to seat, commit and leave them all,
                         and the memory a seat costs Gapwatch's process.

Each run appends its table to stdout; bench/RESULTS.md keeps them with the
command (bash bench/run.sh protection <mode> ...).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()

from confluent_kafka.admin import AdminClient, NewPartitions  # noqa: E402
from django.conf import settings  # noqa: E402

from groups.domain.cluster_config import ClusterConfig  # noqa: E402
from groups.domain.membership import protector_client_id  # noqa: E402
from adapters.kafka import KafkaAdapter, Membership, SeatRequest  # noqa: E402
from tests.harness.kafka_clients import (  # noqa: E402
    Broker,
    GoClientConsumer,
    GroupConsumer,
    JavaConsoleConsumer,
    RateProducer,
    kafka_tool,
    wait_until,
)

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
COOPERATIVE = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
# Records written to each new partition right after the add: what a group starting at latest would skip.
WRITTEN_AT_ONCE = 20


def clients_of_every_kind(topic: str, tag: str, *, refresh_ms: int | None) -> dict:
    """One latest group per client kind; ``refresh_ms`` None: each client's own default refresh."""
    def name(kind: str) -> str:
        return f"bench-{kind}-{tag}"
    refresh = {} if refresh_ms is None else {"refresh_ms": refresh_ms}
    java_refresh = {"refresh_ms": refresh_ms or 300_000}
    go_refresh = {"refresh_ms": refresh_ms or 300_000}
    return {
        "java classic eager (range)": JavaConsoleConsumer(BOOTSTRAP, name("java-range"), topic, protocol="classic",
                                                          **java_refresh),
        "java classic cooperative": JavaConsoleConsumer(BOOTSTRAP, name("java-coop"), topic, protocol="classic",
                                                        assignor=COOPERATIVE, **java_refresh),
        "java KIP-848": JavaConsoleConsumer(BOOTSTRAP, name("java-848"), topic, protocol="consumer", **java_refresh),
        "librdkafka classic (range)": GroupConsumer(BOOTSTRAP, name("rd-range"), topic, offset_reset="latest",
                                                    **({"refresh_ms": refresh_ms} if refresh_ms else
                                                       {"refresh_ms": 300_000})),
        "librdkafka KIP-848": GroupConsumer(BOOTSTRAP, name("rd-848"), topic, offset_reset="latest",
                                            protocol="consumer", **refresh),
        "librdkafka static member": GroupConsumer(BOOTSTRAP, name("rd-static"), topic, offset_reset="latest",
                                                  settings={"group.instance.id": name("rd-static-1")},
                                                  **({"refresh_ms": refresh_ms} if refresh_ms else
                                                     {"refresh_ms": 300_000})),
        "sarama": GoClientConsumer("sarama", BOOTSTRAP, name("sarama"), topic, **go_refresh),
        "kafka-go": GoClientConsumer("kafka-go", BOOTSTRAP, name("kafka-go"), topic, **go_refresh),
        "franz-go": GoClientConsumer("franz-go", BOOTSTRAP, name("franz-go"), topic, **go_refresh),
    }


def start(topic: str, tag: str, *, refresh_ms: int | None):
    broker = Broker(BOOTSTRAP)
    broker.create_topic(topic, 2)
    producer = RateProducer(BOOTSTRAP, topic, rate=10, partitions=[0, 1])
    clients = clients_of_every_kind(topic, tag, refresh_ms=refresh_ms)
    wait_until(lambda: all(c.count(0) + c.count(1) > 0 for c in clients.values()), timeout=300,
               what="every group reading")
    return broker, producer, clients


def stop(broker, producer, clients) -> None:
    producer.stop()
    for client in clients.values():
        client.close()
    broker.close()


def announced(raises: int) -> None:
    tag = uuid.uuid4().hex[:6]
    topic = f"bench-announced-{tag}"
    groups = {}
    broker, producer, clients = start(topic, tag, refresh_ms=10_000)
    adapter = KafkaAdapter(ClusterConfig(BOOTSTRAP), timeout=10)
    results = {kind: {"first": [], "pause": [], "join": [], "total": []} for kind in clients}
    try:
        for kind, client in clients.items():
            groups[kind] = _group_id(client)
        for count in range(2, 2 + raises):
            requests = [SeatRequest(groups[k], *_protocol(adapter, groups[k])) for k in clients]
            began = time.monotonic()
            with Membership(ClusterConfig(BOOTSTRAP), client_id=protector_client_id(what=f"bench-{tag}"),
                            anchor_topic=settings.PROTECT_ANCHOR_TOPIC, timeout=10) as seats:
                seats.ensure_anchor()
                refused = seats.join(requests, within=120)
                joined_after = {k: seats.joined_after(groups[k]) for k in clients}
                broker.raise_partitions(topic, count + 1)
                failed = {k: seats.commit(groups[k], {(topic, count): 0}, within=10) for k in clients
                          if groups[k] not in refused}
                broker.produce(topic, count, WRITTEN_AT_ONCE)
                seats.leave()
            ended = time.monotonic()
            producer.add([count])
            for kind, client in clients.items():
                wait_until(lambda client=client: client.count(count) > 0, timeout=420,
                           what=f"{kind} to read partition {count}")
                results[kind]["first"].append(min(client.offsets(count)))
                results[kind]["join"].append(joined_after[kind] if joined_after[kind] is not None else float("nan"))
                results[kind]["total"].append(ended - began)
                results[kind]["refused"] = refused.get(groups[kind], "") or failed.get(kind, "")
            time.sleep(3)  # the pauses after the leave's rebalance
            for kind, client in clients.items():
                results[kind]["pause"].append(client.longest_pause(began, time.monotonic()))
            print(f"raise {count - 1}/{raises}: first reads "
                  f"{ {k: r['first'][-1] for k, r in results.items()} }", flush=True)
    finally:
        stop(broker, producer, clients)
    print(f"\n| client kind | read from offset 0 (own first read) | longest pause (median, max) | seat taken after "
          f"(median) | join to leave (median) | refused |\n|---|---|---|---|---|---|")
    for kind, r in results.items():
        zero = sum(1 for f in r["first"] if f == 0)
        print(f"| {kind} | {zero}/{len(r['first'])} | {statistics.median(r['pause']):.2f} s, {max(r['pause']):.2f} s "
              f"| {statistics.median(r['join']):.2f} s | {statistics.median(r['total']):.2f} s | "
              f"{r.get('refused') or '-'} |")


def _protocol(adapter: KafkaAdapter, group_id: str) -> tuple[str, str]:
    status = adapter.describe_group(group_id=group_id)
    return status.type, status.assignor


def _group_id(client) -> str:
    if getattr(client, "group_id", None):
        return client.group_id
    args = client.process.args
    for flag in ("--group", "-group"):
        if flag in args:
            return args[args.index(flag) + 1]
    raise ValueError("no group id")


def standing(raises: int) -> None:
    from groups.models import Cluster, RepairRule
    from tasks.protector import Protector
    from tests.harness.scenarios import poll

    tag = uuid.uuid4().hex[:6]
    topic = f"bench-standing-{tag}"
    broker, producer, clients = start(topic, tag, refresh_ms=None)
    groups = {kind: _group_id(client) for kind, client in clients.items()}
    cluster, _ = Cluster.objects.get_or_create(name="bench-local", defaults={"bootstrap_servers": BOOTSTRAP})
    wait_until(lambda: poll(cluster) and cluster.groups.filter(group_topics__topic__name=topic).count() == len(clients),
               interval=1, timeout=120, what="a poll to see every group")
    rule = RepairRule.objects.create(cluster=cluster, name=f"bench-{tag}", topic_pattern=topic, group_pattern="*",
                                     sink="parquet", max_records=10_000, action=RepairRule.Action.PROTECT)
    protector = Protector(cluster.id)
    halt = threading.Event()

    def loop() -> None:
        while not halt.is_set():
            protector.step()
            halt.wait(settings.PROTECT_WATCH_MS / 1000)
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    delays: dict[str, list[float]] = {"AdminClient": [], "kafka-topics --alter": []}
    try:
        wait_until(lambda: len(protector.seats.seated()) == len(clients), timeout=180, what="a seat in every group")
        for count in range(2, 2 + raises):
            how = "AdminClient" if count % 2 == 0 else "kafka-topics --alter"
            if how == "AdminClient":
                admin.create_partitions([NewPartitions(topic, count + 1)])[topic].result(timeout=30)
            else:
                kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", BOOTSTRAP, "--alter",
                           "--topic", topic, "--partitions", str(count + 1))
            wait_until(lambda: len(broker.producer.list_topics(topic, timeout=10).topics[topic].partitions) > count,
                       interval=0.02, what="the producer to see the new partition")
            broker.produce(topic, count, WRITTEN_AT_ONCE)
            producer.add([count])
            wait_until(lambda: sum(1 for d in protector.done if d[2] == count) == len(clients), timeout=60,
                       what=f"the protector to commit partition {count} of every group")
            committed_at = {d[0]: d for d in protector.done if d[2] == count}
            # The protector measures from its sight; the add returned at ``created``.
            delays[how].append(max(d[4] for d in committed_at.values()))
            print(f"raise {count - 1}/{raises} ({how}): won "
                  f"{sum(1 for d in committed_at.values() if d[3])}/{len(clients)}"
                  + "".join(f"; lost {k}" for k, g in groups.items() if not committed_at[g][3]), flush=True)
        last = 1 + raises
        # Each client picks the partitions up at its own refresh (300 s by default); one that has not
        # read some of them after that is reported so, not waited for.
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline and not all(
                all(c.count(p) > 0 for p in range(2, last + 1)) for c in clients.values()):
            time.sleep(2)
    finally:
        halt.set()
        thread.join(timeout=30)
        protector.close()
        stop(broker, producer, clients)
        rule.delete()
    print("\n| client kind | protected (won) | read from offset 0 where won | not read within 420 s of the last "
          "raise | lost: partition, first read |\n|---|---|---|---|---|")
    for kind, client in clients.items():
        mine = [d for d in protector.done if d[0] == groups[kind]]
        won = [d for d in mine if d[3]]
        read = [d for d in won if client.count(d[2]) > 0]
        zero = sum(1 for d in read if min(client.offsets(d[2])) == 0)
        unread = [d[2] for d in mine if client.count(d[2]) == 0]
        lost = [(d[2], min(client.offsets(d[2])) if client.count(d[2]) else None) for d in mine if not d[3]]
        print(f"| {kind} | {len(won)}/{len(mine)} | {zero}/{len(read)} | {unread or '-'} | {lost or '-'} |")
    for how, values in delays.items():
        if values:
            print(f"{how}: sight to the last group's commit median {statistics.median(values) * 1000:.0f} ms, "
                  f"max {max(values) * 1000:.0f} ms over {len(values)} raises")


def many(count: int) -> None:
    tag = uuid.uuid4().hex[:6]
    topic = f"bench-many-{tag}"
    broker = Broker(BOOTSTRAP)
    broker.create_topic(topic, 2)
    producer = RateProducer(BOOTSTRAP, topic, rate=5, partitions=[0, 1])
    members = []
    try:
        for index in range(count):
            protocol = "consumer" if index % 2 else "classic"
            members.append(GroupConsumer(BOOTSTRAP, f"bench-many-{index}-{tag}", topic, offset_reset="latest",
                                         protocol=protocol))
        wait_until(lambda: all(m.count(0) + m.count(1) > 0 for m in members), timeout=600, interval=1,
                   what="every group reading")
        adapter = KafkaAdapter(ClusterConfig(BOOTSTRAP), timeout=30)
        requests = [SeatRequest(f"bench-many-{i}-{tag}", *_protocol(adapter, f"bench-many-{i}-{tag}"))
                    for i in range(count)]
        rss_before = _rss_mib()
        began = time.monotonic()
        with Membership(ClusterConfig(BOOTSTRAP), client_id=protector_client_id(what=f"bench-{tag}"),
                        anchor_topic=settings.PROTECT_ANCHOR_TOPIC, timeout=30) as seats:
            seats.ensure_anchor()
            refused = seats.join(requests, within=300)
            joined = time.monotonic()
            rss_seated = _rss_mib()
            broker.raise_partitions(topic, 3)
            failed = {r.group_id: seats.commit(r.group_id, {(topic, 2): 0}, within=30) for r in requests
                      if r.group_id not in refused}
            committed = time.monotonic()
            broker.produce(topic, 2, WRITTEN_AT_ONCE)
            seats.leave()
        ended = time.monotonic()
        producer.add([2])
        wait_until(lambda: all(m.count(2) > 0 for m in members), timeout=600, interval=1, what="every group on p2")
        zero = sum(1 for m in members if min(m.offsets(2)) == 0)
        print(f"\n{count} live groups ({count // 2} classic, {count - count // 2} KIP-848): seated in "
              f"{joined - began:.1f} s ({len(refused)} refused: {sorted(set(refused.values()))[:2]}), committed "
              f"{sum(1 for w in failed.values() if not w)} in {committed - joined:.2f} s after the seats, left in "
              f"{ended - committed:.1f} s; total {ended - began:.1f} s; read partition 2 from offset 0: "
              f"{zero}/{count}; Gapwatch's process grew {rss_seated - rss_before:.0f} MiB with the seats "
              f"({(rss_seated - rss_before) / count * 1000:.0f} MiB per 1,000 groups)")
    finally:
        producer.stop()
        for member in members:
            member.close()
        broker.close()


def _rss_mib() -> float:
    """This process's resident memory now, MiB (Linux /proc)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("announced").add_argument("--raises", type=int, default=10)
    sub.add_parser("standing").add_argument("--raises", type=int, default=20)
    sub.add_parser("many").add_argument("--groups", type=int, default=200)
    args = parser.parse_args()
    if args.mode == "announced":
        announced(args.raises)
    elif args.mode == "standing":
        standing(args.raises)
    else:
        many(args.groups)


if __name__ == "__main__":
    main()
