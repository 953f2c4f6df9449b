"""The shapes of the JSON API: what it reads from the ORM and answers, and the
bodies and filters it accepts. django-ninja generates the OpenAPI document at
/api/v1/schema from these; tests/integration/test_api.py validates real
answers against it.

Over 400 lines on purpose: one shape per answer and body, most a few lines,
sharing the strict field types declared at the top; split by endpoint they
would import those types back and forth.
"""


from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import AfterValidator, ConfigDict, PlainSerializer, StrictBool, StrictInt, StrictStr, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError, PydanticUseDefault

from groups.domain import detection
from groups.domain.expansion import plan as expansion
from groups.domain.group_kinds import GROUP_KINDS, group_kind
from groups.domain.planning import BACKFILL_UNTIL
from groups.domain.replay_topics import replay_topic_for
from groups.domain.sinks import JOB_SINKS
from groups.models import Cluster, ConsumerGroup, ExpansionJob, Finding, RemediationJob
from groups.services.bulk import MAX_BULK_FINDINGS

# ISO 8601 with the offset as Python writes it ("+00:00"), as the API always has.
IsoDateTime = Annotated[datetime, PlainSerializer(lambda moment: moment.isoformat(), return_type=str),
                        WithJsonSchema({"type": "string", "format": "date-time"})]

def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL: refused here too, not only by controlplane's middleware.
    if "\x00" in value:
        raise PydanticCustomError("nul", "must not contain a NUL byte (\\x00)")
    return value


Text = Annotated[StrictStr, AfterValidator(_no_nul)]
INT64_MAX = 2**63 - 1
# Kafka offsets and timestamps are 64-bit; strict: 2.7, true, 1e400 or "5" are not one.
Int64 = Annotated[StrictInt, Field(ge=-(2**63), le=INT64_MAX)]
RowId = Annotated[StrictInt, Field(ge=1, le=INT64_MAX)]
# A path segment is text: its digits are the id.
PathId = Annotated[int, Field(ge=1, le=INT64_MAX)]

FindingState = Literal[tuple(Finding.State.values)]
JobStatus = Literal[RemediationJob.STATUSES]
ExpansionStatus = Literal[ExpansionJob.STATUSES]
JobKind = Literal[tuple(RemediationJob.Kind.values)]
GroupKind = Literal[GROUP_KINDS]
_GROUP_KIND = ("The group's kind: classic, consumer (KIP-848), share (KIP-932), streams (KIP-1071), connect (a "
               "classic or consumer group whose id starts with connect-: a Kafka Connect sink), or unknown (not "
               "yet described by a poll).")
_CLOSED = ConfigDict(json_schema_extra={"additionalProperties": False})


class BlankIsAbsent(Schema):
    """Query filters: an empty parameter counts as absent (``?cluster=&state=``)."""

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_default(cls, value: Any) -> Any:
        if value == "":
            raise PydanticUseDefault()
        return value


# --- Answers -------------------------------------------------------------------------


class Error(Schema):
    model_config = _CLOSED
    error: str
    parameter: str | None = Field(None, description="The parameter at fault, on a 400 for bad input.")


class DuplicateError(Schema):
    model_config = _CLOSED
    error: str
    job: int = Field(description="The active job that already covers the finding.")


