"""The adapter's one error type, and how the client's errors are read.

Every face of the adapter raises ``KafkaUnavailable`` (or its kind
``GroupNotEmpty``); callers never see a confluent-kafka exception.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException


class KafkaUnavailable(Exception):
    """The cluster could not be reached, or answered with an error or with
    only part of an answer. ``stage`` names the step that failed ("ping",
    "topics", "watermarks", "groups", "offsets", "group", "commit", "backfill")."""

    def __init__(self, message: str, *, bootstrap_servers: str = "", stage: str = "") -> None:
        super().__init__(message)
        self.bootstrap_servers = bootstrap_servers
        self.stage = stage


class GroupNotEmpty(KafkaUnavailable):
    """The broker refused an administrative offset commit because the group
    has members (UNKNOWN_MEMBER_ID and kin): nothing was committed."""


# Errors of describe_topics that mean "this topic no longer exists".
TOPIC_GONE = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID, KafkaError._UNKNOWN_TOPIC})
# Partition-level errors of list_offsets while a topic is being created or
# deleted, or a leader moves: a topic created a moment ago answers NOT_LEADER
# for ~20 ms; one being deleted answers _NOENT ("No leaders found") or
# UNKNOWN_TOPIC. Kafka's own admin client retries these; so does the
# snapshot, within the timeout, and drops the topic only if describing it
# again says it is gone.
PARTITION_TROUBLE = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.UNKNOWN_TOPIC_ID,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._NOENT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
    }
)
# Errors that mean the cluster did not answer a request (as opposed to
# refusing it): the client's own timeouts and lost connections.
NO_ANSWER = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError._DESTROY,
    }
)
# A group coordinator that is moving or still loading its partition of
# __consumer_offsets (right after a broker starts, or a leader moves): Kafka's
# own admin client asks again; so does the snapshot, within the timeout.
COORDINATOR_BUSY = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
    }
)
# Answers to an admin offset commit (no member id, generation -1) that mean
# "the group has members now" (classic and KIP-848 groups).
GROUP_ACTIVE = frozenset(
    {
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.NON_EMPTY_GROUP,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.STALE_MEMBER_EPOCH,
        KafkaError.FENCED_MEMBER_EPOCH,
    }
)


def error_code(error: BaseException | KafkaError) -> int | None:
    """The client's error code, or None for any other exception (a timeout)."""
    if isinstance(error, KafkaError):
        return error.code()
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return error.args[0].code()
    return None


# The resource whose ACL each refusal by the broker's authorizer is about.
REFUSED_RESOURCE = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "group",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
}
# What a refusal means when the request does not say which resource or
# operation it needed (docs/security.md, "ACLs", has them).
REFUSAL_MEANING = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED:
        "the principal Gapwatch connects as lacks an ACL on a topic (Describe to watch it, Read to reset "
        "offsets on it or read its records)",
    KafkaError.GROUP_AUTHORIZATION_FAILED:
        "the principal Gapwatch connects as lacks an ACL on this consumer group (Describe to watch it, Read "
        "to reset its offsets)",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        "the principal Gapwatch connects as lacks Describe on the cluster",
    KafkaError.SASL_AUTHENTICATION_FAILED:
        "the cluster refused Gapwatch's SASL login (user name, password, mechanism, or a disabled OAuth client)",
    # librdkafka's own: a refused SASL login, or an OAuth token endpoint refusing the client.
    KafkaError._AUTHENTICATION:
        "authentication failed: the cluster or the OAuth token endpoint refused Gapwatch's credentials (a wrong "
        "password or client secret, a disabled or revoked OAuth client, an expired token)",
}
REFUSALS = frozenset(REFUSAL_MEANING)
# Refusals that asking again cannot change until an operator does (ACLs, a
# refused SASL login); librdkafka's _AUTHENTICATION may be an OAuth token
# endpoint that is down for a moment.
LASTING_REFUSALS = frozenset({*REFUSED_RESOURCE, KafkaError.SASL_AUTHENTICATION_FAILED})


class AccessRefused(KafkaUnavailable):
    """The broker refused Gapwatch's principal: an ACL it lacks (the message
    names the operation and the resource) or its login. Asking again does not
    help until an operator changes the ACLs or the credentials."""


def missing_acl(operation: str, resource: str, name: str | None = None) -> str:
    """``missing ACL: Read on group 'g'``, as the pages and job errors say it."""
    where = "the cluster" if resource == "cluster" else f"{resource} {name!r}"
    return f"missing ACL: {operation} on {where} for the principal Gapwatch connects as"


def describe_error(error: BaseException | KafkaError, *, operation: str = "Describe", topic: str | None = None,
                   group: str | None = None) -> str:
    """``NAME: text`` for a client error, with what a refused permission or
    login means in words: when the caller names the topic or group of its
    request, which ACL (``operation`` on that resource) is missing; the type
    and message otherwise."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        resource = REFUSED_RESOURCE.get(error.code())
        name = {"topic": topic, "group": group}.get(resource or "")
        if resource == "cluster":
            meaning = missing_acl("Describe", "cluster")
        elif resource and name is not None:
            meaning = missing_acl(operation, resource, name)
        else:
            meaning = REFUSAL_MEANING.get(error.code())
        return f"{error.name()}: {error.str()}" + (f" ({meaning})" if meaning else "")
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
