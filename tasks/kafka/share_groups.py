"""Share groups (KIP-932) as the cluster describes them, read with Kafka's
own Java ``Admin`` client in this process's JVM (``tasks.kafka.jvm``).

Why the Java client: confluent-kafka (librdkafka) has a ``ShareConsumer``
but no share-group admin call. Kafka's ``Admin`` has them all
(``listGroups`` by type, ``describeShareGroups``, ``listShareGroupOffsets``
with each partition's start offset and lag, ``describeConfigs`` on the
GROUP resource), is maintained with the broker and follows each new
protocol version, and does TLS with PEM stores, SASL PLAIN/SCRAM and OIDC
OAUTHBEARER the way the Spark job's client already does (the same option
mapping, ``tasks.spark.reader.kafka_options``). A protocol library such as
kio would mean owning the request plumbing (coordinator lookup, retries,
SASL and OAuth login) that the Java client already gets right; py4j comes
with PySpark, so nothing is added to the install.

What a start offset means: the share-partition start offset (SPSO), the
lowest offset the group may still deliver; every record below it has been
delivered and acknowledged, or skipped. A partition the group has not
initialised has none. A new partition initialised under the default
``share.auto.offset.reset=latest`` starts at the log end of that moment:
the records written before are never delivered (issue 25).

The poll (``tasks.kafka.snapshot``) reads them after the watermarks, like
consumer groups, and hands them to the core as groups of type ``share``
whose position is the start offset and whose policy is the group config
(``as_group_snapshot``).

Creating a reader opens no connection and starts no JVM; the first call
does. Every error is a ``KafkaUnavailable`` (``AccessRefused`` for a refused
ACL or login), its message worded and free of secrets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from py4j.java_gateway import JavaClass
from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError

from groups.domain.cluster_config import ClusterConfig
from groups.domain.secrets import secret_redact
from groups.domain.snapshot import GroupSnapshot, MemberSnapshot
from groups.domain.tls import key_as_pkcs8
from tasks.kafka.client import DescribedGroup
from tasks.kafka.errors import AccessRefused, GroupNotEmpty, KafkaUnavailable, missing_acl
from tasks.kafka.jvm import JvmUnavailable, gateway_discard, java_gateway
from tasks.spark.reader import kafka_options
from tasks.spark.spec import KafkaSecrets, KafkaSettings

AUTO_OFFSET_RESET = "share.auto.offset.reset"
# The broker's default when a group has no value of its own (KIP-932).
DEFAULT_AUTO_OFFSET_RESET = "latest"
# Only guards against a future the client never completes: every call carries
# the timeout itself.
WAIT_GRACE_SECONDS = 5.0
CLIENT_ID = "gapwatch-share-groups"
ALLOWED_URLS_PROPERTY = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
# The stage of the error raised when no JVM can start here (callers that can do without it check for it).
JVM_START_STAGE = "share groups: start"
# One TopicListing as Java prints it (Kafka 4.x), inside the list's "[...]".
# Topic names are [A-Za-z0-9._-] and ids URL-safe base64, so the text parses
# unambiguously; every listing must parse, or none is believed.
_TOPIC_LISTING = re.compile(r"\(name=([A-Za-z0-9._-]+), topicId=([A-Za-z0-9_-]+), internal=(true|false)\)")

_ERRORS = "org.apache.kafka.common.errors."
# Refusals asking again cannot change until an operator does.
_LOGIN_REFUSED = {
    _ERRORS + "SaslAuthenticationException":
        "the cluster refused Gapwatch's SASL login (user name, password, mechanism, or a disabled OAuth client)",
    _ERRORS + "SslAuthenticationException":
        "the TLS handshake failed (the broker's certificate is not trusted by the CA given, names another host, "
        "or the broker refused Gapwatch's client certificate)",
    _ERRORS + "AuthenticationException": "authentication failed",
}


class GroupKindUnsupported(KafkaUnavailable):
    """The cluster does not serve the kind of group asked for (share or
    streams groups: before Kafka 4.1, or with ``share.version`` or
    ``streams.version`` 0): it has none to read."""


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


def java_client_properties(config: ClusterConfig) -> dict[str, str]:
    """The Java client's settings of a cluster: the options the Spark job's
    Kafka source gets (PEM trust and key stores, JAAS from the secrets, the
    OAuth login handler), without its ``kafka.`` prefix. The key is given as
    unencrypted PKCS#8, the form the Java client reads."""
    settings = KafkaSettings(
        bootstrap_servers=config.bootstrap_servers, security_protocol=config.security_protocol,
        sasl_mechanism=config.sasl_mechanism, sasl_username=config.sasl_username, ssl_ca_pem=config.ssl_ca_pem,
        ssl_certificate_pem=config.ssl_certificate_pem, ssl_endpoint_identification=config.ssl_endpoint_identification,
        oauth_token_endpoint=config.oauth_token_endpoint, oauth_client_id=config.oauth_client_id,
        oauth_scope=config.oauth_scope)
    key = key_as_pkcs8(config.ssl_key_pem, config.ssl_key_password) if config.ssl_key_pem else ""
    secrets = KafkaSecrets(sasl_password=config.sasl_password, ssl_key_pem=key,
                           oauth_client_secret=config.oauth_client_secret)
    return {name.removeprefix("kafka."): value for name, value in kafka_options(settings, secrets).items()}