class FindingOut(Schema):
    """One partition a group may have missed messages on. Offsets are the next
    message to read; ranges are half-open [start, end)."""

    model_config = _CLOSED
    id: int
    cluster: str = Field(alias="cluster.name", description="Cluster name.")
    topic: str = Field(alias="topic.name", description="Topic name.")
    partition: int
    group: str = Field(alias="group.group_id", description="Consumer group id, verbatim.")
    group_type: GroupKind = Field(description=_GROUP_KIND)
    generation: int = Field(alias="generation.number", description="The partition generation that added it.")
    state: FindingState
    found_at: IsoDateTime = Field(alias="created_at", description="When the finding was opened.")
    updated_at: IsoDateTime
    closed_at: IsoDateTime | None = Field(description="Null while the finding is open.")
    closed_reason: str
    log_start_offset: int = Field(description="Log start offset at the last poll.")
    high_watermark: int = Field(description="High watermark at the last poll.")
    committed_offset: int | None = Field(description="The group's committed offset; null if it has none.")
    lag: int = Field(description=(
        "Stored messages the group will still read: high watermark minus the committed offset, or minus the "
        "log start when it has no commit or retention passed it; never below 0."))
    missed_definite: int = Field(description=(
        "A bound: messages the group certainly never read, [first log start, high watermark at the last "
        "observation before anyone took the partition), when the group's policy is known (declared, the "
        "cluster's setting, a guard report, or the group's own starts: policy_source). 0 when latest is only "
        "assumed: commits alone cannot tell a latest group from an earliest one that caught up within one "
        "commit interval (see missed_definite_if_latest)."))
    missed_possible: int = Field(description=(
        "A bound: messages the group may not have read, up to its first commit (a latest member commits at or "
        "above where it started); with latest only assumed, the whole sound range [first log start, first "
        "commit). 0 while undecided: there is no upper bound before the first commit."))
    missed_definite_if_latest: int | None = Field(description=(
        "Conditional, not a bound: the messages definitely missed if the group starts at latest, as assumed "
        "(policy_source 'assumed'). Null when the policy is not an assumption: then missed_definite is the fact."))
    missed_possible_if_latest: int | None = Field(description=(
        "Conditional, not a bound: the messages possibly missed if the group starts at latest, as assumed. "
        "Null when the policy is not an assumption."))
    expired: int = Field(description="Missed offsets the log start has passed (retention).")
    backfill_start: int | None = Field(description="Default backfill range start, inclusive.")
    backfill_end: int | None = Field(description=(
        "Default backfill range end, exclusive: the first commit, the sound upper bound. Null while undecided."))
    policy_source: detection.PolicySource | None = Field(
        description="Where the group's auto.offset.reset came from; null while undecided.")
    explanation: str
    pickup_after: IsoDateTime | None = Field(description=(
        "The pickup bracket's start: the group descriptions of the last observation without an owner or a "
        "commit were requested then, so the group took the partition after it. Null until observed."))
    pickup_before: IsoDateTime | None = Field(description=(
        "The pickup bracket's end: the first observation with an owner (for KIP-848 groups, the partition in "
        "the member's current assignment) ended then. Null until observed."))
    likely_start: int | None = Field(description=(
        "An estimate, never a bound: where a latest member probably started, the first offset appended after "
        "pickup_before plus PICKUP_GRACE_MS from Kafka's time index, kept inside [definite end, first commit]. "
        "Producer clocks (CreateTime) and slow members move it. Null while unknown."))
    likely_start_evidence: str = Field(description=(
        "Which timestamps gave likely_start, e.g. 'time index (CreateTime)' (CreateTime depends on producer "
        "clocks, LogAppendTime on the broker's); empty while unknown."))
    owner_client_id: str = Field(description="Client id of the member that owns the partition; empty if none.")
    owner_host: str

    @staticmethod
    def resolve_policy_source(finding: Finding) -> str | None:
        return finding.policy_source or None

    @staticmethod
    def resolve_group_type(finding: Finding) -> str:
        return group_kind(finding.group.type, finding.group.group_id)


class MemberOut(Schema):
    model_config = _CLOSED
    client_id: str
    host: str
    member_id: str
    holds: bool = Field(description="Whether the member's assignment holds the finding's partition (last poll).")


class RecommendationOut(Schema):
    model_config = _CLOSED
    action: Literal["backfill", "reset", "job", "none"] = Field(description=(
        "The repair the home page recommends: none for a covered finding, job when one already works on it."))
    reason: str = Field(description="Why, with the numbers it used.")
    findings: list[int] = Field(alias="finding_ids", description="The findings the repair should cover.")
    jobs: list[int] = Field(description="The active jobs, for action job.")
    redelivered: int = Field(description="Records a reset to earliest would make the group read again.")
    missed_at_most: int = Field(description="Definitely plus possibly missed records.")


