"""Share groups read through Kafka's Java ``Admin`` (``adapters.kafka.java_admin``)
on the real broker, against clients and tools we did not write: Kafka's
``ConsoleShareConsumer`` in the group, ``kafka-share-groups --describe``
(``ShareGroupCommand``) and ``kafka-configs`` (``ConfigCommand``) beside it.

One JVM gateway for the whole session (the module's per-process JVM)."""

from __future__ import annotations

import pytest

from groups.domain.cluster_config import ClusterConfig
from adapters.kafka.errors import KafkaUnavailable
from adapters.kafka.java_admin import AutoOffsetReset, JavaAdmin
from tests.harness.kafka_clients import JavaConsoleShareConsumer, kafka_tool, share_groups_describe, wait_until

# The share consumer's metadata refresh: the time it takes to fetch from a new partition.
REFRESH_MS = 5000


def set_group_config(bootstrap: str, group_id: str, setting: str) -> None:
    """``kafka-configs --alter --entity-type groups --add-config``."""
    kafka_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, "--alter",
               "--entity-type", "groups", "--entity-name", group_id, "--add-config", setting)


def test_it_reads_the_start_offset_a_new_partition_lost(share_broker, share_bootstrap, share_reader, share_consumers,
                                                        unique):
    topic, group_id = f"share-{unique}", f"share-group-{unique}"
    share_broker.create_topic(topic, 1)
    consumer = JavaConsoleShareConsumer(share_bootstrap, group_id, topic, refresh_ms=REFRESH_MS)
    share_consumers.append(consumer)

    # The group exists and its member owns partition 0. Records written before the member's first fetch lie
    # before the start that fetch chooses (latest: CI saw 5 records written right after the assignment never
    # delivered), so a record a tick is written until one is delivered.
    def owns(partition: int) -> bool:
        members = share_reader.describe([group_id])[group_id].members if group_id in share_reader.list_group_ids() \
            else ()
        return any((topic, partition) in member.assignment for member in members)

    def initialised(partition: int):
        return share_reader.start_offsets([group_id]).get(group_id, {}).get((topic, partition))

    wait_until(lambda: owns(0), what="the share consumer to own partition 0")
    ticks = []
    wait_until(lambda: ticks.append(share_broker.produce(topic, 0, 1, prefix="tick")) or consumer.count(0) > 0,
               interval=0.5, what="the share consumer to read partition 0")
    assert wait_until(lambda: initialised(0), what="the start of partition 0").start_offset <= len(ticks)

    # A partition added while it consumes, written to at once: the group starts it later, at the log end
    # of that moment. The broker shows a partition's start only once the group has fetched from it, so
    # a record a tick is written until it does.
    share_broker.raise_partitions(topic, 2)
    share_broker.produce(topic, 1, 40)
    start = wait_until(lambda: share_broker.produce(topic, 1, 1, prefix="tick") or initialised(1),
                       timeout=4 * REFRESH_MS / 1000, what="the share group to initialise partition 1")
    assert start.start_offset >= 40, f"records 0..{start.start_offset - 1} of partition 1 were never delivered"

    # The truth, the first offset the consumer printed on partition 1, lies in the bounds: the first start
    # offset seen bounds it from above (a start offset only moves forward, as records are acknowledged:
    # CI once saw the consumer start at 77 and the first read show 78), and the 40 records written
    # before it took the partition bound it from below.
    share_broker.produce(topic, 1, 3, prefix="after")
    wait_until(lambda: consumer.count(1) >= 3, what="the share consumer to read partition 1")
    assert 40 <= min(consumer.offsets(1)) <= start.start_offset

    # Kafka's own tool shows the start offset we read (asked between two of our reads that agree: the
    # start offset moves as records are acknowledged), with LAG 0: nothing says records were lost.
    def same_as_kafkas_tool():
        before = initialised(1)
        theirs = share_groups_describe(share_bootstrap, group_id)[(topic, 1)]
        after = initialised(1)
        return before == after and theirs == (after.start_offset, after.lag) and theirs

    assert wait_until(same_as_kafkas_tool, what="kafka-share-groups to show the start offset we read")[1] == 0

    states = {state.description.group_id: state for state in share_reader.read_all()}
    state = states[group_id]
    assert state.description.state == "Stable"
    assert [member.assignment for member in state.description.members] == [frozenset({(topic, 0), (topic, 1)})]
    assert state.auto_offset_reset == AutoOffsetReset("latest", explicit=False)
    assert state.start_offsets[(topic, 1)].start_offset >= start.start_offset


def test_it_reads_an_earliest_group_config_and_the_group_starts_there(share_broker, share_bootstrap, share_reader,
                                                                      share_consumers, unique):
    topic, group_id = f"share-early-{unique}", f"share-early-{unique}"
    share_broker.create_topic(topic, 1)
    share_broker.produce(topic, 0, 10)
    set_group_config(share_bootstrap, group_id, "share.auto.offset.reset=earliest")
    set_group_config(share_bootstrap, f"{group_id}-duration", "share.auto.offset.reset=by_duration:PT1H")

    consumer = JavaConsoleShareConsumer(share_bootstrap, group_id, topic, refresh_ms=REFRESH_MS)
    share_consumers.append(consumer)
    wait_until(lambda: consumer.count(0) == 10, what="the earliest share group to read the records written before")

    state = next(state for state in share_reader.read_all() if state.description.group_id == group_id)
    assert state.auto_offset_reset == AutoOffsetReset("earliest", explicit=True)
    assert share_reader.auto_offset_resets([f"{group_id}-duration"]) == {
        f"{group_id}-duration": AutoOffsetReset("by_duration:PT1H", explicit=True)}


@pytest.mark.parametrize("address, words", [
    ("127.0.0.1:1", "no answer within 3s"),
    ("no-such-host.invalid:9092", "no address in bootstrap.servers resolves"),
])
def test_it_words_an_unknown_cluster_address_within_the_timeout(share_reader, address, words):
    # The words name the 3 s it waited; how long giving up takes: bench/timeouts_bench.py.
    with JavaAdmin(ClusterConfig(address), timeout=3) as reader:
        with pytest.raises(KafkaUnavailable, match=words) as raised:
            reader.list_group_ids()
    assert str(raised.value).startswith(f"Kafka at {address}: list share groups: ")