class ShareGroupReader:
    """Reads the share groups of one cluster. Every request carries
    ``timeout`` (seconds) as its deadline. ``close`` releases the Java
    client; the JVM stays for the process's next reader."""

    def __init__(self, config: ClusterConfig, *, timeout: float = 10.0) -> None:
        self._config = config
        self._timeout_ms = int(timeout * 1000)
        self._gateway = None
        self._admin = None
        self._consumer = None

    # -- reads ---------------------------------------------------------------

    def topic_ids(self) -> dict[str, tuple[str, bool]]:
        """Every topic the principal may Describe: name -> (topic id, internal),
        from the Java client's topic listing (one Metadata request). Returned
        as one text (the listing's ``toString``), not object by object: a
        gateway call per topic cost a millisecond each."""
        with self._calls("list topics"):
            options = self._jvm.org.apache.kafka.clients.admin.ListTopicsOptions().listInternal(True)
            text = str(self._get(self._client.listTopics(options.timeoutMs(self._timeout_ms)).listings()).toString())
        return parse_topic_listings(text)

    def partition_counts(self) -> dict[str, int] | None:
        """Every topic's partition count from one Metadata request, through the
        Java helper ``gapwatch.TopicCounts`` (services/java, compiled by
        setup.sh): one line per topic over the gateway. None when the helper
        is not installed here."""
        helper = self._jvm.gapwatch.TopicCounts
        if not isinstance(helper, JavaClass):
            return None
        with self._calls("topic partition counts"):
            text = str(helper.of(self._metadata_consumer, self._timeout_ms))
        return parse_partition_counts(text)

    def topic_readers(self, group_ids: Sequence[str], counts: Mapping[str, int]) -> set[str] | None:
        """Which of the classic and consumer groups ``group_ids`` read any of
        the topics in ``counts`` (name -> partition count): a member assigned
        or targeted one of their partitions, or a commit on one; a group whose
        answer is an error is named too. Asked inside the JVM by the poll's
        group reader (``gapwatch.GroupReads.readers``), which answers only the
        readers' ids. None when the helper is not installed here."""
        helper = self._jvm.gapwatch.GroupReads
        if not isinstance(helper, JavaClass):
            return None
        with self._calls("topic readers"):
            text = str(helper.readers(self._client, encode_group_ids(group_ids),
                                      "".join(f"{name} {count}\n" for name, count in counts.items()),
                                      self._timeout_ms))
        return parse_group_ids(text)

    def read_groups(
        self, group_ids: Sequence[str], partitions: Sequence[tuple[str, int]] | None = None,
    ) -> GroupReads | None:
        """Classic and consumer groups described, then their committed offsets
        (all of each group's, or only on ``partitions``), through the Java
        helper ``gapwatch.GroupReads``: the Admin batches both per coordinator,
        and one JSON text crosses the gateway. None when the helper is not
        installed here."""
        helper = self._jvm.gapwatch.GroupReads
        if not isinstance(helper, JavaClass):
            return None
        with self._calls("describe groups and read their offsets"):
            text = str(helper.of(self._client, encode_group_ids(group_ids),
                                 "".join(f"{topic} {partition}\n" for topic, partition in partitions or ()),
                                 self._timeout_ms))
        return parse_group_reads(text)

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
                    if _cause_class(error) == _ERRORS + "GroupAuthorizationException":
                        # Reading a group's config takes DescribeConfigs, not the Describe _worded names.
                        cause = _cause(error)
                        raise self._unavailable("share group configs", (
                            f"GroupAuthorizationException: {cause.getMessage()} "
                            f"({missing_acl('DescribeConfigs', 'group', group_id)})"), refused=True) from None
                    raise _GroupError(group_id, error) from None
                if entry is None or entry.value() is None:
                    found[group_id] = AutoOffsetReset(DEFAULT_AUTO_OFFSET_RESET, explicit=False)
                else:
                    explicit = str(entry.source().name()) == "DYNAMIC_GROUP_CONFIG"
                    found[group_id] = AutoOffsetReset(str(entry.value()), explicit=explicit)
            return found

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
        return {group_id: (str(description.groupState().toString()), len(_items(description.members())))
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
        Describe ``_worded`` names for reads), or anything else, worded."""
        cause = _cause(error)
        name = str(cause.getClass().getName())
        text = f"{name.rsplit('.', 1)[-1]}: {cause.getMessage()}"
        if name == _ERRORS + "GroupNotEmptyException":
            unavailable = self._unavailable(stage, f"group {group_id!r} has members ({text})")
            return GroupNotEmpty(str(unavailable), bootstrap_servers=unavailable.bootstrap_servers,
                                 stage=unavailable.stage)
        if name == _ERRORS + "GroupAuthorizationException":
            return self._unavailable(stage, f"{text} ({missing_acl('Read', 'group', group_id)})", refused=True)
        if name == _ERRORS + "TopicAuthorizationException":
            topics = ", ".join(sorted(str(topic) for topic in _items(cause.unauthorizedTopics())))
            return self._unavailable(stage, f"{text} ({missing_acl('Read', 'topic', topics)})", refused=True)
        detail, refused = _worded(error, group_id=group_id, timeout_ms=self._timeout_ms)
        return self._unavailable(stage, detail, refused=refused)

    def close(self) -> None:
        clients, self._consumer, self._admin = (self._consumer, self._admin), None, None
        for client in clients:
            if client is not None:
                try:
                    client.close(self._jvm.java.time.Duration.ofMillis(self._timeout_ms))
                except Py4JError:
                    pass  # the JVM is gone, and the client with it

    def __enter__(self) -> ShareGroupReader:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------

    def _list_ids(self, kind: str) -> tuple[str, ...]:
        """Every group of ``kind`` ("share" or "streams") the principal may Describe, sorted."""
        with self._calls(f"list {kind} groups"):
            options_of = self._jvm.org.apache.kafka.clients.admin.ListGroupsOptions
            options = options_of.forShareGroups() if kind == "share" else options_of.forStreamsGroups()
            listings = self._get(self._client.listGroups(options.timeoutMs(self._timeout_ms)).all())
            return tuple(sorted(str(listing.groupId()) for listing in _items(listings)))

    def _per_group(self, futures: Mapping[str, object]) -> dict[str, object]:
        """Each group's answer, in the order given; a group the broker does not
        know (deleted since it was listed) is left out. Any other error is the
        group's, worded by the enclosing ``_calls``."""
        answers = {}
        for group_id, future in futures.items():
            try:
                answers[group_id] = self._get(future)
            except Py4JJavaError as error:
                if _cause_class(error) != _ERRORS + "GroupIdNotFoundException":
                    raise _GroupError(group_id, error) from None
        return answers

    @property
    def _jvm(self):
        if self._gateway is None:
            try:
                self._gateway = java_gateway()
            except JvmUnavailable as error:
                raise self._unavailable("start", str(error)) from None
        return self._gateway.jvm

    @property
    def _client(self):
        """The Java ``Admin``, made on first use."""
        if self._admin is None:
            self._admin = self._jvm.org.apache.kafka.clients.admin.Admin.create(self._java_properties({}))
        return self._admin

    @property
    def _metadata_consumer(self):
        """A Java consumer for metadata only: no group, never subscribes."""
        if self._consumer is None:
            deserializer = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
            self._consumer = self._jvm.org.apache.kafka.clients.consumer.KafkaConsumer(self._java_properties(
                {"key.deserializer": deserializer, "value.deserializer": deserializer}))
        return self._consumer

    def _java_properties(self, extra: Mapping[str, str]):
        """A Java client's settings: they travel as gateway calls
        (``Properties.setProperty``), secrets included, never as JVM arguments."""
        properties = self._jvm.java.util.Properties()
        settings = {**java_client_properties(self._config), "client.id": CLIENT_ID,
                    "request.timeout.ms": str(self._timeout_ms), "default.api.timeout.ms": str(self._timeout_ms),
                    **extra}
        for name, value in settings.items():
            properties.setProperty(name, value)
        if self._config.oauth_token_endpoint:
            _allow_url(self._jvm, self._config.oauth_token_endpoint)
        return properties

    def _get(self, future):
        """A KafkaFuture's value; the call's own deadline ends it first."""
        unit = self._jvm.java.util.concurrent.TimeUnit.MILLISECONDS
        return future.get(self._timeout_ms + int(WAIT_GRACE_SECONDS * 1000), unit)

    def _calls(self, stage: str):
        return _Calls(self, stage)

    def _unavailable(self, stage: str, detail: str, *, refused: bool = False) -> KafkaUnavailable:
        message = secret_redact(f"Kafka at {self._config.bootstrap_servers}: {stage}: {detail}", *self._config.secrets)
        kind = AccessRefused if refused else KafkaUnavailable
        return kind(message, bootstrap_servers=self._config.bootstrap_servers, stage=f"share groups: {stage}")

    def _lost_jvm(self) -> None:
        gateway, self._gateway, self._admin, self._consumer = self._gateway, None, None, None
        if gateway is not None:
            gateway_discard(gateway)