class RepairOptionOut(Schema):
    """One repair as its preview page plans it (no Kafka call)."""

    model_config = _CLOSED
    kind: JobKind
    name: str
    until: Literal[BACKFILL_UNTIL] | None = Field(description="backfill: where the range ends; null for a reset.")
    refused: str = Field(description="Why it cannot be planned now; empty when it can.")
    start: int | None = Field(description="reset: the planned offset; backfill: the range start, inclusive.")
    end: int | None = Field(description="backfill: the range end, exclusive; null for a reset.")
    delivers: int | None = Field(description=(
        "backfill: records replayed; reset: missed records the group reads again, at most."))
    definite: int | None = Field(description="Of them, records certainly missed.")
    possible: int | None = Field(description="Of them, records possibly missed (duplicates if the group read them).")
    redelivers: int | None = Field(description=(
        "reset: records the group already read and reads again; backfill: at most the possibly missed ones."))
    waits_for_empty_group: bool = Field(description="reset: the group had members at the last poll.")

    @staticmethod
    def resolve_until(option: dict) -> str | None:
        return option["params"].get("until", "bound") if option["kind"] == "backfill" else None


class AuditEventOut(Schema):
    model_config = _CLOSED
    at: IsoDateTime
    actor: str | None = Field(description="Username; null for the system or a deleted user.")
    system: bool
    action: str
    object_type: str
    object_id: str
    detail: dict[str, Any]

    @staticmethod
    def resolve_actor(event) -> str | None:
        return event.actor.username if event.actor else None


class FindingDetailOut(FindingOut):
    """One finding with its evidence, the group's members, what each repair
    would do and its audit trail (the finding page's content)."""

    first_log_start: int = Field(description="Log start when the partition was found: where the missed range starts.")
    end_before_pickup: int | None = Field(alias="pre_pickup_high_watermark", description=(
        "A bound: the high watermark at the last observation without an owner or a commit (H_k)."))
    first_commit: int | None = Field(description="A bound: the group's first commit on the partition (C_f).")
    definite_range: list[int] | None = Field(description="[start, end) definitely missed; null when none.")
    possible_range: list[int] | None = Field(description="[start, end) possibly missed; null when none.")
    group_state: str = Field(alias="group.state", description="The group's state at the last poll.")
    group_members: list[MemberOut]
    recommendation: RecommendationOut | None = Field(description="Null for a closed finding.")
    repair_options: list[RepairOptionOut] = Field(description="Empty for a closed finding.")
    jobs: list[int] = Field(alias="job_ids", description="Jobs linked to the finding, newest first.")
    audit: list[AuditEventOut] = Field(description="Audit rows about the finding and its jobs, oldest first.")

    @staticmethod
    def resolve_definite_range(finding: Finding) -> list[int] | None:
        start = finding.first_log_start
        return [start, start + finding.missed_definite] if finding.missed_definite else None

    @staticmethod
    def resolve_possible_range(finding: Finding) -> list[int] | None:
        start = finding.first_log_start + finding.missed_definite
        return [start, start + finding.missed_possible] if finding.missed_possible else None


