"""The expansion job (issue 33, item 4): one approved plan carried out,
step by step (``groups.domain.expansion.job.STEPS``), on a worker.

Each step records its completion in the job row before the next starts
(``expansion_record_step``), so a run after a crash continues at the first
step not done; every step is written to be run again safely:

- a share group's previous ``share.auto.offset.reset`` is written to the job
  row *before* it is changed, so no crash leaves it changed without a record;
- partitions are added only while the topic still has the planned count (a
  crash after CreatePartitions finds them there);
- an empty group is committed only while it is still empty.

Nothing waits inside a worker (issue 42): a run carries out steps until one
must wait (a group still picking partitions up, a backfill not verified yet)
or the broker is away, records why, and ends; the next run comes as a
message with a countdown of one watcher interval, carrying a token the job
row names (``expansion_pass_run``), so a replaced chain's message ends at
once. One run works on a job at a time (a PostgreSQL advisory lock: a dead
worker's frees itself); ``recover_expansions`` starts a new chain for a
``running`` job whose lock is free and that no run touched for
EXPANSION_STALL_SECONDS (its message was lost with a killed worker), at
every worker's start and on beat.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from groups.domain.finding_states import MISSED_DECIDED, PENDING, UNDECIDED
from groups.domain.expansion.job import (
    STEPS,
    GroupFacts,
    PartitionFacts,
    group_verdict,
    job_final_status,
    next_step,
)
from groups.models import ExpansionJob, Finding, RemediationJob
from groups.selectors.expansion import expansion_findings, expansion_jobs_to_resume
from groups.selectors.jobs import expansion_job_to_run, job_statuses
from groups.services.cadence import tick_counts
from groups.services.expansion.job import (
    expansion_finish,
    expansion_holds_run,
    expansion_pass_run,
    expansion_record_attempt,
    expansion_record_decision,
    expansion_record_protection,
    expansion_record_reason,
    expansion_record_step,
    expansion_start,
)
from groups.services.preapproved import NotCountedYet, queue_preapproved_backfill, sound_range_offsets
from tasks.job_lock import EXPANSION_NAMESPACE, job_lock, job_lock_free
from groups.domain.membership import protector_client_id
from adapters.kafka import AccessRefused, GroupNotEmpty, KafkaAdapter, KafkaUnavailable, Membership, SeatCommit, SeatRequest
from adapters.kafka.java_admin import JavaAdmin
from tasks.cluster_client import java_client, kafka_client

log = logging.getLogger(__name__)
Status = ExpansionJob.Status
# Consecutive failed attempts at one step (the broker away) before the job stops, saying what it left.
MAX_ATTEMPTS = 30
# What a run returns when the job waits: the next run comes as a message (``run_expansion``).
WAITING = "waiting"


class Waiting(Exception):
    """The step cannot finish yet (a group still picking partitions up, a backfill running): try again at the next tick."""


class Refused(Exception):
    """The step can never succeed as planned: the job stops and says what it left undone."""


def _decided(finding: Finding | None) -> bool:
    """Whether the watcher decided where the group started on the partition (or closed the finding)."""
    return finding is not None and (finding.closed_at is not None or finding.state not in (PENDING, UNDECIDED))


def _since(moment: str | None) -> float:
    return (timezone.now() - datetime.fromisoformat(moment)).total_seconds() if moment else 0.0


class ExpansionRunner:
    """Runs one expansion job's steps, from the first not done."""

    def __init__(self, job_id: int, *, tick: Callable[[int], object]) -> None:
        self.job_id = job_id
        self.tick = tick
        job = expansion_job_to_run(job_id=job_id)
        self.topic = job.topic.name
        self.cluster_id = job.cluster_id
        self.config = job.cluster.cluster_config()
        self.adapter = self.new_adapter()
        self._share: JavaAdmin | None = None

    def new_adapter(self) -> KafkaAdapter:
        """A fresh client: librdkafka's admin client keeps the topic's metadata from before the
        partitions were added, and answers "no leaders found" for them until its next refresh."""
        return kafka_client(self.config)

    @property
    def share(self) -> JavaAdmin:
        if self._share is None:
            self._share = java_client(self.config)
        return self._share

    def close(self) -> None:
        if self._share is not None:
            self._share.close()

    def job(self) -> ExpansionJob:
        return expansion_job_to_run(job_id=self.job_id)

    def run(self) -> str:
        """Steps from the first not done, until the job ends (its status) or
        must wait (``WAITING``, the reason recorded): never a sleep."""
        while True:
            job = self.job()
            if job.status != Status.RUNNING:
                return job.status
            step = next_step(job.steps)
            if step is None:  # every step recorded, the end not written (a crash right before it)
                step = "verdict"
            try:
                detail = getattr(self, f"step_{step}")(job)
            except Waiting as waiting:
                expansion_record_reason(job_id=self.job_id, reason=f"{step}: {waiting}")
                return WAITING
            except (Refused, AccessRefused) as refused:
                return self.fail(step, str(refused))
            except KafkaUnavailable as error:
                attempts = expansion_record_attempt(job_id=self.job_id, reason=f"{step}: retrying: {error}")
                if attempts >= MAX_ATTEMPTS:
                    return self.fail(step, f"{MAX_ATTEMPTS} attempts failed, the last: {error}")
                return WAITING
            if step == "verdict":
                return self.job().status
            expansion_record_step(job_id=self.job_id, step=step, detail=detail)

    # -- the steps ----------------------------------------------------------------------------

    def new_partitions(self, job: ExpansionJob) -> list[int]:
        return list(range(job.from_partitions, job.to_partitions))

    def step_validate(self, job: ExpansionJob) -> dict:
        verdict = self.adapter.validate_partitions(self.topic, job.to_partitions)
        if not verdict.accepted:
            raise Refused(f"the broker refuses the expansion now: {verdict.reason}; nothing was changed")
        return {"accepted": True, "reason": verdict.reason}

    def _share_protected(self, job: ExpansionJob) -> list[str]:
        return sorted(g for g, d in job.decisions.items() if d["outcome"] == "protected_before" and d["kind"] == "share")

    def step_protect(self, job: ExpansionJob) -> dict:
        """Each share group to protect: its previous value recorded, then set to earliest, then read back."""
        done = []
        for group_id in self._share_protected(job):
            protection = job.decisions[group_id].get("protection") or {}
            if "previous" not in protection:
                current = self.share.auto_offset_resets([group_id])[group_id]
                expansion_record_decision(job_id=self.job_id, group_id=group_id, audit="protection_recorded",
                                          protection={"previous": current.value, "explicit": current.explicit,
                                                      "applied": False, "undone": False})
            if not protection.get("applied"):
                self.share.set_auto_offset_reset(group_id=group_id, value="earliest")
                now = self.share.auto_offset_resets([group_id])[group_id]
                if now.value != "earliest":
                    raise KafkaUnavailable(f"share group {group_id!r} still reads {now.value} after the change",
                                           bootstrap_servers=self.config.bootstrap_servers, stage="protect")
                expansion_record_decision(job_id=self.job_id, group_id=group_id, audit="protected",
                                          protection={"applied": True})
            done.append(group_id)
        return {"share_groups": done}

    def _member_groups(self, job: ExpansionJob) -> list[str]:
        """Live groups to protect by membership that no run protected yet."""
        return sorted(g for g, d in job.decisions.items()
                      if d["outcome"] == "protected_before" and d.get("method") == "membership"
                      and "fallback" not in d and not (d.get("membership") or {}).get("partitions"))

    def _fall_back(self, group_id: str, why: str) -> None:
        expansion_record_decision(job_id=self.job_id, group_id=group_id, audit="fallback", outcome="repaired_after",
                                  fallback=f"{why}: its repair after instead")

    def step_add_partitions(self, job: ExpansionJob) -> dict:
        """Join, add, commit, leave (issue 43): Gapwatch takes a seat in every
        live group to protect, adds the partitions, commits each new one at
        its log start through each seat, checks that no member of the group
        held it then, and leaves, each step recorded before the next. The
        seats are held by this run, on the jobs worker, for at most
        EXPANSION_JOIN_SECONDS plus the add and the commits; a worker that
        dies meanwhile leaves them to their session timeouts (classic: 10 s,
        30 s inside a rebalance; KIP-848: the broker's, 45 s by default), and
        the next run protects what is left (a partition taken meanwhile is
        then lost to the protection and repaired after)."""
        details = self.adapter.describe_topic(self.topic)
        if details is None:
            raise Refused(f"topic {self.topic!r} no longer exists")
        if details.partitions not in (job.from_partitions, job.to_partitions):
            raise Refused(f"the topic has {details.partitions} partitions, neither the planned {job.from_partitions} "
                          f"nor {job.to_partitions}: someone else changed it; no partitions were added")
        groups = self._member_groups(job)
        if not groups:
            return self._add(job, details.partitions)
        client_id = protector_client_id(what=f"expansion-{job.id}")
        with Membership(self.config, client_id=client_id, anchor_topic=settings.PROTECT_ANCHOR_TOPIC,
                        timeout=settings.KAFKA_TIMEOUT_SECONDS) as seats:
            requests = []
            for group_id in groups:
                status = self.adapter.describe_group(group_id=group_id)
                if status.inactive:
                    expansion_record_decision(job_id=self.job_id, group_id=group_id, audit="protection_changed",
                                              method="commit", membership={"emptied": "no members at the join: "
                                                                           "an administrative commit instead"})
                    continue
                requests.append(SeatRequest(group_id=group_id, protocol=status.type, assignor=status.assignor))
            try:
                seats.ensure_anchor()
                refused = seats.join(requests, within=settings.EXPANSION_JOIN_SECONDS) if requests else {}
            except KafkaUnavailable as error:
                refused = {r.group_id: str(error) for r in requests}
            for group_id, why in sorted(refused.items()):
                self._fall_back(group_id, f"Gapwatch could not join the group: {why}")
            seated = [r.group_id for r in requests if r.group_id not in refused]
            for group_id in seated:
                expansion_record_decision(
                    job_id=self.job_id, group_id=group_id, audit="joined",
                    membership={"client_id": client_id, "member_id": seats.member_id(group_id),
                                "joined_after_seconds": round(seats.joined_after(group_id) or 0.0, 3)})
            added = self._add(job, details.partitions)
            new = self.new_partitions(job)
            # A partition just created starts at 0; after a crashed run, what retention left.
            starts = ({p: 0 for p in new} if added["added"] else
                      {p: o.log_start for p, o in self.adapter.partition_offsets(topic=self.topic,
                                                                                  partitions=new).items()})
            committing = list(seated)
            if not added["added"]:
                # A run after a crash: a group that took the partitions meanwhile is not committed (that
                # would rewind a member's position to the log start): the race was lost, say so.
                for group_id in seated:
                    held = seats.holders(group_id, self.topic, new)
                    if held:
                        committing.remove(group_id)
                        self._fall_back(group_id, f"the protection lost the race on partition(s) {sorted(held)}: "
                                                  f"{sorted(set(held.values()))[:3]} held them before this run could "
                                                  "commit (the run that added them stopped first)")
            # Every group's commit at once (they race the groups' pickup), then each judged.
            offsets = {(self.topic, p): starts[p] for p in new}
            began = timezone.now()
            commits = seats.commit_each({group_id: offsets for group_id in committing},
                                        within=settings.EXPANSION_COMMIT_SECONDS,
                                        read_back=self.adapter.committed_offsets)
            for group_id in committing:
                self._judge_seated(group_id, new, starts, client_id, commits[group_id], began)
            left = seats.leave()
        for group_id in seated:
            expansion_record_decision(job_id=self.job_id, group_id=group_id, audit="left",
                                      membership={"left": not left.get(group_id),
                                                  **({"leave_error": left[group_id]} if left.get(group_id) else {})})
        return {**added, "seated": seated, "not_seated": sorted(refused)}

    def _judge_seated(self, group_id: str, new: list[int], starts: dict[int, int], client_id: str,
                      commit: SeatCommit, began: datetime) -> None:
        """Judge one group's commit of each new partition's log start from
        what the broker said right after it (``commit_each``): won where it
        read back and no member of the group held the partition then."""
        if commit.why:
            self._fall_back(group_id, f"Gapwatch joined but its commit failed: {commit.why}")
            return
        at = (began + timedelta(seconds=commit.after)).isoformat(timespec="milliseconds")
        commits = {}
        for p in new:
            offset, key = starts[p], (self.topic, p)
            if commit.unjudged:
                won, words = False, (f"Gapwatch committed offset {offset} at {at} as a member ({client_id}), but "
                                     f"who held the partition could not be read: {commit.unjudged}")
            elif key in commit.held:
                won, words = False, (f"Gapwatch committed offset {offset} at {at} as a member ({client_id}), but "
                                     f"{commit.held[key]!r} held the partition already: it may have started at latest")
            elif commit.read.get(key) != offset:
                won, words = False, (f"Gapwatch committed offset {offset} at {at} as a member ({client_id}), but "
                                     f"the group's commit read back {commit.read.get(key)}")
            else:
                won, words = True, (f"Gapwatch, as a member of the group ({client_id}), committed offset {offset}, "
                                    f"the log start, at {at}, while no member of the group held the partition: "
                                    "whoever takes it starts there (a committed offset wins over auto.offset.reset)")
            commits[p] = {"offset": offset, "won": won, "words": words}
        expansion_record_protection(job_id=self.job_id, group_id=group_id, commits=commits)
        lost = [p for p in new if not commits[p]["won"]]
        if lost and commit.unjudged:
            self._fall_back(group_id, f"the protection of partition(s) {lost} could not be judged (who held them "
                                      f"was not read: {commit.unjudged})")
        elif lost:
            self._fall_back(group_id, f"the protection lost the race on partition(s) {lost} (a member held them "
                                      "before Gapwatch's commit)")

    def _add(self, job: ExpansionJob, partitions: int) -> dict:
        if partitions == job.to_partitions:
            return {"added": False, "words": f"the topic has {job.to_partitions} partitions already (added by an "
                                             "earlier run of this job)"}
        self.adapter.add_partitions(self.topic, job.to_partitions)
        self.adapter = self.new_adapter()
        return {"added": True, "words": f"{job.from_partitions} → {job.to_partitions} partitions"}

    def step_commit_empty(self, job: ExpansionJob) -> dict:
        """Each empty consumer group committed at the new partitions' log start, only while still empty."""
        new = self.new_partitions(job)
        groups = sorted(g for g, d in job.decisions.items()
                        if d["outcome"] == "protected_before" and d["kind"] != "share"
                        and d.get("method") != "membership"
                        and "committed" not in d and "fallback" not in d)
        if not groups:
            return {"committed": []}
        starts = {p: offsets.log_start for p, offsets in
                  self.adapter.partition_offsets(topic=self.topic, partitions=new).items()}
        committed = []
        for group_id in groups:
            status = self.adapter.describe_group(group_id=group_id)
            came_back = None if status.inactive else f"{status.member_count} member(s), {status.state}"
            if came_back is None:
                try:
                    self.adapter.alter_group_offsets(group_id=group_id,
                                                     offsets={(self.topic, p): starts[p] for p in new})
                except GroupNotEmpty as error:
                    came_back = str(error)
            if came_back is not None:
                expansion_record_decision(
                    job_id=self.job_id, group_id=group_id, audit="fallback", outcome="repaired_after",
                    fallback=f"a member came back before the commit ({came_back}): its repair instead")
                continue
            read = self.adapter.committed_offsets(group_id=group_id, partitions=[(self.topic, p) for p in new])
            expansion_record_decision(job_id=self.job_id, group_id=group_id, audit="committed",
                                      committed={str(p): read[(self.topic, p)] for p in new},
                                      log_starts={str(p): starts[p] for p in new})
            committed.append(group_id)
        return {"committed": committed}

    def _tick(self) -> None:
        """A watcher tick now (``tick``: the one beat sends every WATCH_INTERVAL_SECONDS) when the
        watch's own ticks stopped (none arrived within two intervals: beat not running), so the job
        sees the new partitions' pickups at the watcher's pace either way; with the watch running, a
        tick of the job's would only contend for the cluster's lock with beat's."""
        last = tick_counts(cluster_id=self.cluster_id)["last"]
        if last is None or time.time() - last > 2 * settings.WATCH_INTERVAL_SECONDS:
            self.tick(self.cluster_id)

    def step_watch(self, job: ExpansionJob) -> dict:
        """Until every protected share group initialised the new partitions and its findings on them
        are decided (then its config is restored: a finding decided after the restore would be
        judged under ``latest``, and its first start offset, already moved on by acknowledgements
        under a slow poll, read as a late start), and every repaired-after group's finding on them
        is decided."""
        new = self.new_partitions(job)
        self._tick()
        over = _since(job.steps.get("add_partitions", {}).get("done_at")) > settings.EXPANSION_WATCH_SECONDS
        findings = expansion_findings(job=job)
        waiting = []
        for group_id in self._share_protected(job):
            protection = job.decisions[group_id].get("protection") or {}
            if protection.get("undone") or not protection.get("applied"):
                continue
            starts = self.share.start_offsets_of(group_id=group_id, partitions=[(self.topic, p) for p in new])
            missing = [p for p in new if starts[(self.topic, p)] is None]
            if missing and not over:
                waiting.append(f"share group {group_id!r} has not initialised partition(s) {missing}")
                continue
            deciding = [p for p in new if not _decided(findings.get((group_id, p)))]
            if deciding and not over:
                waiting.append(f"share group {group_id!r}: start not decided yet on partition(s) {deciding}")
                continue
            self.restore(group_id, protection)
            expansion_record_decision(
                job_id=self.job_id, group_id=group_id, audit="restored",
                protection={"undone": True, "starts": {str(p): starts[(self.topic, p)] for p in new},
                            **({"restored_early": f"restored after {settings.EXPANSION_WATCH_SECONDS} s with "
                                                  f"partition(s) {missing} not initialised"} if missing else {})})
        undecided = []
        for group_id, decision in sorted(job.decisions.items()):
            if decision["outcome"] not in ("repaired_after", "left_alone") and decision.get("method") != "membership":
                continue
            for p in new:
                finding = findings.get((group_id, p))
                if not _decided(finding):
                    undecided.append(f"{group_id!r} [{p}]: {finding.state if finding else 'not seen yet'}")
        if undecided and not over:
            waiting.append(f"start not decided yet for {', '.join(undecided[:5])}"
                           + (f" and {len(undecided) - 5} more" if len(undecided) > 5 else ""))
        if waiting:
            raise Waiting("; ".join(waiting))
        return {"undecided": undecided, "gave_up_after_seconds": settings.EXPANSION_WATCH_SECONDS if over else None}

    def restore(self, group_id: str, protection: dict) -> None:
        """The share group's config as it was: its own previous value, or none (the broker's default)."""
        self.share.set_auto_offset_reset(group_id=group_id,
                                         value=protection["previous"] if protection.get("explicit") else None)

    def step_backfills(self, job: ExpansionJob) -> dict:
        """Each repaired-after group's decided findings: the pre-approved backfill queued, within its maximum."""
        findings = expansion_findings(job=job)
        queued, left, counting = 0, 0, []
        # A range past its maximum in offsets waits for its record count (a poll makes it) as long as
        # the job waits for its backfills' verification, then is left for a person.
        over = _since(job.steps.get("watch", {}).get("done_at")) > settings.EXPANSION_VERIFY_SECONDS
        for group_id, decision in sorted(job.decisions.items()):
            if decision["outcome"] != "repaired_after":
                continue
            recorded = dict(decision.get("backfills") or {})
            for p in self.new_partitions(job):
                finding = findings.get((group_id, p))
                if str(p) in recorded or finding is None or finding.state not in MISSED_DECIDED:
                    continue
                if sound_range_offsets(finding) == 0:
                    entry = {"offsets": 0}
                elif not decision.get("sink"):
                    entry = {"left": f"no sink can take the repair: {decision.get('sink_problem') or 'none chosen'}"}
                else:
                    try:
                        backfill, why = queue_preapproved_backfill(
                            finding=finding, sink=decision["sink"], sink_params=decision.get("sink_params") or {},
                            max_records=decision.get("max_records"), origin=f"expansion {job.id}")
                    except NotCountedYet as waiting:
                        if not over:
                            counting.append(f"{group_id} partition {p}: {waiting}")
                            continue
                        backfill, why = None, (f"{waiting}; no count came within "
                                               f"{settings.EXPANSION_VERIFY_SECONDS} s: left for a person")
                    entry = {"job": backfill.id, "finding": finding.id} if backfill else {"left": why}
                entry["offsets"] = sound_range_offsets(finding)
                queued += "job" in entry
                left += "left" in entry
                recorded[str(p)] = entry
                expansion_record_decision(job_id=self.job_id, group_id=group_id, backfills=recorded,
                                          audit="backfill_queued" if "job" in entry else "")
        if counting:
            raise Waiting("; ".join(counting[:5]) + (f" and {len(counting) - 5} more" if len(counting) > 5 else ""))
        return {"queued": queued, "left": left}

    def step_verify(self, job: ExpansionJob) -> dict:
        ids = [entry["job"] for d in job.decisions.values() for entry in (d.get("backfills") or {}).values()
               if "job" in entry]
        statuses = job_statuses(job_ids=ids)
        running = sorted(i for i in ids if statuses.get(i) not in RemediationJob.FINISHED)
        over = _since(job.steps.get("backfills", {}).get("done_at")) > settings.EXPANSION_VERIFY_SECONDS
        if running and not over:
            raise Waiting(f"backfill job(s) {running} not verified yet")
        return {"jobs": {str(i): statuses.get(i) for i in ids}, "unfinished": running}

    def step_verdict(self, job: ExpansionJob) -> dict:
        new = self.new_partitions(job)
        log_starts = {p: offsets.log_start for p, offsets in
                      self.adapter.partition_offsets(topic=self.topic, partitions=new).items()}
        findings = expansion_findings(job=job)
        verdicts = [group_verdict(self._facts(group_id, decision, new, log_starts, findings))
                    for group_id, decision in sorted(job.decisions.items())]
        expansion_finish(job_id=self.job_id, status=job_final_status(verdicts),
                         verdicts={v.group_id: v.as_dict() for v in verdicts})
        return {}

    def _facts(self, group_id: str, decision: dict, new: list[int], log_starts: dict[int, int],
               findings: dict) -> GroupFacts:
        protection = decision.get("protection") or {}
        committed = decision.get("committed") or {}
        # A share group's start offset moves on as it acknowledges records: the one seen at the restore
        # bounds its start from above only. Where the watcher decided the group's finding (under
        # earliest: the restore waits for it), that decision says whether it missed any.
        share_starts = protection.get("starts") or {}
        backfills = decision.get("backfills") or {}
        jobs = {entry["job"]: entry for entry in backfills.values() if "job" in entry}
        status = job_statuses(job_ids=jobs)
        problems = []
        if protection.get("applied") and not protection.get("undone"):
            problems.append(f"its share.auto.offset.reset is still earliest (it was {protection.get('previous')})")
        if protection.get("restored_early"):
            problems.append(protection["restored_early"])
        if decision.get("fallback"):
            problems.append(decision["fallback"])
        partitions = []
        for p in new:
            finding = findings.get((group_id, p))
            missed, repaired, left = None, False, ""
            if finding is not None and finding.state in (Finding.State.GAP, Finding.State.EXPIRED,
                                                         Finding.State.UNDECIDED):
                start = finding.backfill_start if finding.backfill_start is not None else finding.first_log_start
                end = (finding.backfill_end if finding.backfill_end is not None
                       else start + finding.missed_definite + finding.missed_possible)
                missed = (start, end)
                repaired = finding.resolution == Finding.Resolution.REPAIRED
                entry = backfills.get(str(p)) or {}
                if entry.get("left"):
                    left = entry["left"]
                elif "job" in entry and status.get(entry["job"]) != RemediationJob.Status.SUCCEEDED:
                    left = f"backfill job {entry['job']} is {status.get(entry['job'])}"
                elif finding.state == Finding.State.UNDECIDED:
                    left = "its start was not decided by the end of the watch (no first commit seen)"
                elif finding.state == Finding.State.EXPIRED:
                    left = "retention deleted the range before it was replayed"
                elif decision["outcome"] == "left_alone":
                    left = "left alone, as the approver chose: no repair ran"
                elif decision["outcome"] != "repaired_after":
                    left = f"{decision['outcome'].replace('_', ' ')} in the plan, but the group missed it"
            protected = ((decision.get("membership") or {}).get("partitions") or {}).get(str(p)) or {}
            if protected.get("won"):
                start_seen = protected["offset"]
            elif str(p) in committed:
                start_seen = committed[str(p)]
            elif _decided(finding):
                start_seen = None
            else:
                start_seen = share_starts.get(str(p))
            partitions.append(PartitionFacts(partition=p, log_start=log_starts.get(p, 0), start=start_seen,
                                             missed=missed, repaired=repaired, left=left,
                                             assumed=missed is not None and finding.policy_source == "assumed"))
        return GroupFacts(group_id=group_id, outcome=decision["outcome"], partitions=tuple(partitions),
                          method=decision.get("method") or "", sink=decision.get("sink") or "",
                          problem="; ".join(problems))

    # -- stopping ------------------------------------------------------------------------------

    def fail(self, step: str, why: str) -> str:
        """Stop at ``step``: every protection still applied is restored first
        (or said not to be), and each group's verdict says what was left undone."""
        job = self.job()
        undone = [s for s in STEPS if s not in job.steps]
        verdicts = {}
        for group_id, decision in sorted(job.decisions.items()):
            protection = decision.get("protection") or {}
            words = f"not decided: the job stopped at {step} ({why})"
            if protection.get("applied") and not protection.get("undone"):
                try:
                    self.restore(group_id, protection)
                    expansion_record_decision(job_id=self.job_id, group_id=group_id, audit="restored",
                                              protection={"undone": True})
                    words += "; its share.auto.offset.reset was restored"
                except KafkaUnavailable as error:
                    words += (f"; its share.auto.offset.reset is still earliest and could not be restored to "
                              f"{protection.get('previous')!r} ({error}): restore it by hand")
            verdicts[group_id] = {"nothing_lost": None, "words": words, "unrepaired": []}
        expansion_finish(job_id=self.job_id, status=Status.FAILED, verdicts=verdicts,
                         error=f"{step}: {why}; steps not done: {', '.join(undone)}")
        return Status.FAILED