@dataclass(frozen=True)
class GroupReads:
    """``gapwatch.GroupReads``' answer: the groups read, each one's commits,
    and the ones it could not read (for librdkafka to read and word)."""

    groups: tuple[DescribedGroup, ...]
    committed: dict[str, dict[tuple[str, int], int]]
    others: tuple[str, ...]


# The states librdkafka names (tasks.kafka.client); Java's others (KIP-848's
# Assigning, Reconciling) read as librdkafka reads them, "Unknown".
_CLIENT_STATES = frozenset({"Stable", "Empty", "PreparingRebalance", "CompletingRebalance", "Dead"})


def encode_group_ids(group_ids: Iterable[str]) -> str:
    """Group ids for a Java helper: "length:id" after one another (code points)."""
    return "".join(f"{len(group_id)}:{group_id}" for group_id in group_ids)


def parse_group_reads(text: str) -> GroupReads:
    """``gapwatch.GroupReads``' JSON as plain data, as librdkafka's reading
    gives it (``tasks.kafka.client.group_from``). Raises ValueError unless it parses."""
    try:
        answer = json.loads(text)
        groups, committed = [], {}
        for row in answer["groups"]:
            members = (MemberSnapshot(member_id=str(member_id), client_id=str(client_id), host=str(host),
                                      assignment=frozenset((str(t), int(p)) for t, p in assigned),
                                      target_assignment=frozenset((str(t), int(p)) for t, p in target))
                       for member_id, client_id, host, assigned, target in row["members"])
            groups.append(DescribedGroup(
                group_id=str(row["id"]),
                state=row["state"] if row["state"] in _CLIENT_STATES else "Unknown",
                type=row["type"] if row["type"] in ("classic", "consumer") else "unknown",
                assignor=str(row["assignor"]),
                members=tuple(sorted(members, key=lambda member: member.member_id))))
            committed[str(row["id"])] = {(str(t), int(p)): int(offset) for t, p, offset in row["committed"]}
        return GroupReads(groups=tuple(groups), committed=committed, others=tuple(str(g) for g in answer["others"]))
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"the Java helper's group reads did not parse: {error}: {text[:200]!r}") from None


