"""What the cluster says about a backfill's ranges, before and after its
Spark job (``tasks.backfill.runner`` runs the job between the two):

1. **preflight**: every topic and partition exists (under the topic id the
   plan was made for), every range ends at or below the high watermark; the
   log starts say which offsets already expired (reported, not read);
2. **replay topics** (kafka sink): created when missing, with the source's
   partition count; the principal may Write them (the replay) and Read them
   (the count); where each of their partitions ends before the write;
3. **verifying**: where the sink does not hold every offset of a range
   exactly once, a reader of the group's isolation reads the range again
   (the record count: markers never, aborted records only for
   read_uncommitted), and each offset the sink does not hold is labelled
   (``groups.domain.backfill.explain_missing``) from the log start after the
   job and, above it, what that reader and (read_committed) a
   read_uncommitted reader see. A range the sink holds whole is not read
   again: there is nothing to explain, and the sink got its records from a
   reader of the same isolation (the job's own, ``adapters.spark.reader``).

Every Kafka call goes through the adapter and is retried for a while on
``KafkaUnavailable`` (``_patiently``): a leader moving must not fail a job
whose data is written and waiting to be explained.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from groups.domain.backfill import PreparedRange, explain_missing, partition_report, records_in
from groups.domain.planning import BackfillRange, PlanError
from groups.domain.read_isolation import READ_COMMITTED
from groups.domain.sinks import KAFKA
from adapters.kafka.adapter import AccessRefused, KafkaAdapter, KafkaUnavailable, TopicDetails, missing_acl
from adapters.spark.spec import SinkSpec

# At most this long to read the holes back with both readers when explaining them.
PROBE_SECONDS = 300.0
KAFKA_PATIENCE_SECONDS = 60.0


class ClusterChecks:
    """The checks of one backfill against its cluster. ``topic_ids``: the
    topic ids the plan was made for (optional); ``replay_topics``: the replay
    topic of each source topic, as decided with the sink (kafka); ``deadline``
    (``time.monotonic()``) bounds the verifying reads; ``isolation``: the
    group's, which the job reads with and the records are counted with."""

    def __init__(self, adapter: KafkaAdapter, *, ranges: tuple[BackfillRange, ...], topic_ids: Mapping[str, str],
                 replay_topics: Mapping[str, str], deadline: float, isolation: str = READ_COMMITTED) -> None:
        self.adapter = adapter
        self.isolation = isolation
        self.ranges = ranges
        self.topic_ids = topic_ids
        self.replay_topics = replay_topics
        self.deadline = deadline

    def preflight(self) -> list[PreparedRange]:
        """Check every topic and partition exists (under the planned topic id)
        and every range ends at or below the high watermark; read the log
        starts (offsets below them are expired: reported, not read)."""
        prepared = []
        by_topic: dict[str, list[BackfillRange]] = {}
        for r in self.ranges:
            by_topic.setdefault(r.topic, []).append(r)
        for topic, ranges in sorted(by_topic.items()):
            details = _patiently(lambda: self.adapter.describe_topic(topic))
            if details is None:
                raise PlanError(f"topic {topic!r} does not exist on this cluster")
            if details.may_read is False:
                # Spark's reader would be refused by every fetch; say so before starting it.
                raise AccessRefused(f"topic {topic!r}: {missing_acl('Read', 'topic', topic)} (the backfill's reader "
                                    "fetches its records)", stage="backfill")
            planned_id = self.topic_ids.get(topic)
            if planned_id and details.topic_id and planned_id != details.topic_id:
                raise PlanError(f"topic {topic!r} was deleted and recreated since the plan "
                                f"(topic id {details.topic_id}, planned {planned_id}): its offsets mean other records")
            unknown = sorted(r.partition for r in ranges if r.partition >= details.partitions)
            if unknown:
                raise PlanError(f"topic {topic!r} has no partition {', '.join(map(str, unknown))} "
                                f"(it has {details.partitions})")
            offsets = self._offsets(topic, [r.partition for r in ranges])
            for r in ranges:
                now = offsets[r.partition]
                if r.end > now.high_watermark:
                    raise PlanError(f"{topic}[{r.partition}]: the range ends at {r.end}, beyond the high watermark "
                                    f"{now.high_watermark}: those records do not exist (truncated or recreated?)")
                prepared.append(PreparedRange(r, log_start=now.log_start, high_watermark=now.high_watermark))
        return prepared

    def prepare_replay(self, prepared: list[PreparedRange]) -> SinkSpec:
        """Create missing replay topics with the source's partition count and
        replication factor (partition p is replayed to partition p); read
        where each replay partition ends now, to count this job's records."""
        sources = sorted({p.range.topic for p in prepared})
        undecided = [source for source in sources if source not in self.replay_topics]
        if undecided:
            raise PlanError(f"no replay topic was decided for {', '.join(undecided)}")
        topics = {source: self.replay_topics[source] for source in sources}
        start_offsets: dict[str, dict[str, int]] = {}
        for source, replay in topics.items():
            needed = 1 + max(p.range.partition for p in prepared if p.range.topic == source)
            details = self.adapter.describe_topic(replay)
            if details is None:
                source_details = self.adapter.describe_topic(source)
                self.adapter.create_topic(replay, partitions=source_details.partitions,
                                          replication_factor=source_details.replication_factor)
                details = self._wait_for_topic(replay)
            _may_replay_to(replay, details)
            if details.partitions < needed:
                raise PlanError(f"replay topic {replay!r} has {details.partitions} partitions; partition "
                                f"{needed - 1} of {source!r} needs at least {needed}: raise its partition count")
            offsets = self._offsets(replay, list(range(details.partitions)))
            start_offsets.setdefault(replay, {}).update(
                {str(p): offsets[p].high_watermark for p in range(details.partitions)})
        return SinkSpec(KAFKA, topics=topics, start_offsets=start_offsets)

    def _wait_for_topic(self, topic: str) -> TopicDetails:
        for _ in range(50):
            details = self.adapter.describe_topic(topic)
            if details is not None:
                return details
            time.sleep(0.2)  # in the backfill's driver process (tasks/backfill/driver.py), not a worker
        raise KafkaUnavailable(f"replay topic {topic!r} was created but does not show up", stage="backfill")

    def _offsets(self, topic: str, partitions: list[int]):
        return _patiently(lambda: self.adapter.partition_offsets(topic=topic, partitions=partitions))

    def report_from(self, staged: dict, readable: list[PreparedRange], compacted: dict[str, bool]) -> list[dict]:
        summaries = {(s["topic"], s["partition"]): s for s in staged.get("partitions", [])}
        return self.report(readable, summaries, compacted, probe=True)

    def report(self, prepared: list[PreparedRange], summaries: dict, compacted: dict[str, bool], *,
                probe: bool) -> list[dict]:
        """Per prepared range: log start now; the records a reader of the
        job's isolation reads now from there to the range's end (the count the
        sink must hold, whatever the offsets); then each hole labelled, where
        read_committed needs the other reader only across the holes."""
        log_starts: dict[tuple[str, int], int] = {}
        for topic in sorted({p.range.topic for p in prepared}):
            partitions = [p.range.partition for p in prepared if p.range.topic == topic]
            for partition, offsets in self._offsets(topic, partitions).items():
                log_starts[(topic, partition)] = offsets.log_start
        committed_only = self.isolation == READ_COMMITTED
        report = []
        for p in prepared:
            key = (p.range.topic, p.range.partition)
            summary = summaries.get(key)
            log_start = log_starts[key]
            holes = [tuple(h) for h in summary["holes"]] if summary else []
            counted_from = min(max(p.read_start, log_start), p.range.end)
            seen: list = []
            complete = bool(summary) and _complete(summary, p)
            if complete:
                # Every offset once: nothing to explain, and the sink got each from a reader of this isolation.
                seen = [(counted_from, p.range.end)] if counted_from < p.range.end else []
            elif probe and counted_from < p.range.end:
                seen = self.adapter.visible_runs(topic=key[0], partition=key[1], start=counted_from,
                                                 end=p.range.end, committed_only=committed_only,
                                                 deadline=self.deadline)
            if probe and not complete and key[0] not in compacted:
                compacted[key[0]] = self.adapter.topic_compacted(key[0])
            above = [(max(a, log_start), b) for a, b in holes if b > log_start]
            uncommitted_runs: list = [] if committed_only else seen
            if above and probe and committed_only:
                deadline = min(self.deadline, time.monotonic() + PROBE_SECONDS)
                uncommitted_runs = self.adapter.visible_runs(
                    topic=key[0], partition=key[1], start=above[0][0], end=above[-1][1], committed_only=False,
                    deadline=deadline)
            labelled = explain_missing(holes=holes, log_start=log_start, committed_runs=seen if committed_only else (),
                                       uncommitted_runs=uncommitted_runs, compacted=compacted.get(key[0], False),
                                       isolation=self.isolation)
            report.append(partition_report(p, summary, log_start_after=log_start, labelled=labelled,
                                           records=records_in(seen), isolation=self.isolation,
                                           compacted=compacted.get(key[0], False)))
        extra = [s for k, s in summaries.items() if k not in {(p.range.topic, p.range.partition) for p in prepared}]
        for s in extra:  # records of a partition the job did not ask for
            report.append({"topic": s["topic"], "partition": s["partition"], "start": 0, "end": 0, "offsets": 0,
                           "expected": 0, "delivered": 0, "explained": {}, "unexplained": s["outside_range"],
                           "problems": [f"{s['outside_range']} records of a partition not in the plan"],
                           "missing_ranges": []})
        return report

    def with_unread(self, report: list[dict], readable: list[PreparedRange]) -> list[dict]:
        """Add the partitions that were not read at all (entirely expired)."""
        done = {(p["topic"], p["partition"]) for p in report}
        missing = [r for r in self.ranges if (r.topic, r.partition) not in done]
        if not missing:
            return report
        offsets: dict[tuple[str, int], int] = {}
        for topic in sorted({r.topic for r in missing}):
            for partition, now in self._offsets(topic, [r.partition for r in missing if r.topic == topic]).items():
                offsets[(topic, partition)] = now.log_start
        for r in missing:
            prepared = PreparedRange(r, log_start=offsets[(r.topic, r.partition)], high_watermark=r.end)
            # Entirely expired: no record is left to read, none expected.
            report.append(partition_report(prepared, None, log_start_after=prepared.log_start, labelled=[],
                                           records=0, isolation=self.isolation))
        return sorted(report, key=lambda p: (p["topic"], p["partition"]))


