"""Protection by membership (issue 43): the pure rules of which live consumer
groups Gapwatch can sit in for a moment, and what that costs each group.

Gapwatch joins a live group with a member of its own, subscribed only to its
anchor topic (so it takes none of the group's partitions), adds the
partitions, commits each new one at its log start and leaves: a member that
is given a partition starts at the group's committed offset before it looks
at ``auto.offset.reset`` (REFERENCE.md, "Checked 2026-11-29").
"""

from __future__ import annotations

from groups.domain.group_kinds import CLASSIC, CONSUMER

# Assignors Gapwatch's member (librdkafka) can offer: a classic group whose
# members agreed on another protocol name refuses it (INCONSISTENT_GROUP_PROTOCOL).
SEATABLE_ASSIGNORS = ("range", "roundrobin", "cooperative-sticky")
COOPERATIVE_ASSIGNORS = ("cooperative-sticky",)
DEFAULT_ANCHOR_TOPIC = "gapwatch-anchor"


def seat_problem(*, protocol: str, assignor: str) -> str:
    """Why Gapwatch cannot take a seat in a group of ``protocol`` ("classic"
    or "consumer") whose members agreed on ``assignor`` ("" when it can)."""
    if protocol == CONSUMER:
        return ""
    if protocol != CLASSIC:
        return f"a {protocol or 'not yet described'} group has no consumer membership Gapwatch can take"
    if assignor and assignor not in SEATABLE_ASSIGNORS:
        return (f"its members agreed on the assignor {assignor!r}, which Gapwatch's member (librdkafka: "
                f"{', '.join(SEATABLE_ASSIGNORS)}) cannot offer")
    return ""


def seat_cost(*, protocol: str, assignor: str, members: int) -> str:
    """What sitting in the group for a moment costs its members, in words
    (one member: singular words)."""
    if members == 1:
        who, whose, keep, give_up, their, pause = "its 1 member", "its 1 member's", "keeps", "gives up", "its", "pauses"
    else:
        who, whose, keep, give_up, their, pause = (f"its {members} members", f"its {members} members'", "keep",
                                                   "give up", "their", "pause")
    if protocol == CONSUMER:
        return ("no rebalance: a KIP-848 group takes Gapwatch's member in at its next heartbeat (up to 5 s by "
                f"default) and moves none of {whose} partitions")
    if assignor in COOPERATIVE_ASSIGNORS:
        return (f"two rebalances (Gapwatch joining, then leaving) with the cooperative assignor {assignor!r}: "
                f"{who} {keep} {their} partitions and {keep} reading")
    return (f"two rebalances (Gapwatch joining, then leaving) with the eager assignor {assignor or 'range'!r}: "
            f"each time {who} {give_up} {their} partitions and {pause} until the slowest rejoins (at most its "
            "max.poll.interval.ms)")


def seat_needs(*, group_id: str, topic: str, anchor_topic: str) -> str:
    """The ACLs the principal Gapwatch connects as needs to protect the group."""
    return (f"Read on group {group_id!r} (to join and commit), Read on topic {topic!r} (to commit on it), Read on "
            f"Gapwatch's anchor topic {anchor_topic!r} (and Create on it unless it exists)")


PROTECTOR_PREFIX = "gapwatch-protector-"


def is_protector(client_id: str) -> bool:
    """Whether a member is one of Gapwatch's own seats (by its client id)."""
    return client_id.startswith(PROTECTOR_PREFIX)


def protector_client_id(*, what: str) -> str:
    """The client id Gapwatch's member carries, naming Gapwatch and the work
    (``what``: "expansion-12"), as the group's members and the broker see it."""
    return f"{PROTECTOR_PREFIX}{what}"