def run_expansion(job_id: int, *, tick: Callable[[int], object], token: str | None = None,
                  again: Callable[[int, str], object] | None = None) -> str:
    """One run of an expansion job under its lock: start it (approved →
    running) or resume it, carry out steps until it ends or must wait, and
    then hand the next run to ``again(job_id, token)`` (a message with a
    countdown). ``token``: the chain's, None for a fresh start (approval,
    recovery), which takes the job over. A second delivery while another run
    holds the lock, or a message of a replaced chain, returns at once."""
    with job_lock(job_id, EXPANSION_NAMESPACE) as locked:
        if not locked:
            return "another worker runs it"
        if not expansion_holds_run(job_id=job_id, token=token):
            return "another chain runs it"
        if not expansion_start(job_id=job_id):
            return "not running"
        runner = ExpansionRunner(job_id, tick=tick)
        try:
            outcome = runner.run()
        finally:
            runner.close()
        if outcome == WAITING and again is not None:
            following = uuid.uuid4().hex
            if expansion_pass_run(job_id=job_id, token=token, to=following):
                again(job_id, following)
        return outcome


def expansions_to_resume(*, stalled_only: bool = True) -> list[int]:
    """Expansion jobs left ``running`` that no run touched for
    EXPANSION_STALL_SECONDS (``stalled_only`` False: any) and whose lock is
    free (their next run's message went with a killed worker), and
    ``approved`` ones whose message was lost."""
    stalled_before = timezone.now() - timedelta(seconds=settings.EXPANSION_STALL_SECONDS if stalled_only else 0)
    return [job_id for job_id in expansion_jobs_to_resume(stalled_before=stalled_before)
            if job_lock_free(job_id, EXPANSION_NAMESPACE)]