def _complete(summary: dict, prepared: PreparedRange) -> bool:
    """The sink holds each offset of the read range exactly once, nothing else."""
    return (summary["delivered"] == prepared.to_read and not summary["holes"] and not summary["duplicates"]
            and not summary["outside_range"])


def _may_replay_to(replay: str, details: TopicDetails) -> None:
    """Refuse, in words and before Spark starts, a replay topic the principal
    may not Write (Spark's producer would fail its first request with
    "Cluster authorization failed", the idempotent producer's refusal) or
    may not Read (the job counts its records by reading them back)."""
    for operation, allowed, why in (("Write", details.may_write, "the backfill writes the replay to it"),
                                    ("Read", details.may_read, "the backfill reads the replay back to count it")):
        if allowed is False:
            raise AccessRefused(f"replay topic {replay!r}: {missing_acl(operation, 'topic', replay)} ({why})",
                                stage="backfill")


def _patiently(call: Callable, *, seconds: float = KAFKA_PATIENCE_SECONDS):
    """Call again on KafkaUnavailable, with backoff, for up to ``seconds``:
    a leader moving or a broker restarting must not fail a job whose data
    is already written and waiting to be explained."""
    deadline = time.monotonic() + seconds
    wait = 0.1
    while True:
        try:
            return call()
        except AccessRefused:
            raise  # an ACL or a login: asking again does not help
        except KafkaUnavailable:
            if time.monotonic() + wait > deadline:
                raise
            time.sleep(wait)  # the driver's wait (as above), at most KAFKA_PATIENCE_SECONDS in all
            wait = min(wait * 2, 5.0)
