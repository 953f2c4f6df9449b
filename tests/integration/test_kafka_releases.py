"""The release matrix: Gapwatch's core against every Kafka release the README's
"Supported Kafka" table names, each a single-node KRaft broker from its Maven
jars (third_party/maven/kafka-release/releases, fetched by scripts/setup.sh),
plus the local broker (4.4.0): a `latest` group's loss on a new partition
found by the watcher's pickup with a bracket that holds the truth, the
reset that repairs it, a backfill of a missed range, and the group kinds the
release lacks read as absent and said on the clusters page.

One broker at a time: the fixture is module-scoped and parametrised, so
pytest runs every test of one release before it starts the next."""

from __future__ import annotations

from pathlib import Path

import pytest

from groups.models import Cluster, RemediationJob
from groups.services.remediation import job_request
from tasks.celery_tasks import watch_cluster_task
from tests.harness.processes import KafkaCluster
from tests.harness.backfills import Scenario, parquet_rows, run_job
from tests.harness.kafka_clients import Broker, GroupConsumer, wait_until
from tests.harness.scenarios import committed, findings, poll, start_consuming_group

ROOT = Path(__file__).resolve().parents[2]
MAIN = "main"  # the local broker of `make test` (third_party/maven/pom.xml's kafka.version)
RELEASES = [*(ROOT / "third_party/maven/kafka-release/releases").read_text().split(), MAIN]
# What each release lacks, as the clusters page must say it.
ABSENT = {
    "3.7.2": ("3.7", ("KIP-848 consumer groups", "share groups", "streams groups")),
    "3.9.1": ("3.9", ("KIP-848 consumer groups", "share groups", "streams groups")),
    "4.0.2": ("4.0", ("share groups", "streams groups")),
    "4.3.1": ("4.3", ()),
    MAIN: ("4.4", ()),
}
K = 25  # records written to the new partition before the group can pick it up
# The group's metadata refresh: when it notices the new partition. Its timer runs from the consumer's
# start, so it may fire right after the raise: the first observation is a watcher tick (a targeted
# snapshot of the topic, not a full poll of the shared broker), and the refresh long enough for it
# to see the partition unowned first (at 3 s the 3.7.2 group once took it before any observation;
# at 8 s a full poll of the busy main broker in a clean-clone run came too late once).
REFRESH_MS = 15000
# The refresh may still come first (a host at half its speed lost it in a clean-clone run): that run
# of the race is left, and the scenario starts again on a new topic and group, at most this often.
RACES = 3


def test_every_release_of_the_matrix_has_its_expectations():
    assert sorted(ABSENT) == sorted(RELEASES)


@pytest.fixture(scope="module", params=RELEASES)
def release(request) -> str:
    return request.param


# Releases whose broker the session keeps anyway (tests/conftest.py): reused, not started again.
SESSION_BROKERS = {"4.3.1": "kafka_4_3"}


@pytest.fixture(scope="module")
def release_bootstrap(release, request, kafka_bootstrap, tmp_path_factory):
    """The bootstrap of one release's broker: the local broker for MAIN, the
    session's for SESSION_BROKERS, else a broker of the module's own, stopped
    before the next release starts."""
    if release == MAIN:
        yield kafka_bootstrap
        return
    if release in SESSION_BROKERS:
        yield request.getfixturevalue(SESSION_BROKERS[release]).bootstrap
        return
    cluster = KafkaCluster(tmp_path_factory.mktemp(f"kafka-{release}"), release=release, heap="384m").start()
    try:
        yield cluster.bootstrap
    finally:
        cluster.close()


@pytest.fixture
def release_broker(release_bootstrap):
    broker = Broker(release_bootstrap)
    yield broker
    broker.close()


def raised_before_the_pickup(broker: Broker, cluster: Cluster, unique: str) -> tuple[str, str, GroupConsumer]:
    """A latest group reading a topic of 2 partitions that is raised to 3, K
    records written to partition 2, and a watcher tick that saw partition 2
    with them and no owner (its finding's H_k): the topic, the group, and its
    consumer. A run whose group took partition 2 before that tick is left
    and started again with a new topic and group (RACES)."""
    for race in range(RACES):
        topic, group_id = f"rel-{unique}-{race}", f"rel-latest-{unique}-{race}"
        broker.create_topic(topic, 2)
        consumer = start_consuming_group(broker, cluster, topic, group_id, offset_reset="latest",
                                         refresh_ms=REFRESH_MS)
        broker.raise_partitions(topic, 3)
        broker.produce(topic, 2, K)
        watch_cluster_task(cluster.id)  # the partition with K records and no owner: the lower bound
        first = findings(topic, group_id).get(2)
        if first is not None and first.pre_pickup_high_watermark is not None:
            return topic, group_id, consumer
        consumer.close()
    raise AssertionError(f"the group's own refresh took partition 2 before the watcher's first look {RACES} times")


