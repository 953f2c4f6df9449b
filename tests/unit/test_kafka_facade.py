"""The facade's promises that need no broker (the contract suite against the
real broker is tests/integration/test_kafka_adapter.py)."""

import pytest

from adapters import kafka
from adapters.kafka import client


def test_creating_an_adapter_opens_no_connection(monkeypatch):
    def no_admin_client(config):
        raise AssertionError("an admin client was created")

    monkeypatch.setattr(client, "AdminClient", no_admin_client)
    adapter = kafka.KafkaAdapter(kafka.ClusterConfig(bootstrap_servers="127.0.0.1:1"), timeout=1.0)
    assert adapter.last_timings == {} and adapter.last_peak_in_flight == {}
    with pytest.raises(AssertionError, match="admin client was created"):
        adapter.ping()  # the first request is what connects


def test_it_refuses_a_bound_below_one_call_in_flight():
    with pytest.raises(ValueError, match="max_in_flight"):
        kafka.KafkaAdapter(kafka.ClusterConfig(bootstrap_servers="127.0.0.1:1"), max_in_flight=0)


def test_every_face_is_on_the_one_adapter():
    faces = ("snapshot", "ping", "describe_group", "committed_offsets", "alter_group_offsets", "describe_topic",
             "create_topic", "partition_offsets", "offsets_for_times", "topic_compacted", "visible_runs")
    assert all(callable(getattr(kafka.KafkaAdapter, face)) for face in faces)
    assert issubclass(kafka.GroupNotEmpty, kafka.KafkaUnavailable)