class ClusterOut(Schema):
    """A cluster; built field by field, so no secret nor its ciphertext is ever read."""

    model_config = _CLOSED
    name: str
    bootstrap_servers: str
    security_protocol: Literal[tuple(Cluster.SecurityProtocol.values)]
    sasl_mechanism: Literal[tuple(Cluster.SaslMechanism.values)]
    sasl_username: str
    sasl_password_set: bool = Field(description="Whether a SASL password is stored; it is never returned.")
    ssl_ca_pem_set: bool = Field(description="Whether a CA bundle (PEM) is given; else the system's CAs are trusted.")
    ssl_certificate_pem_set: bool = Field(description="Whether a client certificate (mutual TLS) is given.")
    ssl_key_pem_set: bool = Field(description="Whether a client key is stored; it is never returned.")
    ssl_key_password_set: bool = Field(description="Whether the client key's password is stored; never returned.")
    ssl_endpoint_identification: bool = Field(description="Whether the broker's certificate must name its host.")
    oauth_token_endpoint: str
    oauth_client_id: str
    oauth_client_secret_set: bool = Field(description="Whether an OAuth client secret is stored; never returned.")
    oauth_scope: str
    enabled: bool
    status: Literal[tuple(Cluster.Status.values)]
    last_poll_at: IsoDateTime | None = Field(description="The end of the last poll, failed or not.")
    last_success_at: IsoDateTime | None = Field(description=(
        "The end of the last successful poll: how current what Gapwatch shows of the cluster is."))
    last_poll_duration_ms: int | None
    last_error: str
    polls_total: int
    poll_failures_total: int
    slow_polls_total: int = Field(description="Full polls that took longer than the poll interval.")
    skipped_polls_total: int = Field(description="Polls due that did not run: the last one was still running.")

    @staticmethod
    def resolve_ssl_ca_pem_set(cluster: Cluster) -> bool:
        return bool(cluster.ssl_ca_pem)

    @staticmethod
    def resolve_ssl_certificate_pem_set(cluster: Cluster) -> bool:
        return bool(cluster.ssl_certificate_pem)


class TopicOut(Schema):
    model_config = _CLOSED
    cluster: str = Field(alias="cluster.name", description="Cluster name.")
    name: str
    topic_id: str = Field(alias="kafka_topic_id", description="Kafka topic id of the current lineage.")
    partition_count: int
    deleted: bool
    internal: bool = Field(alias="is_internal")
    generation: int | None = Field(alias="latest_generation",
                                   description="Latest partition generation number; null before the first.")
    first_seen_at: IsoDateTime


class GroupTopicOut(Schema):
    model_config = _CLOSED
    topic: str
    lag: int = Field(description="Total lag of the group on the topic.")


class GroupOut(Schema):
    model_config = _CLOSED
    cluster: str = Field(alias="cluster.name", description="Cluster name.")
    group_id: str = Field(description="Consumer group id, verbatim.")
    state: str = Field(description="Group state as the broker reports it.")
    type: str = Field(description=(
        "The broker's word for the group's type, verbatim: classic, consumer (KIP-848), share (KIP-932), "
        "streams (KIP-1071); empty until a poll described the group."))
    group_type: GroupKind = Field(description=_GROUP_KIND)
    assignor: str
    member_count: int
    declared_policy: Literal[tuple(ConsumerGroup.Policy.values)]
    declared_isolation: Literal[tuple(ConsumerGroup.Isolation.values)] = Field(description=(
        "The consumers' isolation.level as declared in Gapwatch (the broker does not know it): unknown and "
        "read_committed bound a latest start by the last stable offset, read_uncommitted by the high watermark."))
    reset_setting: str = Field(description=(
        "Where the group starts a partition it has no position on, as the cluster states it, in words "
        "(a share group's share.auto.offset.reset, e.g. \"share.auto.offset.reset=latest (the broker's "
        "default)\"); empty where only the declared policy can tell (consumer groups)."))
    evidenced_policy: Literal[tuple(ConsumerGroup.Policy.values)] = Field(description=(
        "What the group's own starts proved, observed by the broker: earliest (seen starting a new partition "
        "below where a latest member could: not latest), latest (a guard reported a start at the end), or "
        "unknown. Decides a finding's policy where none is declared (policy_source 'evidenced')."))
    policy_evidence: str = Field(description="The observation behind evidenced_policy, in words; empty while unknown.")
    policy_evidenced_at: IsoDateTime | None = Field(description="When a poll first saw that evidence.")
    present: bool = Field(description="Whether the cluster still lists the group.")
    topics: list[GroupTopicOut]
    open_findings: int

    @staticmethod
    def resolve_group_type(group: ConsumerGroup) -> str:
        return group_kind(group.type, group.group_id)

    @staticmethod
    def resolve_topics(group: ConsumerGroup) -> list[dict]:
        return [{"topic": link.topic.name, "lag": link.lag} for link in group.group_topics.all()]