@pytest.mark.django_db(transaction=True)
def test_the_watcher_brackets_a_latest_groups_loss_and_a_reset_repairs_it(release_broker, unique, approver):
    broker = release_broker
    cluster = Cluster.objects.create(name=f"rel-{unique}", bootstrap_servers=broker.bootstrap)
    topic, group_id, consumer = raised_before_the_pickup(broker, cluster, unique)
    try:
        # The watcher observes while the group picks partition 2 up on its own refresh;
        # a record a tick until the group has read from it and committed.
        def decided():
            watch_cluster_task(cluster.id)
            broker.produce(topic, 2, 1, prefix="tick")
            finding = findings(topic, group_id).get(2)
            return finding is not None and finding.state not in ("pending", "undecided") and consumer.count(2) \
                and finding

        finding = wait_until(decided, timeout=60, interval=0, what="the watcher to decide the finding")
    finally:
        consumer.close()

    assert finding.state == "gap", finding.explanation
    truth = min(consumer.offsets(2))  # the first offset the group read: everything below it was missed
    lower, upper = finding.pre_pickup_high_watermark, finding.first_commit
    assert lower is not None and upper is not None, finding.explanation
    assert K <= lower <= truth <= upper, (lower, truth, upper)
    # Latest is only assumed (nothing declared): nothing definite, the figures under latest beside it.
    assert (finding.missed_definite, finding.missed_definite_if_latest, finding.backfill_start,
            finding.backfill_end) == (0, lower, 0, upper)

    # The group is stopped: a reset to earliest commits partition 2 at 0, read back.
    wait_until(lambda: poll(cluster) and findings(topic, group_id)[2].group.state == "Empty",
               what="a poll to see the group Empty")
    job = job_request(user=approver, finding_ids=[finding.id], kind="reset", params={"target": "earliest"})
    job = run_job(job.id)
    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    assert job.result["verified"] is True
    assert committed(broker, group_id, topic)[2] == 0

    # The group's consumer now reads from 0 what it had missed.
    again = GroupConsumer(broker.bootstrap, group_id, topic, offset_reset="latest")
    try:
        wait_until(lambda: again.count(2) >= truth, what="the group to read what it missed")
        assert again.offsets(2)[:truth] == list(range(truth))
    finally:
        again.close()


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_backfill_delivers_exactly_the_missed_range(release_broker, unique, approver, backfill_on_server):
    scenario = Scenario(release_broker, f"rel-bf-{unique}", f"rel-bf-{unique}", 10)
    job = run_job(scenario.request_job(approver, "parquet").id)

    assert job.status == RemediationJob.Status.SUCCEEDED, (job.status_reason, job.error)
    rows = parquet_rows(str(Path(backfill_on_server.BACKFILL_OUTPUT) / str(job.id)))
    assert rows == scenario.expected_rows()


@pytest.mark.django_db(transaction=True)
def test_the_clusters_page_names_the_release_and_what_it_lacks(release_broker, release, unique, client, viewer):
    cluster = Cluster.objects.create(name=f"rel-page-{unique}", bootstrap_servers=release_broker.bootstrap)
    poll(cluster)
    cluster.refresh_from_db()
    version, lacks = ABSENT[release]
    assert cluster.kafka_features["metadata_version"].startswith(f"{version}-"), cluster.kafka_features
    assert cluster.features_absent == [f"no {what}: this cluster runs Kafka {version}" for what in lacks]

    client.force_login(viewer)
    page = client.get("/clusters/").content.decode()
    row = page[page.index(f'id="cluster-{cluster.id}"'):]
    row = row[:row.index("</tr>")]
    assert f"Kafka {cluster.kafka_features['metadata_version']}" in row
    for what in lacks:
        assert f"no {what}: this cluster runs Kafka {version}" in row, row
    assert row.count("feature-absent") == len(lacks)
