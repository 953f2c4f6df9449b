"""Soundness with real clients, and detection latency, against the deployed
control plane: a real Celery worker and beat (the 1 s watcher tick, the 10 s
full poll) in their own processes, on the bench database.

Run with `bash bench/run.sh accuracy` or `bash bench/run.sh latency`.

accuracy (issue 26): per trial, every scenario of
tests/harness/pickups.py at once, each a ``latest`` group on a
topic of its own under steady production, read by one client nobody on the
project wrote that picks the new partition up on its own 5 s metadata refresh
and is never restarted: Kafka's Java console consumer (classic and KIP-848,
default 5 s auto-commit), librdkafka (classic and KIP-848 with default
auto-commit; manual synchronous commits every 25 records at 20 ms a record;
1.5 s of work in on_assign), producers whose clock is 30 s ahead or behind
(CreateTime), a LogAppendTime topic, a group that joined right after a
full poll and seconds before the change, and the Go clients (sarama,
segmentio/kafka-go with WatchPartitionChanges, franz-go, confluent-kafka-go;
tests/clients/go, built by scripts/setup.sh). ``--trials`` trials with the machine
as it is (``idle``) and with a CPU-bound process per core beside it
(``loaded``), started and killed by the bench.

Per trial and client: S = the first offset the client read on the new
partition, truth = offsets below S it never received; *sound* = truth in
[definite, definite + possible] and the default backfill reaches S; the
width of possible (records, and seconds of the scenario's traffic); the
likely estimate's error (likely start - S, records).

latency: a group with a commit on a topic; 20 times, `create_partitions`
returns -> the finding of the added partition is listed by
`GET /api/v1/findings?topic=...` (asked every 20 ms with a viewer's API
token, through Django's request handling in this process), with the trials
spread over the watcher's phase.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from contextlib import contextmanager

import django

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewPartitions  # noqa: E402

from groups.models import Cluster  # noqa: E402
from tasks.polling import poll_cluster  # noqa: E402
from tests.harness.processes import end_processes  # noqa: E402
from tests.harness.kafka_clients import Broker, wait_until  # noqa: E402
from tests.harness.pickups import SCENARIOS, Driver, Outcome, run_scenarios  # noqa: E402


@contextmanager
def control_plane():
    """A Celery worker and beat as deployed (scripts/app.sh), stopped afterwards by their own pids."""
    python_bin = os.path.dirname(sys.executable)
    worker = subprocess.Popen([f"{python_bin}/celery", "-A", "controlplane", "worker", "--concurrency", "2",
                               "--loglevel", "WARNING", "-n", f"bench-{uuid.uuid4().hex[:6]}@%h"])
    beat = subprocess.Popen([f"{python_bin}/celery", "-A", "controlplane", "beat", "--loglevel", "WARNING",
                             "-S", "django_celery_beat.schedulers:DatabaseScheduler", "--pidfile="])
    try:
        from tasks.celery_tasks import ping

        # Under load a worker takes many seconds to start: measure only once it answers.
        wait_until(lambda: _answers(ping), timeout=120, interval=1, what="the worker to answer")
        time.sleep(3)  # beat's first watcher ticks through
        yield
    finally:
        end_processes([beat, worker])


def _answers(ping) -> bool:
    try:
        return ping.delay("bench").get(timeout=2) == "pong:bench"
    except Exception:  # noqa: BLE001 - not up yet
        return False


class Deployed(Driver):
    """The deployed beat polls and watches; a late joiner starts right after one of its full polls."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def before_late_joiners(self) -> None:
        polls = Cluster.objects.get(id=self.cluster.id).polls_total
        wait_until(lambda: Cluster.objects.get(id=self.cluster.id).polls_total > polls, timeout=120, interval=0.1,
                   what="the next full poll")