class JobOut(Schema):
    model_config = _CLOSED
    id: int
    kind: JobKind
    status: JobStatus
    cluster: str = Field(alias="cluster.name")
    group: str = Field(alias="group.group_id", description="Consumer group id (arbitrary text).")
    findings: list[int]
    params: dict[str, Any] = Field(description=(
        "reset: target and value; backfill: sink, replay_topic or handler, and until when not the bound."))
    plan: list[dict[str, Any]] = Field(description="Per partition, stored before anything runs.")
    result: dict[str, Any]
    progress_done: int | None
    progress_total: int | None
    status_reason: str
    error: str
    requested_by: str | None
    approved_by: str | None
    retry_of: int | None = Field(alias="retry_of_id")
    created_at: IsoDateTime
    started_at: IsoDateTime | None
    finished_at: IsoDateTime | None

    @staticmethod
    def resolve_findings(job: RemediationJob) -> list[int]:
        return sorted(link.finding_id for link in job.job_findings.all())

    @staticmethod
    def resolve_requested_by(job: RemediationJob) -> str | None:
        return job.requested_by.username if job.requested_by else None

    @staticmethod
    def resolve_approved_by(job: RemediationJob) -> str | None:
        return job.approved_by.username if job.approved_by else None


class DismissedOut(Schema):
    model_config = _CLOSED
    id: int
    closed_at: IsoDateTime | None
    closed_reason: str


# --- Filters and bodies ------------------------------------------------------------------


# A query string has no null: a filter left out is None (defaults are not validated).
class FindingFilters(BlankIsAbsent):
    """The findings list's filters; ``topic_contains`` and ``group_contains``
    match as the dashboard's Topic and Group boxes do."""

    cluster: Text = Field(None, description="Cluster name, exact match.")
    topic: Text = Field(None, description="Topic name, exact match.")
    topic_contains: Text = Field(None, description="Part of the topic name, ignoring case.")
    group: Text = Field(None, description="Consumer group id, exact match.")
    group_contains: Text = Field(None, description="Part of the consumer group id, ignoring case.")
    state: FindingState = None
    group_type: GroupKind = Field(None, description="The kind of the finding's group (see group_type).")
    include_closed: bool = Field(False, description="Also list closed findings.")

    def selector_filters(self) -> dict:
        """Keyword arguments for ``groups.selectors.lists.findings_list``."""
        return self.model_dump()


class ClusterFilter(BlankIsAbsent):
    cluster: Text = Field(None, description="Cluster name, exact match.")


class TopicFilters(ClusterFilter):
    topic: Text = Field(None, description="Topic name, exact match.")
    topic_contains: Text = Field(None, description="Part of the topic name, ignoring case.")


class GroupFilters(ClusterFilter):
    group: Text = Field(None, description="Consumer group id, exact match.")
    group_contains: Text = Field(None, description="Part of the consumer group id, ignoring case.")
    group_type: GroupKind = Field(None, description="The group's kind (see group_type).")


class JobFilters(BlankIsAbsent):
    status: JobStatus = None
    kind: JobKind = None


