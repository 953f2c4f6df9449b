"""Listing groups while a broker's coordinator is still loading its part of
__consumer_offsets (CI saw COORDINATOR_LOAD_IN_PROGRESS right after a broker
started): the snapshot asks again, as Kafka's admin client does, and never
returns a list that lacks that broker's groups. A stand-in admin answers; the
real broker's side is covered by the integration tests' polls."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from groups.domain.cluster_config import ClusterConfig
from adapters.kafka.errors import KafkaUnavailable
from adapters.kafka.snapshot import SnapshotReads


class ListingAdmin:
    """Answers each list_consumer_groups with the next of ``answers``: a list of errors or of group ids."""

    def __init__(self, *answers) -> None:
        self.answers, self.calls = list(answers), 0

    def list_consumer_groups(self, request_timeout: float) -> Future:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        future: Future = Future()
        errors = [KafkaException(KafkaError(code, "loading")) for code in answer if isinstance(code, int)]
        valid = [SimpleNamespace(group_id=group_id) for group_id in answer if isinstance(group_id, str)]
        future.set_result(SimpleNamespace(errors=errors, valid=valid))
        return future

    def poll(self, timeout: float) -> int:
        return 0


def reads(admin: ListingAdmin, timeout: float = 2.0) -> SnapshotReads:
    client = SnapshotReads(ClusterConfig("127.0.0.1:9"), timeout=timeout)
    client._admin = admin
    return client


@pytest.mark.parametrize("code", [KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
                                  KafkaError.NOT_COORDINATOR])
def test_a_loading_coordinator_is_asked_again_until_it_answers(code):
    admin = ListingAdmin([code], [code, "b"], ["b", "a", ""])
    assert reads(admin)._list_group_ids() == ["a", "b"]
    assert admin.calls == 3


def test_a_coordinator_still_loading_at_the_timeout_fails_the_stage_in_words():
    admin = ListingAdmin([KafkaError.COORDINATOR_LOAD_IN_PROGRESS])
    with pytest.raises(KafkaUnavailable, match="list groups: COORDINATOR_LOAD_IN_PROGRESS"):
        reads(admin, timeout=0.6)._list_group_ids()
    assert admin.calls >= 2


def test_any_other_error_fails_at_once():
    admin = ListingAdmin([KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.GROUP_AUTHORIZATION_FAILED], ["a"])
    with pytest.raises(KafkaUnavailable, match="GROUP_AUTHORIZATION_FAILED"):
        reads(admin)._list_group_ids()
    assert admin.calls == 1