def parse_group_ids(text: str) -> set[str]:
    """``gapwatch.GroupReads.readers``' answer ("length:id" after one another,
    the length in characters: a group id may hold any character) as a set.
    Raises ValueError unless all of the text parses."""
    ids, at = set(), 0
    while at < len(text):
        colon = text.find(":", at)
        if colon <= at or not text[at:colon].isdigit():
            raise ValueError(f"the Java helper's group ids did not parse at {at}: {text[at:at + 50]!r}")
        end = colon + 1 + int(text[at:colon])
        if end > len(text):
            raise ValueError(f"the Java helper's group ids end early: {text[at:at + 50]!r}")
        ids.add(text[colon + 1:end])
        at = end
    return ids


def parse_partition_counts(text: str) -> dict[str, int]:
    """``gapwatch.TopicCounts``' lines ("name count") as {name: count}."""
    counts = {}
    for line in text.splitlines():
        name, _, count = line.rpartition(" ")
        counts[name] = int(count)
    return counts


def parse_topic_listings(text: str) -> dict[str, tuple[str, bool]]:
    """``[(name=a, topicId=…, internal=false), …]`` as {name: (topic id, internal)}.
    Raises ValueError unless every listing in the text parses.

    Java prints a topic id in URL-safe base64 ("-", "_"), librdkafka (and so
    every id Gapwatch stored) in standard base64 ("+", "/"): the id is given
    in librdkafka's spelling, or one topic in 32 would read as recreated."""
    found = {name: (topic_id.replace("-", "+").replace("_", "/"), internal == "true")
             for name, topic_id, internal in _TOPIC_LISTING.findall(text)}
    if text.count("(name=") != len(found) or not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"the Java client's topic listing did not parse: {text[:200]!r}")
    return found