class ApproveIn(Schema):
    """A reset (target and value) or a backfill (sink, replay_topic or handler, until).
    Strict types: 2.7, true, 1e400 or "5" are not a value, 5 is not a sink; no NUL in text."""

    kind: JobKind
    # Text fields have no null: a field is either sent as text or left out.
    target: Text = Field(None, description="earliest, offset, timestamp or shift.")
    value: Int64 | Text | None = Field(None, description=(
        "offset or shift: an integer; timestamp: epoch milliseconds (an integer) or an ISO 8601 date-time "
        "(text, e.g. 2026-11-25T07:44:00Z; UTC unless it names a zone)."))
    sink: Text = Field(None, description=f"{', '.join(JOB_SINKS)}; default: the group's sink.")
    replay_topic: Text = Field(None, description="kafka sink: the replay topic (default: the group's, "
                                                      f"or {replay_topic_for('<topic>')}).")
    handler: Text = Field(None, description="handler sink: one of the server's BACKFILL_HANDLERS.")
    until: Literal[BACKFILL_UNTIL] = Field(None, description=(
        "backfill: where the range ends. bound (default): the group's first commit, the sound upper bound "
        "(the current end while it has not committed); likely: the likely start, an estimate: the findings "
        "then close as repaired to an estimate."))
    also: list[RowId] = Field([], description="More findings of the same group.")

    @field_validator("value")
    @classmethod
    def _text_only_for_a_timestamp(cls, value, info):
        # Strict as before for offsets and shifts: "5" is not one.
        if isinstance(value, str) and info.data.get("target") != "timestamp":
            raise PydanticCustomError("int_type", "must be a whole number")
        return value


class DismissIn(Schema):
    reason: Text = ""


class DismissManyIn(Schema):
    ids: list[RowId] = Field(min_length=1, max_length=MAX_BULK_FINDINGS,
                             description=f"The findings to dismiss, of any groups (at most {MAX_BULK_FINDINGS}).")
    reason: Text = Field(description="Required; recorded on each finding and in each audit row.")


class RefusedOut(Schema):
    model_config = _CLOSED
    id: int
    error: str = Field(description="Why this finding was left as it was: unknown, closed already, a job "
                       "active on it; for an approval also covered (nothing to repair), its plan refused, or a "
                       "job of this kind created for it already.")


class DismissedManyOut(Schema):
    model_config = _CLOSED
    dismissed: list[int] = Field(description="The findings dismissed by this request, by id.")
    refused: list[RefusedOut] = Field(description="The findings left as they were, by id, each with why.")

    @staticmethod
    def resolve_refused(result) -> list[dict]:
        return [{"id": finding_id, "error": why} for finding_id, why in result.refused]


class ApproveManyIn(Schema):
    kind: JobKind = Field(description="reset (to earliest) or backfill (to the first commit, a bound, into each "
                          "group's own sink), the same for every finding.")
    ids: list[RowId] = Field(min_length=1, max_length=MAX_BULK_FINDINGS,
                             description=f"The findings, of any groups (at most {MAX_BULK_FINDINGS}): one job each.")


class ApprovedJobOut(Schema):
    model_config = _CLOSED
    finding: int
    job: JobOut


class ApprovedManyOut(Schema):
    model_config = _CLOSED
    jobs: list[ApprovedJobOut] = Field(description="The jobs this request created, one per finding.")
    refused: list[RefusedOut] = Field(description="The findings left as they were, by id, each with why.")

    @staticmethod
    def resolve_jobs(result) -> list[dict]:
        return [{"finding": finding_id, "job": job} for finding_id, job in result.jobs]

    @staticmethod
    def resolve_refused(result) -> list[dict]:
        return [{"id": finding_id, "error": why} for finding_id, why in result.refused]


# --- Expansions (issue 33, item 1: planned only) ---------------------------------------


class RepairIn(Schema):
    model_config = _CLOSED
    action: Literal["protect", "repair_after", "nothing"] | None = Field(
        None, description="protect (a group the plan protects by membership: the default), repair_after (a "
        "backfill of what it missed; needs a max_records when the plan has no estimate), or nothing; default: "
        "the plan's outcome.")
    sink: Text | None = Field(None, description="parquet, kafka or handler; default: the group's backfill sink.")
    replay_topic: Text | None = Field(None, description="For the kafka sink; default: the group's.")
    handler: Text | None = Field(None, description="For the handler sink: one of BACKFILL_HANDLERS.")
    max_records: Annotated[StrictInt, Field(ge=0, le=INT64_MAX)] | None = Field(
        None, description="The most offsets the backfill may replay by itself (more waits for a person); "
        "default: the plan's high estimate.")


