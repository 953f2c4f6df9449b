"""What kind of group a consumer group is, as the pages, the API, ``/metrics``
and webhooks name it: the broker's type, with Kafka Connect's sink groups
told apart by their id.

Pure. ``type`` is the broker's word as a poll stores it
(``ConsumerGroup.type``): "classic", "consumer" (KIP-848), "share" (KIP-932)
or "streams" (KIP-1071); empty, or "unknown", until a poll has described the
group. A Connect sink connector reads with an ordinary consumer whose group
id is ``connect-<connector name>``, so a classic or consumer group with that
prefix is one (a connector given another group id passes for a plain one).
"""

from __future__ import annotations

CLASSIC = "classic"
CONSUMER = "consumer"
SHARE = "share"
STREAMS = "streams"
CONNECT = "connect"
UNKNOWN = "unknown"

# Every kind, in the order filters offer them.
GROUP_KINDS = (CLASSIC, CONSUMER, SHARE, STREAMS, CONNECT, UNKNOWN)
KIND_LABELS = {
    CLASSIC: "classic",
    CONSUMER: "consumer (KIP-848)",
    SHARE: "share (KIP-932)",
    STREAMS: "streams (KIP-1071)",
    CONNECT: "Kafka Connect sink",
    UNKNOWN: "not yet described",
}
# The group id Kafka Connect gives a sink connector's consumer group by default.
CONNECT_PREFIX = "connect-"
# Types a Connect sink's group can have: Connect's workers run plain consumers.
CONNECT_TYPES = (CLASSIC, CONSUMER)
# Types that are a kind of their own whatever the group id.
OWN_KIND_TYPES = (SHARE, STREAMS)
# Kinds whose framework starts a new partition at the log start unless its
# application says otherwise, in a setting the broker cannot see: what the
# detection core assumes of such a group nobody declared (issue 25), and why.
EARLIEST_BY_DEFAULT = {
    CONNECT: ("Kafka Connect's default for a sink connector's group (a consumer.override.auto.offset.reset=latest "
              "would change it: declare the group latest then)"),
    STREAMS: ("Kafka Streams' default (a source topic's Topology.AutoOffsetReset of latest would change it: "
              "declare the group latest then)"),
}


def group_kind(type: str, group_id: str) -> str:
    """One of ``GROUP_KINDS``: "connect" for a classic or consumer group whose
    id starts with ``connect-``; the type itself for the other known types;
    "unknown" for an empty type (the group is not described yet) or a word
    this version does not know."""
    if type in CONNECT_TYPES:
        return CONNECT if group_id.startswith(CONNECT_PREFIX) else type
    if type in OWN_KIND_TYPES:
        return type
    return UNKNOWN
