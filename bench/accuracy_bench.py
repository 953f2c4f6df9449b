"""Accuracy with real clients, and detection latency, against the deployed
control plane: a real Celery worker and beat (the 1 s watcher tick, the 10 s
full poll) in their own processes, on the bench database.

Run with `bash bench/run.sh accuracy` or `bash bench/run.sh latency`.

accuracy: per trial, one topic with one partition under steady production
(``--rates``, messages a second per partition) read by four latest groups,
each one client that refreshes metadata on its own 5 s timer and is never
restarted: Kafka's Java console consumer (classic and consumer protocol) and
librdkafka through confluent-kafka (classic and consumer protocol). A poll
sees the groups reading, then partition 1 is added and the producer writes
to it as soon as its metadata shows it. Truth = offsets of partition 1 the
client never printed/received; Gapwatch = the finding's definite/possible;
CLI = LAG of `kafka-consumer-groups --describe` on partition 1 afterwards.

latency: a group with a commit on a topic; 20 times, `create_partitions`
returns -> the finding of the added partition is listed by
`GET /api/v1/findings?topic=...` (asked every 20 ms with a viewer's API
token, through Django's request handling in this process), with the trials
spread over the watcher's phase.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager

import django

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewPartitions  # noqa: E402

from groups.models import Cluster, Finding  # noqa: E402
from tasks.polling import poll_cluster  # noqa: E402
from tests.integration.kafka_harness import (  # noqa: E402
    Broker,
    GroupConsumer,
    JavaConsoleConsumer,
    RateProducer,
    kafka_jars,
    never_consumed,
    wait_until,
)

CLIENTS = ("java-classic", "java-consumer", "rdkafka-classic", "rdkafka-consumer")
REFRESH_MS = 5000


@contextmanager
def control_plane():
    """A Celery worker and beat as deployed (scripts/app.sh), stopped afterwards by their own pids."""
    python_bin = os.path.dirname(sys.executable)
    worker = subprocess.Popen([f"{python_bin}/celery", "-A", "controlplane", "worker", "--concurrency", "2",
                               "--loglevel", "WARNING", "-n", f"bench-{uuid.uuid4().hex[:6]}@%h"])
    beat = subprocess.Popen([f"{python_bin}/celery", "-A", "controlplane", "beat", "--loglevel", "WARNING",
                             "-S", "django_celery_beat.schedulers:DatabaseScheduler", "--pidfile="])
    try:
        from tasks.jobs import ping

        # Under load a worker takes many seconds to start: measure only once it answers.
        wait_until(lambda: _answers(ping), timeout=120, interval=1, what="the worker to answer")
        time.sleep(3)  # beat's first watcher ticks through
        yield
    finally:
        for process in (beat, worker):
            process.terminate()
        for process in (beat, worker):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def _answers(ping) -> bool:
    try:
        return ping.delay("bench").get(timeout=2) == "pong:bench"
    except Exception:  # noqa: BLE001 - not up yet
        return False


def start_client(name: str, bootstrap: str, group_id: str, topic: str):
    if name.startswith("java"):
        return JavaConsoleConsumer(bootstrap, group_id, topic, protocol=name.split("-")[1], refresh_ms=REFRESH_MS)
    return GroupConsumer(bootstrap, group_id, topic, offset_reset="latest", refresh_ms=REFRESH_MS,
                         protocol=name.split("-")[1], commit_interval_ms=5000)


def cli_lag(bootstrap: str, topic: str, group_ids: list[str]) -> dict[str, str]:
    """LAG of partition 1 per group from `kafka-consumer-groups --describe`."""
    command = ["java", "-Xmx128m", "-cp", kafka_jars(), "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
               "--bootstrap-server", bootstrap, "--describe"]
    for group_id in group_ids:
        command += ["--group", group_id]
    output = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
    lags = {}
    for line in output.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == topic and fields[2] == "1":
            lags[fields[0]] = fields[5]
    return lags


def accuracy_trial(broker: Broker, cluster: Cluster, rate: int) -> list[dict]:
    topic = f"acc-{uuid.uuid4().hex[:8]}"
    groups = {name: f"{topic}-{name}" for name in CLIENTS}
    broker.create_topic(topic, 1)
    producer = RateProducer(broker.bootstrap, topic, rate=rate, partitions=[0])
    clients = {name: start_client(name, broker.bootstrap, group_id, topic) for name, group_id in groups.items()}
    try:
        wait_until(lambda: all(c.count(0) > 0 for c in clients.values()), timeout=120, interval=0.5,
                   what="every client to read partition 0")
        wait_until(lambda: poll_cluster(cluster_id=cluster.id).ok and cluster.groups.filter(
            group_topics__topic__name=topic).count() == len(groups), interval=0.5, what="a poll to see the groups")
        broker.raise_partitions(topic, 2)
        producer.add([1])

        def decided() -> bool:
            rows = Finding.objects.filter(topic__name=topic, partition=1)
            return rows.count() == len(groups) and all(r.state not in ("pending", "undecided") and r.likely_start is not None
                                                       for r in rows)

        try:
            wait_until(decided, timeout=120, interval=0.5, what="every finding decided")
        except AssertionError:
            for row in Finding.objects.filter(topic__name=topic).select_related("group"):
                print(f"UNDECIDED? {row.group.group_id} p{row.partition} {row.state} likely={row.likely_start} "
                      f"before={row.pickup_before} {row.explanation}", flush=True)
            raise
    finally:
        producer.stop()
    poll_cluster(cluster_id=cluster.id)  # the end of partition 1 now that production stopped
    end = Finding.objects.filter(topic__name=topic, partition=1).values_list("high_watermark", flat=True)[0]
    try:
        wait_until(lambda: all(c.count(1) and max(c.offsets(1)) == end - 1 for c in clients.values()), timeout=60,
                   interval=0.5, what="every client to read partition 1 to its end")
        time.sleep(6)  # a commit interval, so the CLI sees the groups' final commits
        lags = cli_lag(broker.bootstrap, topic, list(groups.values()))
    finally:
        for client in clients.values():
            client.close()
    rows = []
    for name, group_id in groups.items():
        finding = Finding.objects.get(topic__name=topic, partition=1, group__group_id=group_id)
        truth = never_consumed(clients[name].offsets(1), log_start=0, end=end)
        definite, possible = finding.missed_definite, finding.missed_possible
        window = ((finding.pickup_before - finding.pickup_after).total_seconds()
                  if finding.pickup_after and finding.pickup_before else None)
        rows.append({
            "client": name, "rate": rate, "truth": truth, "definite": definite, "possible": possible,
            "bracketed": definite <= truth <= definite + possible, "cli_lag": lags.get(group_id, "?"),
            "window": window, "evidence": finding.likely_start_evidence, "first_commit": finding.first_commit,
        })
    broker.admin.delete_consumer_groups(list(groups.values()))
    return rows


def run_accuracy(args, broker: Broker, cluster: Cluster) -> None:
    rows = []
    for rate in args.rates:
        for number in range(args.trials):
            for row in accuracy_trial(broker, cluster, rate):
                rows.append(row)
                print(f"rate {rate} trial {number + 1}: {row}", flush=True)
    print("\n| client | msg/s | trial | truth (never consumed) | Gapwatch definite / possible | bracketed | "
          "pickup window | CLI LAG |")
    print("|---|---|---|---|---|---|---|---|")
    trial = {}
    for row in rows:
        key = (row["client"], row["rate"])
        trial[key] = trial.get(key, 0) + 1
        window = f"{row['window']:.1f} s" if row["window"] is not None else "owned at first sight"
        print(f"| {row['client']} | {row['rate']} | {trial[key]} | {row['truth']} | {row['definite']} / "
              f"{row['possible']} | {'yes' if row['bracketed'] else '**no**'} | {window} | {row['cli_lag']} |")
    print(f"\nbracketed: {sum(r['bracketed'] for r in rows)}/{len(rows)}; possible as seconds of traffic: "
          + ", ".join(f"{r['possible'] / r['rate']:.2f}" for r in rows))


def api_lists(client, topic: str, partition: int) -> bool:
    response = client.get("/api/v1/findings", {"topic": topic})
    assert response.status_code == 200, response.content
    return any(row["partition"] == partition for row in response.json()["results"])


def run_latency(args, broker: Broker, cluster: Cluster) -> None:
    from django.test import Client

    from groups.services.tokens import api_token_create
    from tests.factories import user_with_role

    _, key = api_token_create(user=user_with_role(f"bench-{uuid.uuid4().hex[:6]}", "viewer"), name="latency bench")
    api = Client(SERVER_NAME="127.0.0.1", HTTP_AUTHORIZATION=f"Token {key}")
    topic, group_id = f"lat-{uuid.uuid4().hex[:8]}", f"lat-{uuid.uuid4().hex[:8]}-g"
    broker.create_topic(topic, 1)
    broker.admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, 0, 0)])])[group_id].result()
    wait_until(lambda: poll_cluster(cluster_id=cluster.id).ok and cluster.groups.filter(
        group_id=group_id, group_topics__topic__name=topic).exists(), interval=0.5, what="a poll to see the group")
    latencies = []
    for number in range(args.trials):
        time.sleep(1.5 + random.random())  # spread the trials over the watcher's phase
        total = number + 2
        broker.admin.create_partitions([NewPartitions(topic, total)])[topic].result()
        returned = time.monotonic()
        wait_until(lambda: api_lists(api, topic, total - 1), timeout=60, interval=0.02, what="the finding in the API")
        latencies.append(time.monotonic() - returned)
        print(f"trial {number + 1}: {latencies[-1]:.3f}s", flush=True)
    broker.admin.delete_consumer_groups([group_id])
    print(f"\ndetection latency over {len(latencies)} trials: median {statistics.median(latencies):.2f} s, "
          f"p90 {sorted(latencies)[int(0.9 * len(latencies)) - 1]:.2f} s, max {max(latencies):.2f} s, "
          f"min {min(latencies):.2f} s; all: " + ", ".join(f"{t:.2f}" for t in latencies))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["accuracy", "latency"])
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--rates", type=int, nargs="+", default=[50, 500])
    args = parser.parse_args()
    args.trials = args.trials or (5 if args.mode == "accuracy" else 20)
    Cluster.objects.filter(name="bench").delete()
    cluster = Cluster.objects.create(name="bench", bootstrap_servers=args.bootstrap)
    broker = Broker(args.bootstrap)
    try:
        with control_plane():
            (run_accuracy if args.mode == "accuracy" else run_latency)(args, broker, cluster)
    finally:
        broker.close()
        Cluster.objects.filter(id=cluster.id).delete()


if __name__ == "__main__":
    main()