class ExpansionIn(Schema):
    """Plan raising a topic's partition count (``dry_run`` true), or ask for it
    (``dry_run`` false, with the plan's ``fingerprint``): the expansion job is
    stored waiting for a second approver. A missing ``dry_run`` is a 400."""

    cluster: Text = Field(description="Cluster name.")
    topic: Text = Field(description="Topic name.")
    partitions: StrictInt = Field(description="The new total partition count: higher than the topic's count.")
    dry_run: StrictBool | None = Field(None, description="true: the plan only; false: request the expansion.")
    fingerprint: Text | None = Field(None, description="With dry_run false: the fingerprint of the plan you saw.")
    repairs: dict[str, RepairIn] | None = Field(
        None, description="With dry_run false: per group id, the action chosen (protect, repair_after, nothing) "
        "and its backfill's sink and maximum (a protected group's, should the protection fail).")


class ExpansionApproveIn(Schema):
    fingerprint: Text | None = Field(None, description="The fingerprint of the plan you saw on the job's page.")


class ExpansionRefuseIn(Schema):
    reason: Text = Field(description="Why the expansion is refused.")


class ProduceRateOut(Schema):
    model_config = _CLOSED
    offsets_per_second: float = Field(description="Offsets appended per second over the topic's partitions "
                                      "(transaction markers included), between the two samples.")
    offsets: int
    seconds: float
    measured_from: str | None
    measured_until: str | None


class VerdictOut(Schema):
    model_config = _CLOSED
    accepted: bool = Field(description="The broker would add the partitions (CreatePartitions, validate_only).")
    asked: bool = Field(description="False when the broker could not be asked (the reason says why).")
    reason: str = Field(description="The broker's refusal (error name and message; a missing Alter ACL named so).")


class MissedOut(Schema):
    model_config = _CLOSED
    estimate: bool = Field(description="Always true: an estimate, never a bound.")
    low: int | None = Field(description="Offsets, low end of the range; null when not estimable.")
    high: int | None = Field(description="Offsets, high end of the range; null when not estimable.")
    words: str


class GroupPlanOut(Schema):
    model_config = _CLOSED
    group: str = Field(description="Consumer group id, verbatim.")
    kind: GroupKind = Field(description=_GROUP_KIND)
    protocol: str = Field(description="The broker's group type: classic, consumer, share, streams; unknown.")
    state: str
    members: int
    policy: str = Field(description="Where the group starts a partition it has no position on.")
    policy_source: expansion.PolicySource
    policy_source_label: str
    policy_words: str
    outcome: expansion.Outcome
    outcome_label: str
    reason: str
    sink: str | None = Field(description="The backfill's sink, for a group repaired after (or at risk), or a "
                             "protected group's should its protection fail.")
    protection: Literal["membership", "commit", "share_config"] | None = Field(
        description="How a protected group is protected: membership (Gapwatch joins the live group with a member "
        "of its own, adds the partitions, commits each new one at its log start, leaves), commit (an empty "
        "group: an administrative commit), share_config (share.auto.offset.reset=earliest for the change).")
    protection_label: str | None
    cost: str | None = Field(description="Protection by membership: what it costs the group's members.")
    needs: str | None = Field(description="Protection by membership: the ACLs it needs.")
    alternative: str | None = Field(description="Protection by membership: what may be chosen instead.")
    expected_missed: MissedOut


class ExpansionPlanOut(Schema):
    model_config = _CLOSED
    dry_run: bool
    changed: str
    cluster: str
    topic: str
    current_partitions: int
    new_partitions: int
    added_partitions: list[int]
    produce_rate: ProduceRateOut | None = Field(description="Null until two polls sampled the topic's end offsets.")
    broker_verdict: VerdictOut
    counts: dict[str, int]
    groups_outside_scope: int = Field(description="Groups reading the topic that your scope does not show.")
    groups: list[GroupPlanOut]
    fingerprint: str = Field(description="What approving this plan approves (its decisions): send it back to "
                             "request the expansion.")


