"""Real clients nobody on the project wrote pick a new partition up on their
own metadata refresh while Gapwatch runs as celery beat drives it: every
truth (what the client itself never read) must lie in [definite, definite +
possible], and the default backfill must reach where the client really
started (issues 11 and 26). The scenarios (tests/harness/pickups.py)
run all at once, each on its own topic and group, so the whole set costs
about one pickup; each test then checks one client's result."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.db import connection

from groups.models import AuditEvent, Cluster, Finding
from tasks.celery_tasks import poll_cluster_task, watch_cluster_task
from tasks.polling import poll_cluster
from tests.harness.kafka_clients import Broker, GroupConsumer, Ticker, group_committed, wait_until
from tests.harness.pickups import SCENARIOS, Driver, Outcome, run_scenarios

# The fixture runs 25 scenarios, a dozen JVM clients among them, and waits on
# their decisions (up to run_scenarios' decide_timeout after the change).
pytestmark = pytest.mark.timeout(900)


def watch(cluster_id: int) -> None:
    try:
        watch_cluster_task(cluster_id)
    finally:
        connection.close()  # the ticker's thread has its own connection


class Beat(Driver):
    """Celery beat's two schedules for one cluster, run in this process through
    the real task functions: the watcher tick every WATCH_INTERVAL_SECONDS
    and, from the partition change on, the full poll every
    POLL_INTERVAL_SECONDS (sooner when a poll asks for its FAST_POLL_SECONDS
    follow-up, which poll_cluster_task would enqueue for a worker)."""

    def __init__(self, cluster_id: int) -> None:
        self.cluster_id = cluster_id
        self.tickers: list[Ticker] = []
        self.poll_due: float | None = None
        self.full_polls = 0

    def full_poll(self) -> None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(poll_cluster_task, "apply_async", self._follow_up)
            try:
                poll_cluster_task(self.cluster_id)
                self.full_polls += 1
            finally:
                connection.close()

    def _follow_up(self, args, countdown: float = 0, **_) -> None:
        due = time.monotonic() + countdown
        self.poll_due = due if self.poll_due is None else min(self.poll_due, due)

    def _maybe_poll(self) -> None:
        if self.poll_due is not None and time.monotonic() >= self.poll_due:
            self.poll_due = time.monotonic() + settings.POLL_INTERVAL_SECONDS
            self.full_poll()

    def before_late_joiners(self) -> None:
        self.tickers.append(Ticker(lambda: watch(self.cluster_id), interval=settings.WATCH_INTERVAL_SECONDS))

    def after_change(self) -> None:
        self.poll_due = time.monotonic() + settings.POLL_INTERVAL_SECONDS
        self.tickers.append(Ticker(self._maybe_poll, interval=0.2))

    def close(self) -> None:
        """Stops every ticker, then raises the first error a tick had."""
        errors = []
        for ticker in self.tickers:
            try:
                ticker.close()
            except BaseException as error:  # noqa: BLE001 - raised below, once all are stopped
                errors.append(error)
        if errors:
            raise errors[0]


@pytest.fixture(scope="module")
def pickups(django_db_setup, django_db_blocker, kafka_bootstrap) -> dict[str, Outcome]:
    """Every scenario at once on one cluster (about one pickup's time); the
    results are plain data, and the cluster is deleted before any test runs."""
    with django_db_blocker.unblock():
        cluster = Cluster.objects.create(name="pickups", bootstrap_servers=kafka_bootstrap)
        broker, beat = Broker(kafka_bootstrap), Beat(cluster.id)
        try:
            began = time.monotonic()
            outcomes = run_scenarios(broker, cluster, SCENARIOS, driver=beat,
                                     log=lambda line: print(f"{time.monotonic() - began:6.1f}s {line}"))
        finally:
            try:
                beat.close()
            finally:
                broker.close()
                # Audit rows outlive their cluster (SET_NULL): delete them first, so the tests
                # that run after this module find the database as empty as they expect.
                AuditEvent.objects.filter(cluster_id=cluster.id).delete()
                Cluster.objects.filter(id=cluster.id).delete()
                connection.close()
    for outcome in outcomes:
        print(outcome.describe())
    return {outcome.scenario.id: outcome for outcome in outcomes}


def assert_estimate_inside_bounds(outcome: Outcome) -> None:
    """The likely start is an estimate shown inside what the broker proved: [H_k, C_f]."""
    f = outcome.finding
    if f["likely"] is not None:
        # Under an assumed latest, H_k is the definite end of the figures under latest.
        definite = f["missed_definite"] if f["missed_definite_if_latest"] is None else f["missed_definite_if_latest"]
        low, high = f["first_log_start"] + definite, f["first_log_start"] + f["missed_definite"] + f["missed_possible"]
        assert low <= f["likely"] <= high, outcome.describe()


# The tests read plain results; the marker makes pytest-django create the test database for the fixture.
@pytest.mark.django_db
@pytest.mark.parametrize("scenario", [s.id for s in SCENARIOS
                                      if not s.late_join and not s.young_topic and s.policy == "latest"])
def test_the_bounds_hold_what_a_real_client_missed(pickups, scenario):
    outcome = pickups[scenario]
    assert outcome.seen_before_change, "a full poll saw the group reading before the change"
    assert outcome.problems() == [], outcome.describe()
    if outcome.truth:  # a trickle may reach a fast client only after it took the partition
        assert outcome.finding["state"] == "gap", outcome.describe()
    assert_estimate_inside_bounds(outcome)


@pytest.mark.django_db
@pytest.mark.parametrize("scenario", [s.id for s in SCENARIOS if s.young_topic])
def test_a_topic_raised_seconds_after_it_was_created_gets_sound_findings(pickups, scenario):
    """Issue 41 item 1: the topic was created, its group started and read it,
    and it was raised, all between two full polls; the watcher saw the topic
    when it appeared, so the raise is a change with a finding like any other
    (before: the first full poll stored the topic with its raised count, one
    generation, and the group's loss was silent)."""
    outcome = pickups[scenario]
    assert outcome.problems() == [], outcome.describe()  # a finding, and the truth inside its bounds
    assert outcome.finding["generation"] == 2, "the watcher stored the topic before its raise: " + outcome.describe()
    if outcome.truth:  # a client that took the partition before its first record missed nothing
        assert outcome.finding["state"] == "gap", outcome.describe()
    assert_estimate_inside_bounds(outcome)


@pytest.mark.django_db
@pytest.mark.parametrize("scenario", [s.id for s in SCENARIOS if s.policy == "earliest"])
def test_a_quick_earliest_group_is_never_told_it_definitely_missed_records(pickups, scenario):
    """Issue 41 item 2: an earliest group read the new partition from 0 and
    lost nothing; whether its first commit gave it away (covered, evidenced)
    or not (latest assumed: 0 definite, the sound range possible), no number
    called definite may exceed what it really missed: nothing."""
    outcome = pickups[scenario]
    assert outcome.start == outcome.finding["first_log_start"], f"it read from the log start: {outcome.describe()}"
    assert outcome.truth == 0
    assert outcome.problems() == [], outcome.describe()
    assert outcome.finding["missed_definite"] == 0, outcome.describe()
    assert outcome.finding["state"] in ("covered", "gap"), outcome.describe()
    if outcome.finding["state"] == "gap":
        assert outcome.finding["policy_source"] == "assumed" and "nothing is definitely missed" in \
            outcome.finding["explanation"], outcome.describe()


@pytest.mark.django_db
def test_a_group_no_full_poll_saw_reading_still_gets_sound_findings(pickups):
    """Issue 26 item 4: the group joined the topic seconds before the change
    and after the last full poll; it lost what a latest client loses and
    must get a finding like any other."""
    outcome = pickups["rdkafka-late-joiner"]
    assert not outcome.seen_before_change, "the precondition: no full poll recorded it reading the topic"
    assert outcome.truth is not None and outcome.truth > 0, f"a latest client misses the first records: {outcome}"
    assert outcome.problems() == [], outcome.describe()
    assert outcome.finding["state"] == "gap", outcome.describe()
    assert_estimate_inside_bounds(outcome)


@pytest.mark.django_db(transaction=True)
def test_a_watcher_tick_observes_only_changed_topics_and_opens_the_findings(broker, cluster, unique):
    topic, group_id = f"watched-{unique}", f"reader-{unique}"
    broker.create_topic(topic, 1)
    broker.produce(topic, 0, 3)
    consumer = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="earliest")
    try:
        wait_until(lambda: consumer.count(0) == 3, what="the group to read partition 0")
        wait_until(lambda: poll_cluster(cluster_id=cluster.id).ok and cluster.groups.filter(
            group_id=group_id, group_topics__topic__name=topic).exists(), interval=0.5, what="a poll to see it")
        # Topics of other tests on the shared broker (a parallel run's other
        # worker) may change meanwhile: the claims are about this one.
        quiet = watch_cluster_task(cluster.id)
        assert topic not in quiet["observed"], "nothing changed here: the topic is not observed"
        assert len(quiet["observed"]) < cluster.topics.count(), "a tick observes changed topics, not all"

        broker.raise_partitions(topic, 3)
        broker.produce(topic, 2, 4)
        tick = watch_cluster_task(cluster.id)
        next_tick = watch_cluster_task(cluster.id)
    finally:
        consumer.close()

    assert topic in tick["observed"] and topic in tick["changed"]
    # While its new partitions are picked up the topic stays observed: again within the
    # tick when the first observation left room for it (under a parallel run's load it may
    # not), never past the interval, and at the next tick, though nothing changed since.
    later = tick.get("later", [])
    assert len(later) < settings.WATCH_OBSERVATIONS_PER_TICK, "never observed past its interval"
    assert all(topic in observed for observed in later)
    assert topic in next_tick["observed"] and topic not in next_tick.get("changed", []), "watched, not changed"
    rows = {f.partition: f for f in Finding.objects.filter(topic__name=topic, group__group_id=group_id)}
    assert sorted(rows) == [1, 2]
    assert (rows[2].state, rows[2].pre_pickup_high_watermark, rows[2].first_log_start) == ("pending", 4, 0)
    assert rows[2].pickup_after is not None and rows[2].pickup_before is None


@pytest.mark.django_db(transaction=True)
def test_a_known_group_that_took_up_a_topic_since_the_last_poll_gets_findings_at_its_change(
        broker, cluster, unique):
    """The watcher's changing tick reads every listed group, not only the
    stored readers of the topic nor only the groups no poll stored: a group a
    poll stored reading another topic, which subscribed to this one since,
    read it before the change and loses what a latest client loses."""
    first, taken_up, group_id = f"first-{unique}", f"taken-up-{unique}", f"switcher-{unique}"
    broker.create_topic(first, 1)
    broker.create_topic(taken_up, 1)
    broker.produce(first, 0, 2)
    broker.produce(taken_up, 0, 5)
    consumer = GroupConsumer(broker.bootstrap, group_id, first, offset_reset="earliest")
    try:
        wait_until(lambda: consumer.count(0) == 2, what="the group to read the first topic")
        wait_until(lambda: poll_cluster(cluster_id=cluster.id).ok and cluster.groups.filter(
            group_id=group_id, group_topics__topic__name=first).exists(), interval=0.5, what="a poll to see it")
    finally:
        consumer.close()
    consumer = GroupConsumer(broker.bootstrap, group_id, taken_up, offset_reset="earliest")
    try:
        wait_until(lambda: consumer.count(0) == 5 and group_committed(broker.admin, group_id, taken_up, [0])[0] == 5,
                   what="the group to read and commit the topic it took up")
        assert not cluster.groups.filter(group_id=group_id, group_topics__topic__name=taken_up).exists(), \
            "the precondition: no poll saw it reading the topic it took up"
        broker.raise_partitions(taken_up, 2)
        broker.produce(taken_up, 1, 3)
        tick = wait_until(lambda: taken_up in (t := watch_cluster_task(cluster.id)).get("changed", []) and t,
                          what="a tick to see the change")
    finally:
        consumer.close()
    assert taken_up in tick["changed"]
    finding = Finding.objects.get(topic__name=taken_up, group__group_id=group_id)
    assert finding.partition == 1 and finding.first_log_start == 0
