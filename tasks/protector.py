"""The standing protection (issue 43, item 4): partitions added behind
Gapwatch's back (``kafka-topics --alter``, Terraform, Strimzi) committed at
their log start before the groups that read the topic take them.

Nothing on the broker can refuse a CreatePartitions, so the partitions can
only be noticed fast and acted on before the groups' own pickup. Joining a
group after the partitions exist mostly loses that race (a classic leader
hands them out in the rebalance the join causes; a KIP-848 join takes a
heartbeat): so the protector keeps a **seat** (``adapters.kafka.Membership``)
in every live group an enabled ``protect`` rule covers, all the time, and
watches the partition counts of the topics those groups read every
PROTECT_WATCH_MS. When a count grows it commits each new partition at
its log start through the seat of every covered group reading the topic,
checks that no member of the group held it, and records a ``Protection``
(won or lost); the watcher's findings on the new partitions are decided
from it, and a lost race leaves the finding to the rule's repair.

One process (``python manage.py protect``), one ``Protector`` per cluster
with protect rules: a seat costs the group one member (a classic group
rebalances when a seat joins or leaves; a KIP-848 group does not) and
Gapwatch one librdkafka consumer (its threads and connections) per group.
The plan of seats is read again every PROTECT_REFRESH_SECONDS.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.utils import timezone

from groups.domain.membership import protector_client_id
from groups.selectors.clusters import cluster_get
from groups.selectors.protection import ProtectTarget, protect_cluster_ids, protect_targets, rule_with_id
from groups.services.protections import protections_record
from adapters.kafka import KafkaUnavailable, Membership, SeatCommit, SeatRequest
from tasks.cluster_client import kafka_client

log = logging.getLogger(__name__)


class Protector:
    """Seats in the covered groups of one cluster, and the watch of their topics."""

    def __init__(self, cluster_id: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        cluster = cluster_get(cluster_id=cluster_id)
        self.cluster = cluster
        self.clock = clock
        config = cluster.cluster_config()
        self.adapter = kafka_client(config)
        self.seats = Membership(config, client_id=protector_client_id(what=f"standing-{cluster.name}"),
                                anchor_topic=settings.PROTECT_ANCHOR_TOPIC, timeout=settings.KAFKA_TIMEOUT_SECONDS)
        self.targets: dict[str, ProtectTarget] = {}
        # topic -> (topic id, partition count) last seen: the baseline a growth is measured from.
        self.counts: dict[str, tuple[str, int]] = {}
        self.refreshed_at: float | None = None
        self.anchor_ready = False
        # What was done, for the tests and the bench: (group, topic, partition, won, seconds from sight to commit).
        self.done: list[tuple[str, str, int, bool, float]] = []

    def close(self) -> None:
        self.seats.leave()

    # -- the plan of seats --------------------------------------------------------------------

    def refresh(self) -> None:
        """Seat the groups the rules cover now, leave those they no longer do."""
        self.refreshed_at = self.clock()
        targets = {t.group_id: t for t in protect_targets(cluster_id=self.cluster.id)}
        if targets and not self.anchor_ready:
            self.seats.ensure_anchor()
            self.anchor_ready = True
        for group_id in set(self.targets) - set(targets):
            self.seats.drop(group_id)
        changed = [t for g, t in targets.items() if g in self.targets
                   and (t.protocol, t.assignor) != (self.targets[g].protocol, self.targets[g].assignor)]
        for target in changed:
            self.seats.drop(target.group_id)
        new = [t for g, t in targets.items() if g not in self.targets] + changed
        self.seats.seat([SeatRequest(t.group_id, t.protocol, t.assignor) for t in new if not t.problem])
        for target in new:
            if target.problem:
                log.warning("standing protection: no seat in group %r: %s", target.group_id, target.problem)
        self.targets = targets
        topics = sorted({topic for t in targets.values() for topic in t.topics})
        for name in set(self.counts) - set(topics):
            del self.counts[name]
        missing = [name for name in topics if name not in self.counts]
        self.counts.update(self.seats.partition_counts(missing))

    # -- the watch ----------------------------------------------------------------------------

    def watch(self) -> None:
        """Partition counts of the covered topics; every growth protected at once."""
        if not self.counts:
            return
        now = self.seats.partition_counts(sorted(self.counts))
        for name, (topic_id, count) in now.items():
            before_id, before = self.counts[name]
            self.counts[name] = (topic_id, count)
            if topic_id == before_id and count > before:
                self.protect(name, topic_id, list(range(before, count)))

    def protect(self, topic: str, topic_id: str, new: list[int]) -> None:
        """Each seated group reading ``topic``: the new partitions committed at
        their log start (0: partitions just created), every group's first, then
        each judged from the broker (the commits race the groups' pickup; the
        judging does not)."""
        seen = self.clock()
        seated = set(self.seats.seated())
        offsets = {(topic, p): 0 for p in new}
        committing = []
        for group_id in sorted(g for g, t in self.targets.items() if topic in t.topics):
            if group_id not in seated:
                log.warning("standing protection: partitions %s of %r added while group %r has no seat (%s): "
                            "its findings and the rule's repair take over", new, topic, group_id,
                            self.targets[group_id].problem or self.seats.why_not_seated(group_id))
            else:
                committing.append(group_id)
        began = self.clock() - seen
        commits = self.seats.commit_each({group_id: offsets for group_id in committing},
                                         within=settings.EXPANSION_COMMIT_SECONDS,
                                         read_back=self.adapter.committed_offsets)
        for group_id, commit in commits.items():
            if commit.why:
                log.warning("standing protection of %r on %r failed: %s", group_id, topic, commit.why)
            else:
                self._judge(group_id, topic, topic_id, new, began + commit.after, commit)

    def _judge(self, group_id: str, topic: str, topic_id: str, new: list[int], took: float,
               commit: SeatCommit) -> None:
        """Won where no member of the group held the partition right after the commit and it read back
        (``commit_each`` read both at once)."""
        at = timezone.now().isoformat(timespec="milliseconds")
        if commit.unjudged:
            log.warning("standing protection of %r on %r: not judged: %s", group_id, topic, commit.unjudged)
        commits = {}
        for p in new:
            key = (topic, p)
            held = "not known (the broker did not answer)" if commit.unjudged else commit.held.get(key)
            won = held is None and commit.read.get(key) == 0
            words = (f"Gapwatch's standing seat ({self.seats.client_id}) committed offset 0, the log start, "
                     f"{took:.3f} s after it saw the partition (recorded at {at}; judged right after the commit), while no member of the group held "
                     "it: whoever takes it starts there (a committed offset wins over auto.offset.reset)" if won else
                     f"Gapwatch's standing seat committed offset 0 {took:.3f} s after it saw the partition, but "
                     f"{held or 'the read-back'!r} disagreed: a member held it already and may have started "
                     "at latest")
            commits[p] = {"offset": 0, "won": won, "words": words}
            self.done.append((group_id, topic, p, won, took))
        protections_record(cluster=self.cluster, group_id=group_id, topic=topic, kafka_topic_id=topic_id,
                           commits=commits, rule=rule_with_id(rule_id=self.targets[group_id].rule_id))

    # -- the loop -----------------------------------------------------------------------------

    def step(self) -> None:
        """One turn: serve the seats (joins, rebalances, heartbeats' callbacks), read the plan when due,
        watch the counts."""
        self.seats.serve(0.0)
        if self.refreshed_at is None or self.clock() - self.refreshed_at >= settings.PROTECT_REFRESH_SECONDS:
            self.refresh()
        self.watch()


def run_protectors(*, stop: Callable[[], bool], clusters: Callable[[], list[int]] | None = None) -> None:
    """The protector process: one ``Protector`` per cluster with an enabled
    protect rule, stepped every PROTECT_WATCH_MS until ``stop()``; a
    cluster away is retried at the next turn, the others go on."""
    clusters = clusters or protect_cluster_ids
    protectors: dict[int, Protector] = {}
    checked = None
    try:
        while not stop():
            started = time.monotonic()
            if checked is None or started - checked >= settings.PROTECT_REFRESH_SECONDS:
                checked = started
                wanted = set(clusters())
                for cluster_id in set(protectors) - wanted:
                    protectors.pop(cluster_id).close()
                for cluster_id in wanted - set(protectors):
                    protectors[cluster_id] = Protector(cluster_id)
            for cluster_id, protector in list(protectors.items()):
                try:
                    protector.step()
                except KafkaUnavailable as error:
                    log.warning("standing protection of cluster %s: %s", protector.cluster.name, error)
            # The protector's own process (manage.py protect), never a worker: pacing its loop holds none.
            time.sleep(max(0.0, settings.PROTECT_WATCH_MS / 1000 - (time.monotonic() - started)))
    finally:
        for protector in protectors.values():
            protector.close()
