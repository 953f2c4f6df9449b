"""The resets' face of the adapter: one group's state, its committed
offsets, and an administrative commit of new ones.

Offsets are "the next message to read".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, TopicPartition

from adapters.kafka.client import WAIT_GRACE_SECONDS, KafkaClient, group_from
from adapters.kafka.errors import GROUP_ACTIVE, GroupNotEmpty, KafkaUnavailable, describe_error, error_code


@dataclass(frozen=True)
class GroupStatus:
    """One group as the broker describes it now. A group the broker does not
    know is reported as "Dead" with no members, as the broker itself does."""

    group_id: str
    state: str
    type: str
    member_count: int
    # A classic group's agreed assignor (its protocol name); "" otherwise.
    assignor: str = ""

    @property
    def inactive(self) -> bool:
        """Whether an administrative offset commit can be accepted (Kafka's
        own reset tool asks for the same: Empty or Dead, no members)."""
        return self.member_count == 0 and self.state in ("Empty", "Dead")


class GroupOperations(KafkaClient):
    def describe_group(self, *, group_id: str) -> GroupStatus:
        """State and member count of one group, now."""
        try:
            futures = self.admin.describe_consumer_groups([group_id], request_timeout=self._timeout)
            description = futures[group_id].result(timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            if error_code(error) == KafkaError.GROUP_ID_NOT_FOUND:
                return GroupStatus(group_id=group_id, state="Dead", type="", member_count=0)
            raise self._unavailable("group", f"describe group {group_id!r}: {describe_error(error, group=group_id)}",
                                    cause=error) from None
        state = getattr(description, "state", ConsumerGroupState.UNKNOWN)
        described = group_from(group_id, state, description)
        return GroupStatus(group_id=group_id, state=described.state, type=described.type,
                           member_count=len(described.members), assignor=described.assignor)

    def committed_offsets(
        self, *, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], int | None]:
        """The group's committed offset (next message to read) on each of
        ``partitions``; None where it has no commit. Errors at the group or
        at any partition raise ``KafkaUnavailable``."""
        if not partitions:
            return {}
        request = ConsumerGroupTopicPartitions(
            group_id, [TopicPartition(topic, partition) for topic, partition in partitions]
        )
        try:
            future = self.admin.list_consumer_group_offsets([request], request_timeout=self._timeout)[group_id]
            answer = future.result(timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            if error_code(error) == KafkaError.GROUP_ID_NOT_FOUND:
                return {key: None for key in partitions}
            raise self._unavailable(
                "offsets", f"committed offsets of group {group_id!r}: {describe_error(error, group=group_id)}",
                cause=error) from None
        found = self._committed_from(group_id, answer)
        missing = [key for key in partitions if key not in found]
        if missing:
            raise self._unavailable("offsets", f"committed offsets of group {group_id!r}: no answer for {missing}")
        return {key: found[key] for key in partitions}

    def alter_group_offsets(self, *, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit ``offsets`` (next message to read) for one group, as an
        administrator. The broker accepts this only while the group has no
        members; otherwise ``GroupNotEmpty`` is raised and nothing changed.
        A refusal by the authorizer raises ``AccessRefused`` naming the ACL
        (Read on the group, then Read on each topic). Any other group- or
        partition-level error raises ``KafkaUnavailable``: then the commit may
        or may not have been applied, so callers read the offsets back before
        trusting either outcome."""
        if not offsets:
            raise ValueError("no offsets to commit")
        negative = sorted(key for key, offset in offsets.items() if offset < 0)
        if negative:
            raise ValueError(f"offsets must not be negative: {negative}")
        request = ConsumerGroupTopicPartitions(
            group_id,
            [TopicPartition(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())],
        )
        try:
            future = self.admin.alter_consumer_group_offsets([request], request_timeout=self._timeout)[group_id]
            answer = future.result(timeout=self._timeout + WAIT_GRACE_SECONDS)
        except Exception as error:  # noqa: BLE001 - KafkaException or a timeout
            raise self._commit_error(group_id, describe_error(error, operation="Read", group=group_id),
                                     error) from None
        refused = [partition for partition in answer.topic_partitions or [] if partition.error is not None]
        if refused:
            first = refused[0]
            raise self._commit_error(
                group_id,
                f"{first.topic!r} [{first.partition}]: "
                f"{describe_error(first.error, operation='Read', group=group_id, topic=first.topic)}"
                + (f" (and {len(refused) - 1} more partition(s))" if len(refused) > 1 else ""),
                first.error,
            )

    def _commit_error(self, group_id: str, detail: str, cause: BaseException | KafkaError) -> KafkaUnavailable:
        error = self._unavailable("commit", f"commit offsets of group {group_id!r}: {detail}", cause=cause)
        if error_code(cause) in GROUP_ACTIVE:
            return GroupNotEmpty(str(error), bootstrap_servers=error.bootstrap_servers, stage="commit")
        return error
