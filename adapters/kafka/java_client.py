"""Kafka's own Java client in this process's JVM (``adapters.kafka.jvm``), for
one cluster: its ``Admin`` and a metadata-only consumer, made on first use
from the cluster's settings, and every Java error raised as a worded
``KafkaUnavailable``.

Why the Java client: confluent-kafka (librdkafka) has a ``ShareConsumer``
but no share-group admin call. Kafka's ``Admin`` has them all
(``listGroups`` by type, ``describeShareGroups``, ``listShareGroupOffsets``
with each partition's start offset and lag, ``describeConfigs`` on the
GROUP resource), is maintained with the broker and follows each new
protocol version, and does TLS with PEM stores, SASL PLAIN/SCRAM and OIDC
OAUTHBEARER the way the Spark job's client already does (the same option
mapping, ``ClusterConfig.java_options``). A protocol library such as
kio would mean owning the request plumbing (coordinator lookup, retries,
SASL and OAuth login) that the Java client already gets right; py4j comes
with PySpark, so nothing is added to the install. The poll's cluster-wide
reads use it too (``adapters.kafka.java_reads``), where librdkafka's answers
cost a Python object per partition or member.

Creating a client opens no connection and starts no JVM; the first call
does. Every error is a ``KafkaUnavailable`` (``AccessRefused`` for a refused
ACL or login), its message worded and free of secrets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Self

from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError

from groups.domain.cluster_config import ClusterConfig
from groups.domain.secrets import secret_redact
from adapters.kafka.errors import AccessRefused, KafkaUnavailable, missing_acl
from adapters.kafka.jvm import JvmUnavailable, gateway_discard, java_gateway

# Only guards against a future the client never completes: every call carries
# the timeout itself.
WAIT_GRACE_SECONDS = 5.0
CLIENT_ID = "gapwatch-java-admin"
ALLOWED_URLS_PROPERTY = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
# The stage of the error raised when no JVM can start here (callers that can do without it check for it).
JVM_START_STAGE = "java admin: start"

JAVA_ERRORS = "org.apache.kafka.common.errors."
# Refusals asking again cannot change until an operator does.
_LOGIN_REFUSED = {
    JAVA_ERRORS + "SaslAuthenticationException":
        "the cluster refused Gapwatch's SASL login (user name, password, mechanism, or a disabled OAuth client)",
    JAVA_ERRORS + "SslAuthenticationException":
        "the TLS handshake failed (the broker's certificate is not trusted by the CA given, names another host, "
        "or the broker refused Gapwatch's client certificate)",
    JAVA_ERRORS + "AuthenticationException": "authentication failed",
}


class GroupKindUnsupported(KafkaUnavailable):
    """The cluster does not serve the kind of group asked for (share or
    streams groups: before Kafka 4.1, or with ``share.version`` or
    ``streams.version`` 0): it has none to read."""


def java_client_properties(config: ClusterConfig) -> dict[str, str]:
    """The Java client's settings of a cluster (``ClusterConfig.java_options``:
    the options the Spark job's Kafka source gets without its ``kafka.``
    prefix), the key as the Java client reads it."""
    return config.for_java().java_options()


class JavaClient:
    """Kafka's Java client for one cluster. Every request carries
    ``timeout`` (seconds) as its deadline. ``close`` releases the Java
    clients; the JVM stays for the process's next client."""

    def __init__(self, config: ClusterConfig, *, timeout: float = 10.0, gateway=None) -> None:
        """``gateway``: a JVM of the caller's (``jvm.start_gateway``); by default, this process's."""
        self._config = config
        self._timeout_ms = int(timeout * 1000)
        self._gateway = gateway
        self._admin = None
        self._consumer = None

    def close(self, *, grace: float | None = None) -> None:
        """``grace``: seconds the Java clients' requests in flight get to end
        (by default the request timeout)."""
        grace_ms = self._timeout_ms if grace is None else int(grace * 1000)
        clients, self._consumer, self._admin = (self._consumer, self._admin), None, None
        for client in clients:
            if client is not None:
                try:
                    client.close(self._jvm.java.time.Duration.ofMillis(grace_ms))
                except Py4JError:
                    pass  # the JVM is gone, and the client with it

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def finalized_features(self) -> tuple[str, dict[str, int]]:
        """The cluster's finalized features (``Admin.describeFeatures``): the
        name of its ``metadata.version`` level ("3.9-IV0", as this JVM's
        Kafka names it; "level N" for a level newer than it knows) and every
        feature's finalized level, e.g. {"metadata.version": 21, ...}."""
        with self._calls("describe features"):
            metadata = self._get(self._client.describeFeatures().featureMetadata())
            finalized = metadata.finalizedFeatures()
            levels = {str(name): int(finalized.get(name).maxVersionLevel()) for name in java_items(finalized.keySet())}
        level = levels.get("metadata.version")
        if level is None:
            return "", levels
        try:
            named = self._jvm.org.apache.kafka.server.common.MetadataVersion.fromFeatureLevel(level)
            return str(named.version()), levels
        except Py4JError:
            return f"level {level}", levels

    # -- plumbing --------------------------------------------------------------

    def _list_ids(self, kind: str) -> tuple[str, ...]:
        """Every group of ``kind`` ("share" or "streams") the principal may Describe, sorted."""
        with self._calls(f"list {kind} groups"):
            options_of = self._jvm.org.apache.kafka.clients.admin.ListGroupsOptions
            options = options_of.forShareGroups() if kind == "share" else options_of.forStreamsGroups()
            listings = self._get(self._client.listGroups(options.timeoutMs(self._timeout_ms)).all())
            return tuple(sorted(str(listing.groupId()) for listing in java_items(listings)))

    def _per_group(self, futures: Mapping[str, object]) -> dict[str, object]:
        """Each group's answer, in the order given; a group the broker does not
        know (deleted since it was listed) is left out. Any other error is the
        group's, worded by the enclosing ``_calls``."""
        answers = {}
        for group_id, future in futures.items():
            try:
                answers[group_id] = self._get(future)
            except Py4JJavaError as error:
                if cause_class(error) != JAVA_ERRORS + "GroupIdNotFoundException":
                    raise GroupError(group_id, error) from None
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
        return kind(message, bootstrap_servers=self._config.bootstrap_servers, stage=f"java admin: {stage}")

    def _lost_jvm(self) -> None:
        gateway, self._gateway, self._admin, self._consumer = self._gateway, None, None, None
        if gateway is not None:
            gateway_discard(gateway)