class ExpansionJobOut(Schema):
    model_config = _CLOSED
    id: int
    url: str = Field(description="The job's page.")
    cluster: str = Field(alias="cluster.name")
    topic: str = Field(alias="topic.name")
    from_partitions: int
    to_partitions: int
    status: ExpansionStatus = Field(description=(
        "requested (waiting for a second approver), approved, running, succeeded (nothing lost for every group), "
        "succeeded_with_loss (every step done; the verdicts name what remains unrepaired), failed (the error and "
        "verdicts say what was left undone), refused. The words of remediation jobs' status."))
    plan: dict[str, Any] = Field(description="The plan as requested and approved.")
    plan_fingerprint: str
    decisions: dict[str, Any] = Field(description="Per group id: outcome, protection (previous value, applied, "
                                      "undone), commits, fallback, sink, max_records, backfills queued.")
    steps: dict[str, Any] = Field(description="Per step done: when, and what it found.")
    verdicts: dict[str, Any] = Field(description="Per group id at the end: nothing_lost, words, unrepaired "
                                     "[{partition, start, end, why}] (half-open offset ranges).")
    status_reason: str
    error: str
    requested_by: str | None
    approved_by: str | None
    created_at: IsoDateTime
    approved_at: IsoDateTime | None
    started_at: IsoDateTime | None
    finished_at: IsoDateTime | None

    @staticmethod
    def resolve_url(job) -> str:
        return f"/expansions/{job.id}/"

    @staticmethod
    def resolve_requested_by(job) -> str | None:
        return job.requested_by.get_username() if job.requested_by else None

    @staticmethod
    def resolve_approved_by(job) -> str | None:
        return job.approved_by.get_username() if job.approved_by else None


# --- Standing rules (issue 43, item 4: kept in Git by platform teams) -----------------------


class RuleIn(Schema):
    """A standing rule: on ``cluster``, groups matching ``groups`` on topics
    matching ``topics`` (globs: * any run, ? one character). ``action``
    protect: Gapwatch keeps a member of its own in each live group covered and
    commits partitions added by anyone at their log start before the group
    takes them, and repairs what a lost race missed; repair: the backfill only."""

    model_config = _CLOSED
    cluster: Text = Field(description="Cluster name.")
    name: Annotated[Text, Field(min_length=1, max_length=100)]
    topics: Annotated[Text, Field(min_length=1, max_length=255)] = Field(description="Topic pattern.")
    groups: Annotated[Text, Field(min_length=1, max_length=255)] = Field(description="Group id pattern.")
    action: Literal["protect", "repair"] = "repair"
    sink: Literal["parquet", "kafka", "handler"] = "parquet"
    replay_topic: Annotated[Text, Field(max_length=249)] = ""
    handler: Annotated[Text, Field(max_length=255)] = ""
    max_records: Annotated[StrictInt, Field(ge=1, le=INT64_MAX)] = Field(
        description="The most records one finding's backfill may replay by itself; more waits for a person.")
    enabled: StrictBool = True


class RuleChangeIn(Schema):
    """The fields to change; the others are kept."""

    model_config = _CLOSED
    name: Annotated[Text, Field(min_length=1, max_length=100)] | None = None
    topics: Annotated[Text, Field(min_length=1, max_length=255)] | None = None
    groups: Annotated[Text, Field(min_length=1, max_length=255)] | None = None
    action: Literal["protect", "repair"] | None = None
    sink: Literal["parquet", "kafka", "handler"] | None = None
    replay_topic: Annotated[Text, Field(max_length=249)] | None = None
    handler: Annotated[Text, Field(max_length=255)] | None = None
    max_records: Annotated[StrictInt, Field(ge=1, le=INT64_MAX)] | None = None
    enabled: StrictBool | None = None


class RuleOut(Schema):
    model_config = _CLOSED
    id: int
    cluster: str
    name: str
    topics: str
    groups: str
    action: str
    sink: str
    replay_topic: str
    handler: str
    max_records: int
    enabled: bool
    created_at: str
    updated_at: str
