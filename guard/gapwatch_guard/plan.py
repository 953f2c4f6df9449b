"""The guard's rule as a pure function: what to do with the partitions of one
topic that a rebalance just assigned. No Kafka, no Redis.

A partition is *new* when the group has no committed offset on it and it is
not in the group's known-partition set. Telling a group's first start from a
new partition, when Redis holds no set for the topic and group:

- no committed offset on any partition of the topic: the group never consumed
  the topic, this is its first start. Nothing is new; every partition follows
  the consumer's own ``auto.offset.reset`` and all partitions the topic has now
  become the known set (so members joining later agree).
- committed offsets on some partitions: the group consumed the topic before but
  its set is gone (never written, Redis data lost, expired) or the guard was
  just added to a running group. A partition it never committed on may have
  been added since: it is started at the beginning (duplicates, never a loss).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Literal

Basis = Literal["known set", "first start", "no known set, group has commits"]


@dataclass(frozen=True)
class TopicAssignment:
    """What the guard observed for one topic when partitions of it were assigned.

    ``committed_on_topic`` and ``topic_partitions`` are looked up only when
    ``known`` is empty (Redis holds no set); otherwise they are left empty.
    """

    topic: str
    committed: FrozenSet[int]
    uncommitted: FrozenSet[int]
    known: FrozenSet[int]
    committed_on_topic: FrozenSet[int] = frozenset()
    topic_partitions: FrozenSet[int] = frozenset()


@dataclass(frozen=True)
class TopicPlan:
    """``rewind``: start at the log start and report it; ``default``: no commit
    but known, left to ``auto.offset.reset``; ``remember``: add to the known set.
    Partitions with a committed offset are always left alone."""

    topic: str
    rewind: FrozenSet[int]
    default: FrozenSet[int]
    remember: FrozenSet[int]
    basis: Basis


def plan_topic(assignment: TopicAssignment) -> TopicPlan:
    a = assignment
    if a.known:
        # Committed partitions are known by definition; adding them keeps a
        # standalone set close to the control plane's (all but new, uncommitted).
        return TopicPlan(a.topic, rewind=a.uncommitted - a.known, default=a.uncommitted & a.known,
                         remember=a.committed - a.known, basis="known set")
    if not (a.committed_on_topic | a.committed):
        return TopicPlan(a.topic, rewind=frozenset(), default=a.uncommitted,
                         remember=a.topic_partitions | a.uncommitted, basis="first start")
    return TopicPlan(a.topic, rewind=a.uncommitted, default=frozenset(),
                     remember=a.committed_on_topic | a.committed, basis="no known set, group has commits")
