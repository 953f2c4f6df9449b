"""Real clients nobody on the project wrote pick a new partition up, many at
once against one cluster, each on its own topic and in its own group (issue
26). Used by tests/integration/test_pickup.py (Gapwatch driven in-process
the way celery beat drives it) and bench/accuracy_bench.py (a deployed
worker and beat).

Every scenario: a ``latest`` group reads partition 0 of its topic under steady
production; partition 1 is added and the producer writes to it as soon as its
own metadata shows it; the client takes it on its own metadata refresh (5 s),
never restarted. The truth is what the client itself read: ``start`` (S) is
the first offset it read on partition 1, ``truth`` the offsets below S it never
received. Sound means ``definite <= truth <= definite + possible`` and a default
backfill plan that reaches S.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from confluent_kafka.admin import NewPartitions

from tests.harness.kafka_clients import (
    Broker,
    GoClientConsumer,
    GroupConsumer,
    JavaConsoleConsumer,
    JavaConsoleShareConsumer,
    RateProducer,
    TransactionalRateProducer,
    group_committed,
    never_consumed,
    stop_all,
    wait_until,
)

REFRESH_MS = 5000  # every client's own metadata refresh
DECIDED = ("gap", "covered", "expired")
# What a decided finding keeps for the assertions and the bench (plus its
# likely start and evidence, as ``likely`` and ``likely_evidence``).
FINDING_FIELDS = (
    "state", "first_log_start", "log_start_offset", "high_watermark", "pre_pickup_high_watermark",
    "pre_pickup_stable_offset", "first_commit",
    "missed_definite", "missed_possible", "missed_definite_if_latest", "missed_possible_if_latest",
    "backfill_start", "backfill_end", "pickup_after", "pickup_before", "policy_source", "explanation",
)


@dataclass(frozen=True)
class Scenario:
    """One latest group on a topic of its own. ``client``: java-classic,
    java-consumer (Kafka's console consumer, default 5 s auto-commit),
    rdkafka-classic, rdkafka-consumer (librdkafka, default 5 s auto-commit),
    rdkafka-manual (auto-commit off, a synchronous commit every 25 records,
    20 ms of work per record), rdkafka-slow-assign (1.5 s of work in
    ``on_assign``), java-share (Kafka's console share consumer, a share
    group: its start offset is its position), go-sarama, go-kafka-go
    (``WatchPartitionChanges``), go-franz-go, go-confluent-kafka-go (the Go
    clients of tests/clients/go, each auto-committing every 5 s).
    ``late_join``: the group starts after the last full poll before the
    change, so no full poll ever recorded it reading the topic.
    ``young_topic``: the topic itself is created then, seconds before the
    change, with no full poll between its creation and its raise (a
    provisioning script, a Terraform apply): only the watcher can have seen
    it before. ``policy``: the group's ``auto.offset.reset``; an
    ``earliest`` group reads the new partition from 0 and, quick, commits at
    its end within one interval: commits alone look like latest.

    Transactions (issue 32): ``isolation`` is the librdkafka client's
    ``isolation.level`` (None: its default, read_committed), ``declared_isolation``
    what an operator declares on the group in Gapwatch once a poll saw it;
    ``transactions`` "open" writes every record in 1 s transactions and keeps
    the one holding partition 1's first records open 15 s, past the pickup;
    "aborted" aborts every other 1 s transaction. ``refresh_ms``: the client's
    own metadata refresh (None: REFRESH_MS)."""

    id: str
    client: str
    rate: int = 50  # messages a second to each partition
    clock_skew_s: float = 0.0
    timestamp_type: str = "CreateTime"
    late_join: bool = False
    isolation: str | None = None
    declared_isolation: str = ""
    transactions: str = ""
    refresh_ms: int | None = None
    young_topic: bool = False
    policy: str = "latest"


SCENARIOS = (
    # A trickle, as in issue 26's first rows: a second of pickup delay is a record or two.
    Scenario("java-classic-trickle", "java-classic", rate=2),
    Scenario("java-kip848-trickle", "java-consumer", rate=2),
    Scenario("rdkafka-classic", "rdkafka-classic"),
    Scenario("rdkafka-kip848", "rdkafka-consumer"),
    # 20 ms a record: 50 records a second at most, so a slower producer (2 x 15/s).
    Scenario("rdkafka-manual-commit", "rdkafka-manual", rate=15),
    Scenario("rdkafka-slow-assign", "rdkafka-slow-assign"),
    Scenario("java-classic-clock-ahead-30s", "java-classic", clock_skew_s=30),
    Scenario("rdkafka-manual-clock-ahead-30s", "rdkafka-manual", rate=15, clock_skew_s=30),
    Scenario("rdkafka-classic-clock-behind-30s", "rdkafka-classic", clock_skew_s=-30),
    # The broker stamps records: the producer's clock (30 s ahead) no longer matters.
    Scenario("java-kip848-logappendtime", "java-consumer", clock_skew_s=30, timestamp_type="LogAppendTime"),
    # Its on_assign holds the new partition until it has records (hold_new_until_written): a
    # producer slowed by a busy machine once wrote there only after the joiner's refresh, even
    # with a 30 s refresh, and the joiner missed nothing.
    Scenario("rdkafka-late-joiner", "rdkafka-classic", late_join=True),
    # A share group (KIP-932) under the broker's default share.auto.offset.reset=latest: its
    # position is the start offset, which moves forward as records are acknowledged.
    Scenario("java-share", "java-share"),
    # Transactions: a read_committed member starting at latest starts at the last stable offset.
    Scenario("rdkafka-txn-open-read-committed", "rdkafka-classic", transactions="open"),
    Scenario("rdkafka-txn-open-read-uncommitted", "rdkafka-classic", transactions="open",
             isolation="read_uncommitted", declared_isolation="read_uncommitted"),
    Scenario("rdkafka-txn-aborted", "rdkafka-classic", transactions="aborted"),
    # The Go clients the loss was first reported on (issue 32). sarama compares partition
    # counts with its metadata every refresh, so it takes the partition after one or two
    # (~10 s); kafka-go without WatchPartitionChanges never does (tests/integration/test_go_clients.py).
    Scenario("go-sarama", "go-sarama"),
    Scenario("go-kafka-go", "go-kafka-go"),
    Scenario("go-franz-go", "go-franz-go"),
    Scenario("go-confluent-kafka-go", "go-confluent-kafka-go"),
    # Issue 41: a topic created and raised seconds apart, its groups seconds old (both protocols).
    Scenario("java-classic-young-topic", "java-classic", young_topic=True),
    Scenario("java-kip848-young-topic", "java-consumer", young_topic=True),
    Scenario("rdkafka-classic-young-topic", "rdkafka-classic", young_topic=True),
    # Issue 41: earliest groups that catch up within one commit interval lose nothing, and
    # must not be told otherwise: nothing definite while latest is only assumed.
    Scenario("rdkafka-earliest-quick", "rdkafka-classic", policy="earliest"),
    Scenario("java-classic-earliest-quick", "java-classic", policy="earliest"),
    Scenario("go-franz-go-earliest-quick", "go-franz-go", policy="earliest"),
)


def start_client(scenario: Scenario, bootstrap: str, group_id: str, topic: str):
    kind = scenario.client
    refresh_ms = scenario.refresh_ms or REFRESH_MS
    if kind == "java-share":
        return JavaConsoleShareConsumer(bootstrap, group_id, topic, refresh_ms=refresh_ms)
    earliest = scenario.policy == "earliest"
    if kind.startswith("go-"):
        return GoClientConsumer(kind.removeprefix("go-"), bootstrap, group_id, topic, refresh_ms=refresh_ms,
                                earliest=earliest)
    if kind.startswith("java-"):
        return JavaConsoleConsumer(bootstrap, group_id, topic, protocol=kind.split("-", 1)[1], refresh_ms=refresh_ms,
                                   earliest=earliest)
    common = dict(offset_reset=scenario.policy, refresh_ms=refresh_ms, commit_interval_ms=5000)  # librdkafka's default
    if kind == "rdkafka-manual":
        return GroupConsumer(bootstrap, group_id, topic, commit_every=25, delay=0.02, **common)
    if kind == "rdkafka-slow-assign":
        return GroupConsumer(bootstrap, group_id, topic, assign_work_s=1.5, **common)
    if kind in ("rdkafka-classic", "rdkafka-consumer"):
        return GroupConsumer(bootstrap, group_id, topic, protocol=kind.split("-", 1)[1],
                             isolation=scenario.isolation, hold_new_until_written=scenario.late_join or scenario.young_topic, **common)
    raise ValueError(kind)


def start_producer(scenario: Scenario, bootstrap: str, topic: str) -> RateProducer:
    if scenario.transactions == "open":
        return TransactionalRateProducer(bootstrap, topic, rate=scenario.rate, partitions=[0], hold_new_s=15)
    if scenario.transactions == "aborted":
        return TransactionalRateProducer(bootstrap, topic, rate=scenario.rate, partitions=[0], abort_every=2)
    return RateProducer(bootstrap, topic, rate=scenario.rate, partitions=[0], clock_skew_s=scenario.clock_skew_s)


@dataclass
class Outcome:
    scenario: Scenario
    topic: str
    group_id: str
    seen_before_change: bool = False  # a full poll recorded the group reading the topic before the change
    finding: dict | None = None  # FINDING_FIELDS plus likely, likely_evidence, generation; None: no finding at all
    decided: bool = False
    decided_after_s: float | None = None  # from create_partitions to the finding decided
    read_after_s: float | None = None  # from create_partitions to the client's first record of partition 1
    start: int | None = None  # S: where the client started on partition 1 (see run_scenarios, step 6)
    # The client's own first commit on partition 1 as the broker answered it (transactional scenarios).
    client_commit: int | None = None
    truth: int | None = None  # offsets of partition 1 below S it never received
    skipped_after_start: int = 0  # offsets in [S, last read] it never received (should be 0)
    notes: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Why this trial is not sound; empty when it is."""
        f = self.finding
        if self.start is None:
            return [f"{self.group_id} never read partition 1"]
        if f is None:
            return [f"no finding for {self.group_id} on {self.topic}[1] while it missed {self.truth}: a silent miss"]
        problems = []
        if f["state"] not in DECIDED:
            problems.append(f"undecided: {f['state']} ({f['explanation']})")
        definite, possible = f["missed_definite"], f["missed_possible"]
        if not definite <= self.truth <= definite + possible:
            problems.append(f"truth {self.truth} outside [definite {definite}, definite + possible "
                            f"{definite + possible}]")
        if_latest = f.get("missed_definite_if_latest")
        if self.scenario.policy == "latest" and if_latest is not None:
            # The group really starts at latest: the conditional figures must then be bounds too.
            at_most = if_latest + f["missed_possible_if_latest"]
            if not if_latest <= self.truth <= at_most:
                problems.append(f"truth {self.truth} outside the figures under latest [{if_latest}, {at_most}]")
        if self.start <= f["first_log_start"]:
            return problems  # it read from the log start: there is nothing a backfill must reach
        if f["backfill_end"] is None or f["backfill_end"] < self.start:
            problems.append(f"default backfill [{f['backfill_start']}, {f['backfill_end']}) stops before the "
                            f"true start {self.start}")
        elif f["backfill_start"] > f["first_log_start"]:
            problems.append(f"default backfill starts at {f['backfill_start']}, after the first log start")
        return problems

    def describe(self) -> str:
        f = self.finding or {}
        return (f"{self.scenario.id}: start {self.start}, truth {self.truth}, first read "
                f"{'-' if self.read_after_s is None else f'{self.read_after_s:.1f}s'} after the change; "
                f"definite/possible {f.get('missed_definite')}/{f.get('missed_possible')}, "
                f"first commit {f.get('first_commit')}, likely {f.get('likely')}, "
                f"backfill [{f.get('backfill_start')}, {f.get('backfill_end')}), state {f.get('state')}: "
                f"{f.get('explanation')}; skipped after its start: {self.skipped_after_start}")


class Driver:
    """How Gapwatch runs beside the scenarios: ``full_poll`` once (None: wait
    for the deployed beat's), and hooks at the moments the run reaches."""

    full_poll: Callable[[], object] | None = None

    def before_late_joiners(self) -> None:
        """Every early group is recorded by a full poll; late joiners start next."""

    def after_change(self) -> None:
        """Partition 1 was just added to every topic."""


def _snapshot(row) -> dict:
    data = {name: getattr(row, name, None) for name in FINDING_FIELDS}
    data["likely"], data["likely_evidence"] = row.likely_start, row.likely_start_evidence
    data["generation"] = row.generation.number  # 2: the raise was seen as one (1: the topic's first sight)
    return data


def run_scenarios(broker: Broker, cluster, scenarios: Iterable[Scenario], *, driver: Driver,
                  decide_timeout: float = 240.0, wait_for_likely: bool = False,
                  log: Callable[[str], None] = lambda line: None) -> list[Outcome]:
    """All ``scenarios`` at once against ``cluster`` (a groups.models.Cluster):

    1. a topic and a producer each (not yet for young topics); the early
       groups start and read partition 0;
    2. a full poll records every early group reading its topic;
    3. young topics are created with their producers; late joiners and the
       young topics' groups start, read partition 0 and commit on it (no
       full poll meanwhile); the watcher has stored each young topic;
    4. partition 1 is added to every topic in one request; each producer
       writes to it once its own metadata shows it;
    5. until every finding is decided (a decided state and a first commit;
       with ``wait_for_likely`` a likely start too) and every client read
       partition 1, or ``decide_timeout``;
    6. S, where each client started: the first offset it read on partition
       1, or, for the transactional scenarios, its own first commit there
       (read from the broker while it is pending) when that is lower: a
       read_committed member skips aborted records and markers without
       reading them, so its first record read can lie above its start.

    Returns one Outcome per scenario; a scenario that timed out keeps what
    was last seen. Its consumer groups and topics are deleted afterwards.
    """
    from groups.models import Finding

    scenarios = list(scenarios)
    tag = uuid.uuid4().hex[:8]
    outcomes = [Outcome(s, topic=f"pk-{s.id}-{tag}", group_id=f"pk-{s.id}-{tag}-g") for s in scenarios]
    producers: dict[str, RateProducer] = {}
    clients: dict[str, object] = {}
    try:
        def create(o: Outcome) -> None:
            broker.create_topic(o.topic, 1, {"message.timestamp.type": o.scenario.timestamp_type})
            producers[o.group_id] = start_producer(o.scenario, broker.bootstrap, o.topic)

        late = [o for o in outcomes if o.scenario.late_join or o.scenario.young_topic]
        early = [o for o in outcomes if o not in late]
        for o in early + [o for o in late if not o.scenario.young_topic]:
            create(o)
        for o in early:
            clients[o.group_id] = start_client(o.scenario, broker.bootstrap, o.group_id, o.topic)
        wait_until(lambda: all(clients[o.group_id].count(0) > 0 for o in early), timeout=120, interval=0.5,
                   what="every early client to read partition 0")
        log("every early client reads partition 0")

        def recorded(o: Outcome) -> bool:
            return cluster.groups.filter(group_id=o.group_id, group_topics__topic__name=o.topic).exists()

        def all_recorded() -> bool:
            if driver.full_poll is not None:
                driver.full_poll()
            return all(recorded(o) for o in early)

        wait_until(all_recorded, timeout=120, interval=0.5, what="a full poll to see every early group reading")
        log("a full poll recorded every early group")
        for o in early:
            if o.scenario.declared_isolation:
                cluster.groups.filter(group_id=o.group_id).update(declared_isolation=o.scenario.declared_isolation)
        driver.before_late_joiners()
        for o in late:
            if o.scenario.young_topic:
                create(o)
            clients[o.group_id] = start_client(o.scenario, broker.bootstrap, o.group_id, o.topic)
        # Consuming the topic, as the broker can tell: records read, and a commit on partition 0.
        wait_until(lambda: all(clients[o.group_id].count(0) > 0
                               and group_committed(broker.admin, o.group_id, o.topic, [0])[0] > 0 for o in late),
                   timeout=90, interval=0.5, what="every late joiner to read and commit partition 0")
        for o in outcomes:
            o.seen_before_change = recorded(o)
        log(f"{len(late)} late joiners read and committed partition 0")
        # A young topic is raised once the watcher has stored it at its first size (within a tick on an idle
        # watch; on a host at half its speed, ticks came late enough that the raise came first). A topic raised
        # before any observation saw it and picked up with commits is not told apart: Kafka keeps no creation
        # time of a partition (docs/detection.md, "A topic first seen already read").
        young = [o.topic for o in outcomes if o.scenario.young_topic]
        wait_until(lambda: cluster.topics.filter(name__in=young, partition_count=1).count() == len(young),
                   timeout=120, interval=0.5, what="the watcher to store every young topic at its first size")

        raised = time.monotonic()
        futures = broker.admin.create_partitions([NewPartitions(o.topic, 2) for o in outcomes])
        for future in futures.values():
            future.result(timeout=30)
        driver.after_change()
        log(f"partition 1 added to {len(outcomes)} topics")
        # Each producer on its own metadata (refreshed every second), all at once. A busy broker (two
        # suites on two cores) can take a minute to answer metadata: they have 120 s.
        for producer in producers.values():
            producer.add([1])
        try:
            wait_until(lambda: all(p.writes([1]) for p in producers.values()), timeout=120, interval=0.1,
                       what="every producer to write to partition 1")
        except AssertionError as error:
            blind = [o.topic for o in outcomes if not producers[o.group_id].writes([1])]
            raise AssertionError(f"producers never saw partition 1 of {blind}") from error
        log(f"every producer writes to partition 1 ({time.monotonic() - raised:.1f}s after the change)")

        pending = list(outcomes)
        deadline = raised + decide_timeout
        while pending and time.monotonic() < deadline:
            for o in list(pending):
                if o.scenario.transactions and o.client_commit is None:
                    commit = group_committed(broker.admin, o.group_id, o.topic, [1]).get(1, -1)
                    o.client_commit = commit if commit >= 0 else None
                row = Finding.objects.filter(cluster=cluster, topic__name=o.topic, group__group_id=o.group_id,
                                             partition=1).order_by("-id").first()
                if row is None:
                    continue
                o.finding = _snapshot(row)
                if (row.state in DECIDED and row.first_commit is not None and clients[o.group_id].count(1) > 0
                        and (o.finding["likely"] is not None or not wait_for_likely)):
                    o.decided, o.decided_after_s = True, time.monotonic() - raised
                    pending.remove(o)
                    log(f"decided after {o.decided_after_s:.1f}s: {o.scenario.id} {row.state}")
            time.sleep(0.5)
        for o in pending:
            o.notes.append(f"not decided within {decide_timeout:.0f}s")
    finally:
        stop_all(producers.values())
        for client in clients.values():
            client.close()
        for o in outcomes:
            client = clients.get(o.group_id)
            received = client.offsets(1) if client is not None else []
            if received:
                o.read_after_s = client.first_read_at[1] - raised
                # A latest member's commit is at or above where it started: below its first record
                # read, it shows a read_committed member that skipped aborted records and markers.
                o.start = min(received + ([o.client_commit] if o.client_commit is not None else []))
                o.truth = never_consumed(received, log_start=(o.finding or {}).get("first_log_start") or 0,
                                         end=o.start)
                o.skipped_after_start = never_consumed(received, log_start=o.start, end=max(received) + 1)
        _delete(broker, [o.topic for o in outcomes], [o.group_id for o in outcomes])
    return outcomes


def _delete(broker: Broker, topics: list[str], group_ids: list[str]) -> None:
    """Best effort: the run's groups (once their members left) and topics, so that
    many runs on a shared broker do not slow every later poll down."""
    remaining = list(group_ids)

    def groups_gone() -> bool:
        failed = []
        for group_id, future in broker.admin.delete_consumer_groups(remaining).items():
            try:
                future.result(timeout=30)
            except Exception as error:  # noqa: BLE001 - NON_EMPTY while a member is leaving: try again
                if "GROUP_ID_NOT_FOUND" not in str(error):
                    failed.append(group_id)
        remaining[:] = failed
        return not remaining

    try:
        wait_until(groups_gone, timeout=20, interval=1, what="the groups to be deleted")
    except AssertionError:
        pass  # left for the broker's offset retention
    for topic, future in broker.admin.delete_topics(topics).items():
        try:
            future.result(timeout=30)
        except Exception:  # noqa: BLE001 - best effort
            pass
        if topic in broker.topics:
            broker.topics.remove(topic)
