"""Team scopes (issue 23, item 4), the pure rule: what a grant lets a person
see and do.

A ``Grant`` is a role (viewer: read; approver: read and act) limited to
clusters (names or glob patterns; none = every cluster) and to one glob
pattern each for group ids and topic names (``*`` = all). A person holds
the grants of their role mappings (people of a directory) or one unlimited
grant per role (local accounts, superusers).

- A finding, a job or a lag row is about (cluster, group, topic): a grant
  covers it when all three match.
- A group alone (its page, its row in a list) is covered when its cluster
  and group id match; a topic alone when its cluster and name match.
- Acting needs an approver grant that covers it; reading any grant.
- Managing clusters (adding one, changing its settings) needs an approver
  grant limited in nothing: a team's approver may not change the cluster
  every other team reads.

Patterns have two wildcards, ``*`` (any run of characters) and ``?`` (one),
everything else literal, matched on the whole name and case-sensitively
(Kafka names are): ``payments-*`` matches ``payments-eu`` but not
``Payments-eu`` nor ``old-payments-eu``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

VIEWER, APPROVER = "viewer", "approver"
ANY = "*"


@dataclass(frozen=True)
class Grant:
    role: str
    clusters: tuple[str, ...] = ()  # empty: every cluster
    groups: str = ANY
    topics: str = ANY
    source: str = ""  # what gave it, for the audit log ("role mapping 3: payments-oncall")

    @property
    def unlimited(self) -> bool:
        return not self.clusters and self.groups == ANY and self.topics == ANY

    def describe(self) -> str:
        where = ", ".join(self.clusters) if self.clusters else "every cluster"
        return f"{self.role} on {where}, groups {self.groups}, topics {self.topics}"


def matches(pattern: str, name: str) -> bool:
    return re.fullmatch(glob_to_regex(pattern), name, flags=re.DOTALL) is not None


def _cluster_matches(grant: Grant, cluster: str) -> bool:
    return not grant.clusters or any(matches(pattern, cluster) for pattern in grant.clusters)


def _may(grant: Grant, role: str) -> bool:
    return role == VIEWER or grant.role == APPROVER


def covering(grants: Iterable[Grant], role: str, *, cluster: str, group: str | None = None,
             topic: str | None = None) -> Grant | None:
    """The first grant that lets its holder ``role`` (viewer: read; approver:
    act) on (cluster, group, topic); a None group or topic is not checked
    (a topic's page has no group, a group's page no topic)."""
    for grant in grants:
        if (_may(grant, role) and _cluster_matches(grant, cluster)
                and (group is None or matches(grant.groups, group))
                and (topic is None or matches(grant.topics, topic))):
            return grant
    return None


def may_manage_clusters(grants: Iterable[Grant]) -> bool:
    return any(grant.role == APPROVER and grant.unlimited for grant in grants)


def sees_everything(grants: Iterable[Grant]) -> bool:
    return any(grant.unlimited for grant in grants)


@functools.lru_cache(maxsize=1024)
def glob_to_regex(pattern: str) -> str:
    """A pattern as an anchored regular expression that Python's ``re`` and
    PostgreSQL's ``~`` read alike (lists are filtered in the database, single
    objects here, by the same expression): ``*`` any run of characters, ``?``
    one, everything else literal (escaped). Cached: a scoped scrape of
    /metrics asks for the same few patterns once per series."""
    return "^" + "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern) + "$"