@contextmanager
def cpu_load(processes: int):
    """``processes`` CPU-bound processes beside the bench, ended by their own pids."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def trial_rows(outcomes: list[Outcome], load: str, trial: int) -> list[dict]:
    rows = []
    for o in outcomes:
        f = o.finding or {}
        client = o.scenario.id
        if o.scenario.late_join and o.seen_before_change:
            client += " (a full poll saw it first)"
        likely = f.get("likely")
        timing = "young topic" if o.scenario.young_topic else "late join" if o.scenario.late_join else "steady"
        rows.append({
            "client": client, "load": load, "trial": trial, "rate": o.scenario.rate, "start": o.start,
            "policy": o.scenario.policy, "timing": timing, "policy_source": f.get("policy_source"),
            "if_latest": [f.get("missed_definite_if_latest"), f.get("missed_possible_if_latest")],
            "generation": f.get("generation"),
            "truth": o.truth, "definite": f.get("missed_definite"), "possible": f.get("missed_possible"),
            "first_commit": f.get("first_commit"), "backfill": [f.get("backfill_start"), f.get("backfill_end")],
            "state": f.get("state"), "likely": likely, "likely_evidence": f.get("likely_evidence"),
            "likely_error": likely - o.start if likely is not None and o.start is not None else None,
            "decided_after_s": o.decided_after_s, "read_after_s": o.read_after_s, "sound": not o.problems(),
            "problems": o.problems(),
            "skipped_after_start": o.skipped_after_start, "notes": o.notes,
        })
    return rows


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def summary_table(rows: list[dict]) -> str:
    lines = ["| client | policy | timing | load | trials | sound of judged | no truth | policy decided by | possible, records: "
             "median (max) | possible, s of traffic: median (max) | likely - S, records: median, p90 of abs, [min, max] | "
             "decided after, s: median (max) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = list(dict.fromkeys((r["client"], r["load"]) for r in rows))
    for client, load in keys:
        group = [r for r in rows if (r["client"], r["load"]) == (client, load)]
        # A trial whose client never read the new partition within the window has no truth (no
        # start S): nothing to hold the finding against. Counted apart, never as sound.
        judged = [r for r in group if r["truth"] is not None]
        sound = sum(r["sound"] for r in judged)
        possible = [r["possible"] for r in group if r["possible"] is not None]
        seconds = [r["possible"] / r["rate"] for r in group if r["possible"] is not None]
        errors = [r["likely_error"] for r in group if r["likely_error"] is not None]
        decided = [r["decided_after_s"] for r in group if r["decided_after_s"] is not None]
        width = f"{statistics.median(possible):.0f} ({max(possible)})" if possible else "-"
        width_s = f"{statistics.median(seconds):.2f} ({max(seconds):.2f})" if seconds else "-"
        error = (f"{statistics.median(errors):+.0f}, {_pct([abs(e) for e in errors], 0.9):.0f}, "
                 f"[{min(errors):+d}, {max(errors):+d}]" if errors else "-")
        took = f"{statistics.median(decided):.1f} ({max(decided):.1f})" if decided else "-"
        share = f"{sound}/{len(judged)} ({100 * sound / len(judged):.0f}%)" if judged else "-"
        decided_by = ", ".join(f"{source} {count}" for source, count in sorted(
            Counter(r.get("policy_source") or "none" for r in group).items()))
        first = group[0]
        lines.append(f"| {client} | {first.get('policy', 'latest')} | {first.get('timing', 'steady')} | {load} | "
                     f"{len(group)} | {share} | {len(group) - len(judged)} | {decided_by} | {width} | "
                     f"{width_s} | {error} | {took} |")
    return "\n".join(lines)


def run_accuracy(args, broker: Broker, cluster: Cluster) -> None:
    rows, errors = [], []
    out = open(args.jsonl, "a") if args.jsonl else None  # noqa: SIM115 - closed below
    try:
        for load in args.load:
            with cpu_load((os.cpu_count() or 1) if load == "loaded" else 0):
                for number in range(1, args.trials + 1):
                    began = time.monotonic()
                    try:
                        outcomes = run_scenarios(
                            broker, cluster, SCENARIOS, driver=Deployed(cluster), decide_timeout=args.decide_timeout,
                            wait_for_likely=True,
                            log=lambda line: print(f"  {time.monotonic() - began:6.1f}s {line}", flush=True))
                    except Exception as error:  # noqa: BLE001 - a trial that could not run is reported, not fatal
                        errors.append(f"{load} trial {number}: {error!r}")
                        print(f"{load} trial {number} did not run: {error!r}", flush=True)
                        continue
                    for row in trial_rows(outcomes, load, number):
                        rows.append(row)
                        if out:
                            out.write(json.dumps(row) + "\n")
                            out.flush()
                        print(f"{load} trial {number}: {'sound' if row['sound'] else 'UNSOUND'} {row['client']}: "
                              f"S {row['start']}, definite/possible {row['definite']}/{row['possible']}, "
                              f"first commit {row['first_commit']}, likely {row['likely']}, {row['problems']}",
                              flush=True)
                    print(f"{load} trial {number} took {time.monotonic() - began:.0f}s", flush=True)
    finally:
        if out:
            out.close()
    print("\n" + summary_table(rows))
    sound = sum(r["sound"] for r in rows)
    print(f"\nsound: {sound}/{len(rows)} client-trials; trials that could not run: {len(errors)}")
    decided = Counter(r["policy_source"] for r in rows if r.get("policy_source"))
    print("policy decided by: " + ", ".join(f"{source} {count}" for source, count in sorted(decided.items()))
          + f" (of {sum(decided.values())} decided findings)")
    for error in errors:
        print(f"- {error}")


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
    parser.add_argument("mode", choices=["accuracy", "latency", "table"],
                        help="table: print the accuracy table of the client-trials in --jsonl (runs nothing)")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--load", nargs="+", choices=["idle", "loaded"], default=["idle", "loaded"],
                        help="accuracy: the machine as it is, and with a CPU-bound process per core beside it")
    parser.add_argument("--decide-timeout", type=float, default=120.0)
    parser.add_argument("--jsonl", default="", help="accuracy: also append every client-trial as a JSON line here")
    args = parser.parse_args()
    if args.mode == "table":
        with open(args.jsonl) as lines:
            print(summary_table([json.loads(line) for line in lines if line.strip()]))
        return
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