class _GroupError(Exception):
    """A Java error on one group's request, to be worded with the group's name."""

    def __init__(self, group_id: str, error: Py4JJavaError) -> None:
        super().__init__(group_id)
        self.group_id = group_id
        self.error = error


class _Calls:
    """Turns whatever a block of Java calls raises into a worded ``KafkaUnavailable``."""

    def __init__(self, reader: ShareGroupReader, stage: str) -> None:
        self.reader, self.stage = reader, stage

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, traceback) -> bool:
        if error is None or isinstance(error, KafkaUnavailable):
            return False
        group_id = None
        if isinstance(error, _GroupError):
            group_id, error = error.group_id, error.error
        if isinstance(error, Py4JJavaError):
            detail, refused = _worded(error, group_id=group_id, timeout_ms=self.reader._timeout_ms)
            if _cause_class(error) == _ERRORS + "UnsupportedVersionException":
                unsupported = self.reader._unavailable(self.stage, detail)
                raise GroupKindUnsupported(str(unsupported), bootstrap_servers=unsupported.bootstrap_servers,
                                             stage=unsupported.stage) from None
            raise self.reader._unavailable(self.stage, detail, refused=refused) from None
        if isinstance(error, Py4JNetworkError):
            self.reader._lost_jvm()
            raise self.reader._unavailable(self.stage, "the JVM running Kafka's Java client stopped answering "
                                                       "(it is started again on the next call)") from None
        return False


def _cause(error: Py4JJavaError):
    """The Java exception that says what happened: the cause under the
    ExecutionException (or a KafkaException of Admin.create) wrapping it."""
    exception = error.java_exception
    while exception.getCause() is not None and str(exception.getClass().getName()) in (
        "java.util.concurrent.ExecutionException", "java.util.concurrent.CompletionException",
        "org.apache.kafka.common.KafkaException",
    ):
        exception = exception.getCause()
    return exception


def _cause_class(error: Py4JJavaError) -> str:
    return str(_cause(error).getClass().getName())


