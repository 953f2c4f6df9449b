"""Kafka's Java ``Admin`` client (``JavaAdmin``; the JVM side is
``adapters.kafka.java_client``), and what it reads that librdkafka cannot:
share groups (KIP-932) and streams groups (KIP-1071) as the cluster
describes them (librdkafka has no admin call for either).

What a start offset means: the share-partition start offset (SPSO), the
lowest offset the group may still deliver; every record below it has been
delivered and acknowledged, or skipped. A partition the group has not
initialised has none. A new partition initialised under the default
``share.auto.offset.reset=latest`` starts at the log end of that moment:
the records written before are never delivered (issue 25).

The poll (``adapters.kafka.snapshot``) reads them after the watermarks, like
consumer groups, and hands them to the core as groups of type ``share``
whose position is the start offset and whose policy is the group config
(``as_group_snapshot``); streams groups as groups whose members own the
partitions of their active tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError

from groups.domain.snapshot import GroupSnapshot, MemberSnapshot
from adapters.kafka.errors import GroupNotEmpty, KafkaUnavailable, missing_acl
from adapters.kafka.java_client import JAVA_ERRORS, cause_of, cause_class, GroupError, java_items, worded
from adapters.kafka.java_reads import JavaReads

AUTO_OFFSET_RESET = "share.auto.offset.reset"
# The broker's default when a group has no value of its own (KIP-932).
DEFAULT_AUTO_OFFSET_RESET = "latest"


@dataclass(frozen=True)
class ShareGroupDescription:
    group_id: str
    # The broker's words: "Stable", "Empty", "Dead", "Unknown".
    state: str
    group_epoch: int
    # The poll's member type (no target assignment: share groups report none).
    members: tuple[MemberSnapshot, ...]


@dataclass(frozen=True)
class SharePartitionStart:
    """One partition's share state: ``start_offset`` is the lowest offset the
    group may still deliver (every record below was delivered or skipped);
    ``lag`` the records from there to the log end, as the broker computed it
    (None when it did not)."""

    start_offset: int
    lag: int | None


@dataclass(frozen=True)
class AutoOffsetReset:
    """The group's ``share.auto.offset.reset``: ``latest``, ``earliest`` or
    ``by_duration:<ISO-8601 duration>`` (kept as the broker's text);
    ``explicit`` when it was set on the group, not the broker's default."""

    value: str
    explicit: bool


@dataclass(frozen=True)
class ShareGroupState:
    """Everything read about one share group in one ``read_all``."""

    description: ShareGroupDescription
    auto_offset_reset: AutoOffsetReset
    start_offsets: Mapping[tuple[str, int], SharePartitionStart]

    def as_group_snapshot(self) -> GroupSnapshot:
        """The group as the detection core reads every group: its start
        offsets are its positions, its ``share.auto.offset.reset`` its policy."""
        reset = self.auto_offset_reset
        policy = "by_duration" if reset.value.startswith("by_duration") else reset.value
        origin = "set on the group" if reset.explicit else "the broker's default"
        return GroupSnapshot(
            group_id=self.description.group_id, state=self.description.state, type="share", assignor="simple",
            members=self.description.members,
            committed={key: start.start_offset for key, start in self.start_offsets.items()},
            reset_policy=policy if policy in ("latest", "earliest", "by_duration") else "latest",
            reset_setting=f"{AUTO_OFFSET_RESET}={reset.value} ({origin})",
        )


class JavaAdmin(JavaReads):
    """Kafka's Java ``Admin`` client for one cluster, the one Java client a
    worker keeps per cluster: the share and streams groups (here), and the
    cluster-wide reads that are cheaper in the JVM (``JavaReads``: topic ids,
    partition counts, groups and commits, topic readers, features). Every
    request carries ``timeout`` (seconds) as its deadline. ``close``
    releases the Java client; the JVM stays for the process's next reader."""

    def list_group_ids(self) -> tuple[str, ...]:
        """Every share group the principal may Describe, sorted. The broker
        leaves out the groups it may not see: no ACL reads as no group."""
        return self._list_ids("share")

    def describe(self, group_ids: Sequence[str]) -> dict[str, ShareGroupDescription]:
        """Each group's state and members, with each member's assignment. A
        group deleted since it was listed is left out."""
        if not group_ids:
            return {}
        with self._calls("describe share groups"):
            options = self._jvm.org.apache.kafka.clients.admin.DescribeShareGroupsOptions().timeoutMs(self._timeout_ms)
            futures = self._client.describeShareGroups(list(group_ids), options).describedGroups()
            answers = self._per_group({group_id: futures.get(group_id) for group_id in group_ids})
        return {group_id: _description(group_id, description) for group_id, description in answers.items()}

    def start_offsets(self, group_ids: Sequence[str]) -> dict[str, dict[tuple[str, int], SharePartitionStart]]:
        """Each group's start offset and lag on every partition it has
        initialised: one request per group, all sent before any answer is
        awaited. One request for all groups (the Admin batches them per
        coordinator) took 2.4 s in about half the polls on Kafka 4.3.1 with 20
        or 50 groups, against 30-70 ms for 20 single-group requests at once
        (bench/RESULTS.md, issue 25)."""
        if not group_ids:
            return {}
        with self._calls("share group start offsets"):
            admin_package = self._jvm.org.apache.kafka.clients.admin
            options = admin_package.ListShareGroupOffsetsOptions().timeoutMs(self._timeout_ms)
            answers = self._per_group({
                group_id: self._client.listShareGroupOffsets(
                    {group_id: admin_package.ListShareGroupOffsetsSpec()}, options
                ).partitionsToOffsetInfo(group_id)
                for group_id in group_ids
            })
        return {group_id: _start_offsets(partitions) for group_id, partitions in answers.items()}

    def auto_offset_resets(self, group_ids: Sequence[str]) -> dict[str, AutoOffsetReset]:
        """Each group's ``share.auto.offset.reset`` (the GROUP config
        resource; a group without its own value has the broker's default)."""
        if not group_ids:
            return {}
        with self._calls("share group configs"):
            config_resource = self._jvm.org.apache.kafka.common.config.ConfigResource
            group_type = getattr(self._jvm, "org.apache.kafka.common.config.ConfigResource$Type").GROUP
            resources = {group_id: config_resource(group_type, group_id) for group_id in group_ids}
            options = self._jvm.org.apache.kafka.clients.admin.DescribeConfigsOptions().timeoutMs(self._timeout_ms)
            futures = self._client.describeConfigs(list(resources.values()), options).values()
            found = {}
            for group_id, resource in resources.items():
                try:
                    entry = self._get(futures.get(resource)).get(AUTO_OFFSET_RESET)
                except Py4JJavaError as error:
                    if cause_class(error) == JAVA_ERRORS + "GroupAuthorizationException":
                        # Reading a group's config takes DescribeConfigs, not the Describe worded names.
                        cause = cause_of(error)
                        raise self._unavailable("share group configs", (
                            f"GroupAuthorizationException: {cause.getMessage()} "
                            f"({missing_acl('DescribeConfigs', 'group', group_id)})"), refused=True) from None
                    raise GroupError(group_id, error) from None
                if entry is None or entry.value() is None:
                    found[group_id] = AutoOffsetReset(DEFAULT_AUTO_OFFSET_RESET, explicit=False)
                else:
                    explicit = str(entry.source().name()) == "DYNAMIC_GROUP_CONFIG"
                    found[group_id] = AutoOffsetReset(str(entry.value()), explicit=explicit)
            return found

    def set_auto_offset_reset(self, *, group_id: str, value: str | None) -> None:
        """Set the group's ``share.auto.offset.reset`` to ``value`` on the
        GROUP config resource (IncrementalAlterConfigs), or with None delete
        the group's own value, so the broker's default applies again. Takes
        AlterConfigs on the group; a refusal raises ``AccessRefused`` naming it."""
        stage = "alter share group config"
        with self._calls(stage):
            jvm = self._jvm
            config_type = getattr(jvm, "org.apache.kafka.common.config.ConfigResource$Type").GROUP
            resource = jvm.org.apache.kafka.common.config.ConfigResource(config_type, group_id)
            op_types = getattr(jvm, "org.apache.kafka.clients.admin.AlterConfigOp$OpType")
            entry = jvm.org.apache.kafka.clients.admin.ConfigEntry(AUTO_OFFSET_RESET, value)
            operation = jvm.org.apache.kafka.clients.admin.AlterConfigOp(
                entry, op_types.SET if value is not None else op_types.DELETE)
            options = jvm.org.apache.kafka.clients.admin.AlterConfigsOptions().timeoutMs(self._timeout_ms)
            try:
                self._get(self._client.incrementalAlterConfigs({resource: [operation]}, options).all())
            except Py4JJavaError as error:
                if cause_class(error) == JAVA_ERRORS + "GroupAuthorizationException":
                    cause = cause_of(error)
                    raise self._unavailable(stage, (
                        f"GroupAuthorizationException: {cause.getMessage()} "
                        f"({missing_acl('AlterConfigs', 'group', group_id)})"), refused=True) from None
                raise GroupError(group_id, error) from None

    def read_all(self) -> tuple[ShareGroupState, ...]:
        """Every share group with its description, start offsets and reset
        policy: four requests whatever the number of groups (list, describe,
        offsets, configs; the last three batched over all groups)."""
        return self.read(self.list_group_ids())

    def read(self, group_ids: Sequence[str]) -> tuple[ShareGroupState, ...]:
        """``read_all`` of the named groups (the watcher's readers): three
        requests; a group deleted meanwhile is left out."""
        described = self.describe(group_ids)
        present = [group_id for group_id in group_ids if group_id in described]
        offsets = self.start_offsets(present)
        resets = self.auto_offset_resets(present)
        return tuple(
            ShareGroupState(description=described[group_id], auto_offset_reset=resets[group_id],
                            start_offsets=offsets.get(group_id, {}))
            for group_id in present
        )

    # -- streams groups (KIP-1071): the same client, the same discipline -------

    def list_streams_group_ids(self) -> tuple[str, ...]:
        """Every streams group the principal may Describe, sorted."""
        return self._list_ids("streams")

    def streams_group_states(self, group_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """Each streams group's state and member count (a reset waits for
        none); a group the broker does not know is left out."""
        return {group_id: (str(description.groupState().toString()), len(java_items(description.members())))
                for group_id, description in self._describe_streams(group_ids).items()}

    def _describe_streams(self, group_ids: Sequence[str]) -> dict:
        """The Java descriptions of the streams groups that exist among ``group_ids``."""
        if not group_ids:
            return {}
        with self._calls("describe streams groups"):
            options = self._jvm.org.apache.kafka.clients.admin.DescribeStreamsGroupsOptions().timeoutMs(
                self._timeout_ms)
            futures = self._client.describeStreamsGroups(list(group_ids), options).describedGroups()
            return self._per_group({group_id: futures.get(group_id) for group_id in group_ids})

    def read_streams(self, group_ids: Sequence[str]) -> tuple[GroupSnapshot, ...]:
        """Each streams group as the core reads every group: its members own
        the source-topic partitions of their active tasks (a task is a
        subtopology's partition p, on every topic that subtopology reads),
        its committed offsets are its positions. Two requests; a group
        deleted meanwhile is left out."""
        if not group_ids:
            return ()
        admin_package = self._jvm.org.apache.kafka.clients.admin
        described = self._describe_streams(group_ids)
        if not described:
            return ()
        with self._calls("streams group offsets"):
            specs = {group_id: admin_package.ListStreamsGroupOffsetsSpec() for group_id in described}
            options = admin_package.ListStreamsGroupOffsetsOptions().timeoutMs(self._timeout_ms)
            result = self._client.listStreamsGroupOffsets(specs, options)
            answers = self._per_group({group_id: result.partitionsToOffsetAndMetadata(group_id)
                                       for group_id in described})
        return tuple(_streams_group(group_id, described[group_id], _committed(offsets))
                     for group_id, offsets in answers.items())

    # -- the resets' face: one group's start offsets, read and set ----------------

    def start_offsets_of(self, *, group_id: str,
                         partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        """The group's start offset (the lowest offset it may still deliver,
        its "next message to read") on each of ``partitions``; None where it
        has not initialised the partition, or the group does not exist."""
        if not partitions:
            return {}
        with self._calls("share group start offsets"):
            admin_package = self._jvm.org.apache.kafka.clients.admin
            wanted = [self._jvm.org.apache.kafka.common.TopicPartition(topic, partition)
                      for topic, partition in partitions]
            spec = admin_package.ListShareGroupOffsetsSpec().topicPartitions(wanted)
            options = admin_package.ListShareGroupOffsetsOptions().timeoutMs(self._timeout_ms)
            result = self._client.listShareGroupOffsets({group_id: spec}, options)
            answer = self._per_group({group_id: result.partitionsToOffsetInfo(group_id)}).get(group_id)
        found = _start_offsets(answer) if answer is not None else {}
        return {key: found[key].start_offset if key in found else None for key in partitions}

    def alter_start_offsets(self, *, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Set the group's start offset (next message to deliver) on each
        partition of ``offsets``, as an administrator (``Admin.alterShareGroupOffsets``;
        a partition the group had not initialised starts there). The broker
        accepts it only while the group has no members; otherwise
        ``GroupNotEmpty`` is raised and nothing changed. A refusal by the
        authorizer raises ``AccessRefused`` naming the ACL (Read on the group
        and on each topic); any other error ``KafkaUnavailable``: then the
        change may or may not have been applied, so callers read the offsets
        back before trusting either outcome."""
        if not offsets:
            raise ValueError("no offsets to set")
        negative = sorted(key for key, offset in offsets.items() if offset < 0)
        if negative:
            raise ValueError(f"offsets must not be negative: {negative}")
        stage = "alter share group start offsets"
        with self._calls(stage):
            options = self._jvm.org.apache.kafka.clients.admin.AlterShareGroupOffsetsOptions().timeoutMs(
                self._timeout_ms)
            try:
                self._get(self._client.alterShareGroupOffsets(group_id, self._java_offsets(offsets), options).all())
            except Py4JJavaError as error:
                raise self._alter_error(stage, group_id, error) from None

    def _java_offsets(self, offsets: Mapping[tuple[str, int], int]):
        """``offsets`` as a Java ``Map<TopicPartition, Long>``. py4j hands a
        Python int to Java as an Integer and turns every Long it returns back
        into an int, so the Longs are boxed from a ``long[]`` and put into the
        map on the Java side (``Map.put`` by reflection, its arguments copied
        in with ``System.arraycopy``)."""
        jvm, gateway = self._jvm, self._gateway
        items = sorted(offsets.items())
        primitive = gateway.new_array(jvm.long, len(items))
        for index, (_, offset) in enumerate(items):
            primitive[index] = offset
        boxed = jvm.java.util.Arrays.stream(primitive).boxed().toArray()
        any_object = jvm.java.lang.Class.forName("java.lang.Object")
        signature = gateway.new_array(jvm.java.lang.Class, 2)
        signature[0] = signature[1] = any_object
        put = jvm.java.lang.Class.forName("java.util.Map").getMethod("put", signature)
        java_map = jvm.java.util.HashMap()
        for index, ((topic, partition), _) in enumerate(items):
            arguments = gateway.new_array(jvm.java.lang.Object, 2)
            arguments[0] = jvm.org.apache.kafka.common.TopicPartition(topic, partition)
            jvm.java.lang.System.arraycopy(boxed, index, arguments, 1, 1)
            put.invoke(java_map, arguments)
        return java_map

    def _alter_error(self, stage: str, group_id: str, error: Py4JJavaError) -> KafkaUnavailable:
        """What a refused ``alterShareGroupOffsets`` means: the group has
        members (``GroupNotEmpty``), an ACL it needs is missing (Read, not the
        Describe ``worded`` names for reads), or anything else, worded."""
        cause = cause_of(error)
        name = str(cause.getClass().getName())
        text = f"{name.rsplit('.', 1)[-1]}: {cause.getMessage()}"
        if name == JAVA_ERRORS + "GroupNotEmptyException":
            unavailable = self._unavailable(stage, f"group {group_id!r} has members ({text})")
            return GroupNotEmpty(str(unavailable), bootstrap_servers=unavailable.bootstrap_servers,
                                 stage=unavailable.stage)
        if name == JAVA_ERRORS + "GroupAuthorizationException":
            return self._unavailable(stage, f"{text} ({missing_acl('Read', 'group', group_id)})", refused=True)
        if name == JAVA_ERRORS + "TopicAuthorizationException":
            topics = ", ".join(sorted(str(topic) for topic in java_items(cause.unauthorizedTopics())))
            return self._unavailable(stage, f"{text} ({missing_acl('Read', 'topic', topics)})", refused=True)
        detail, refused = worded(error, group_id=group_id, timeout_ms=self._timeout_ms)
        return self._unavailable(stage, detail, refused=refused)

def _description(group_id: str, description) -> ShareGroupDescription:
    members = []
    for member in java_items(description.members()):
        assignment = member.assignment()
        partitions = java_items(assignment.topicPartitions()) if assignment is not None else []
        members.append(MemberSnapshot(
            member_id=str(member.consumerId()), client_id=str(member.clientId() or ""), host=str(member.host() or ""),
            assignment=frozenset((str(tp.topic()), int(tp.partition())) for tp in partitions),
        ))
    return ShareGroupDescription(
        group_id=group_id, state=str(description.groupState().toString()), group_epoch=int(description.groupEpoch()),
        members=tuple(sorted(members, key=lambda member: member.member_id)),
    )


def _committed(offsets) -> dict[tuple[str, int], int]:
    """Committed offsets from a Java map of TopicPartition to OffsetAndMetadata; no commit is left out."""
    found = {}
    for entry in java_items(offsets.entrySet()):
        value = entry.getValue()
        if value is not None and int(value.offset()) >= 0:
            partition = entry.getKey()
            found[(str(partition.topic()), int(partition.partition()))] = int(value.offset())
    return found


def _task_partitions(assignment, sources: Mapping[str, Sequence[str]]) -> frozenset[tuple[str, int]]:
    """The topic partitions of an assignment's active tasks."""
    if assignment is None:
        return frozenset()
    return frozenset(
        (topic, int(partition))
        for task in java_items(assignment.activeTasks())
        for topic in sources.get(str(task.subtopologyId()), ())
        for partition in java_items(task.partitions())
    )


def _streams_group(group_id: str, description, committed: dict[tuple[str, int], int]) -> GroupSnapshot:
    sources = {
        str(subtopology.subtopologyId()): [str(topic) for topic in java_items(subtopology.sourceTopics())]
        + [str(topic) for topic in java_items(subtopology.repartitionSourceTopics().keySet())]
        for subtopology in java_items(description.subtopologies())
    }
    members = tuple(sorted((
        MemberSnapshot(
            member_id=str(member.memberId()), client_id=str(member.clientId() or ""),
            host=str(member.clientHost() or ""),
            assignment=_task_partitions(member.assignment(), sources),
            target_assignment=_task_partitions(member.targetAssignment(), sources),
        )
        for member in java_items(description.members())
    ), key=lambda member: member.member_id))
    return GroupSnapshot(group_id=group_id, state=str(description.groupState().toString()), type="streams",
                         assignor="streams", members=members, committed=committed)


def _start_offsets(partitions) -> dict[tuple[str, int], SharePartitionStart]:
    found = {}
    for entry in java_items(partitions.entrySet()):
        info = entry.getValue()
        if info is None:
            continue  # a partition the group has not initialised
        partition = entry.getKey()
        lag = info.lag()
        found[(str(partition.topic()), int(partition.partition()))] = SharePartitionStart(
            start_offset=int(info.startOffset()), lag=int(lag.get()) if lag.isPresent() else None)
    return found