class GroupError(Exception):
    """A Java error on one group's request, to be worded with the group's name."""

    def __init__(self, group_id: str, error: Py4JJavaError) -> None:
        super().__init__(group_id)
        self.group_id = group_id
        self.error = error


class _Calls:
    """Turns whatever a block of Java calls raises into a worded ``KafkaUnavailable``."""

    def __init__(self, reader: JavaClient, stage: str) -> None:
        self.reader, self.stage = reader, stage

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, traceback) -> bool:
        if error is None or isinstance(error, KafkaUnavailable):
            return False
        group_id = None
        if isinstance(error, GroupError):
            group_id, error = error.group_id, error.error
        if isinstance(error, Py4JJavaError):
            detail, refused = worded(error, group_id=group_id, timeout_ms=self.reader._timeout_ms)
            if cause_class(error) == JAVA_ERRORS + "UnsupportedVersionException":
                unsupported = self.reader._unavailable(self.stage, detail)
                raise GroupKindUnsupported(str(unsupported), bootstrap_servers=unsupported.bootstrap_servers,
                                             stage=unsupported.stage) from None
            raise self.reader._unavailable(self.stage, detail, refused=refused) from None
        if isinstance(error, Py4JNetworkError):
            self.reader._lost_jvm()
            raise self.reader._unavailable(self.stage, "the JVM running Kafka's Java client stopped answering "
                                                       "(it is started again on the next call)") from None
        return False


def cause_of(error: Py4JJavaError):
    """The Java exception that says what happened: the cause under the
    ExecutionException (or a KafkaException of Admin.create) wrapping it."""
    exception = error.java_exception
    while exception.getCause() is not None and str(exception.getClass().getName()) in (
        "java.util.concurrent.ExecutionException", "java.util.concurrent.CompletionException",
        "org.apache.kafka.common.KafkaException",
    ):
        exception = exception.getCause()
    return exception


def class_names(exception) -> list[str]:
    """The Java exception's class and its superclasses, the most specific first."""
    names, kind = [], exception.getClass()
    while kind is not None:
        names.append(str(kind.getName()))
        kind = kind.getSuperclass()
    return names


def cause_class(error: Py4JJavaError) -> str:
    return str(cause_of(error).getClass().getName())


def worded(error: Py4JJavaError, *, group_id: str | None, timeout_ms: int) -> tuple[str, bool]:
    """What a Java error means in words, and whether it is a lasting refusal."""
    cause = cause_of(error)
    name = str(cause.getClass().getName())
    text = f"{name.rsplit('.', 1)[-1]}: {cause.getMessage()}"
    if name in (JAVA_ERRORS + "TimeoutException", "java.util.concurrent.TimeoutException"):
        return f"no answer within {timeout_ms / 1000:g}s: no broker reachable, or none answered ({text})", False
    if name == JAVA_ERRORS + "GroupAuthorizationException":
        return f"{text} ({missing_acl('Describe', 'group', group_id or str(cause.groupId()))})", True
    if name == JAVA_ERRORS + "TopicAuthorizationException":
        topics = ", ".join(sorted(str(topic) for topic in java_items(cause.unauthorizedTopics())))
        return f"{text} ({missing_acl('Describe', 'topic', topics)})", True
    if name == JAVA_ERRORS + "ClusterAuthorizationException":
        return f"{text} ({missing_acl('Describe', 'cluster')})", True
    refusal = next((kind for kind in class_names(cause) if kind in _LOGIN_REFUSED), None)
    if refusal is not None:
        # A subclass says it too: the broker ending a SASL handshake it did not expect
        # (IllegalSaslStateException, seen when a revoked OAuth client re-authenticates) is an
        # AuthenticationException.
        return f"login refused: {text} ({_LOGIN_REFUSED[refusal]})", refusal != JAVA_ERRORS + "AuthenticationException"
    if name == "org.apache.kafka.common.config.ConfigException":
        if "resolvable" in text:
            return f"no address in bootstrap.servers resolves ({text})", False
        return f"the client settings were refused ({text})", False
    if name == JAVA_ERRORS + "UnsupportedVersionException":
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


def java_items(collection) -> Iterable:
    """A Java collection's elements (py4j iterates lists and sets, not every Collection)."""
    return list(collection.toArray())