def _worded(error: Py4JJavaError, *, group_id: str | None, timeout_ms: int) -> tuple[str, bool]:
    """What a Java error means in words, and whether it is a lasting refusal."""
    cause = _cause(error)
    name = str(cause.getClass().getName())
    text = f"{name.rsplit('.', 1)[-1]}: {cause.getMessage()}"
    if name in (_ERRORS + "TimeoutException", "java.util.concurrent.TimeoutException"):
        return f"no answer within {timeout_ms / 1000:g}s: no broker reachable, or none answered ({text})", False
    if name == _ERRORS + "GroupAuthorizationException":
        return f"{text} ({missing_acl('Describe', 'group', group_id or str(cause.groupId()))})", True
    if name == _ERRORS + "TopicAuthorizationException":
        topics = ", ".join(sorted(str(topic) for topic in _items(cause.unauthorizedTopics())))
        return f"{text} ({missing_acl('Describe', 'topic', topics)})", True
    if name == _ERRORS + "ClusterAuthorizationException":
        return f"{text} ({missing_acl('Describe', 'cluster')})", True
    if name in _LOGIN_REFUSED:
        return f"login refused: {text} ({_LOGIN_REFUSED[name]})", name != _ERRORS + "AuthenticationException"
    if name == "org.apache.kafka.common.config.ConfigException":
        if "resolvable" in text:
            return f"no address in bootstrap.servers resolves ({text})", False
        return f"the client settings were refused ({text})", False
    if name == _ERRORS + "UnsupportedVersionException":
        return (f"the cluster does not serve this kind of group ({text}; share groups need Kafka 4.1+ with "
                f"share.version=1, streams groups Kafka 4.1+ with streams.version=1)"), False
    return text, False


def _allow_url(jvm, url: str) -> None:
    """Kafka's Java client (4.0+) contacts an OAuth token endpoint only if the
    JVM's ``org.apache.kafka.sasl.oauthbearer.allowed.urls`` lists it: added
    to this process's JVM (it serves every cluster of the process), never
    removed while a client may use it."""
    system = jvm.java.lang.System
    current = system.getProperty(ALLOWED_URLS_PROPERTY)
    urls = [entry for entry in str(current or "").split(",") if entry]
    if url not in urls:
        system.setProperty(ALLOWED_URLS_PROPERTY, ",".join([*urls, url]))


def _items(collection) -> Iterable:
    """A Java collection's elements (py4j iterates lists and sets, not every Collection)."""
    return list(collection.toArray())


def _description(group_id: str, description) -> ShareGroupDescription:
    members = []
    for member in _items(description.members()):
        assignment = member.assignment()
        partitions = _items(assignment.topicPartitions()) if assignment is not None else []
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
    for entry in _items(offsets.entrySet()):
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
        for task in _items(assignment.activeTasks())
        for topic in sources.get(str(task.subtopologyId()), ())
        for partition in _items(task.partitions())
    )


def _streams_group(group_id: str, description, committed: dict[tuple[str, int], int]) -> GroupSnapshot:
    sources = {
        str(subtopology.subtopologyId()): [str(topic) for topic in _items(subtopology.sourceTopics())]
        + [str(topic) for topic in _items(subtopology.repartitionSourceTopics().keySet())]
        for subtopology in _items(description.subtopologies())
    }
    members = tuple(sorted((
        MemberSnapshot(
            member_id=str(member.memberId()), client_id=str(member.clientId() or ""),
            host=str(member.clientHost() or ""),
            assignment=_task_partitions(member.assignment(), sources),
            target_assignment=_task_partitions(member.targetAssignment(), sources),
        )
        for member in _items(description.members())
    ), key=lambda member: member.member_id))
    return GroupSnapshot(group_id=group_id, state=str(description.groupState().toString()), type="streams",
                         assignor="streams", members=members, committed=committed)


def _start_offsets(partitions) -> dict[tuple[str, int], SharePartitionStart]:
    found = {}
    for entry in _items(partitions.entrySet()):
        info = entry.getValue()
        if info is None:
            continue  # a partition the group has not initialised
        partition = entry.getKey()
        lag = info.lag()
        found[(str(partition.topic()), int(partition.partition()))] = SharePartitionStart(
            start_offset=int(info.startOffset()), lag=int(lag.get()) if lag.isPresent() else None)
    return found
