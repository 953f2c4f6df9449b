"""The tables. Over 400 lines on purpose: they refer to one another (a
finding to its cluster, group, topic and partition generation; a job to its
findings through its links), and the constraints that make duplicates
impossible (one finding per group and partition generation, one active job
per finding and kind) span them, so they are read together."""

from __future__ import annotations

from dataclasses import fields as dataclass_fields

from django.contrib.postgres.fields import ArrayField
from django.db import models

from groups import crypto
from groups.domain import finding_states as states
from groups.domain import job_states
from groups.domain.cluster_config import ClusterConfig
from groups.domain.kafka_features import features_absent
from groups.domain.sinks import DEFAULT_SINK


class Cluster(models.Model):
    """A Kafka cluster Gapwatch watches. Its secrets (``SECRETS``: the SASL
    password, the client key and its password, the OAuth client secret) are
    stored encrypted and never rendered: forms and APIs only say whether each
    is set. The CA bundle and the client certificate are public, kept as PEM."""

    class SecurityProtocol(models.TextChoices):
        PLAINTEXT = "PLAINTEXT"
        SSL = "SSL"
        SASL_PLAINTEXT = "SASL_PLAINTEXT"
        SASL_SSL = "SASL_SSL"

    class SaslMechanism(models.TextChoices):
        NONE = "", "none"
        PLAIN = "PLAIN"
        SCRAM_SHA_256 = "SCRAM-SHA-256"
        SCRAM_SHA_512 = "SCRAM-SHA-512"
        OAUTHBEARER = "OAUTHBEARER"

    class Status(models.TextChoices):
        NEW = "new"
        OK = "ok"
        UNREACHABLE = "unreachable"
        ERROR = "error"

    # Each secret's name, as forms, services and ClusterConfig call it; stored in "<name>_encrypted".
    SECRETS = ("sasl_password", "ssl_key_pem", "ssl_key_password", "oauth_client_secret")

    name = models.SlugField(max_length=100, unique=True)
    bootstrap_servers = models.CharField(max_length=1000)
    security_protocol = models.CharField(
        max_length=20, choices=SecurityProtocol.choices, default=SecurityProtocol.PLAINTEXT
    )
    sasl_mechanism = models.CharField(max_length=20, choices=SaslMechanism.choices, blank=True, default="")
    sasl_username = models.CharField(max_length=255, blank=True, default="")
    sasl_password_encrypted = models.TextField(blank=True, default="", editable=False)
    ssl_ca_pem = models.TextField("CA bundle (PEM)", blank=True, default="")
    ssl_certificate_pem = models.TextField("client certificate (PEM)", blank=True, default="")
    ssl_key_pem_encrypted = models.TextField(blank=True, default="", editable=False)
    ssl_key_password_encrypted = models.TextField(blank=True, default="", editable=False)
    ssl_endpoint_identification = models.BooleanField(
        "verify the broker's host name", default=True,
        help_text="Check that the broker's certificate names the host connected to (https); off: none.")
    oauth_token_endpoint = models.URLField("OAuth token endpoint", max_length=1000, blank=True, default="")
    oauth_client_id = models.CharField("OAuth client id", max_length=255, blank=True, default="")
    oauth_client_secret_encrypted = models.TextField(blank=True, default="", editable=False)
    oauth_scope = models.CharField("OAuth scope", max_length=1000, blank=True, default="")
    enabled = models.BooleanField(default=True)
    webhook_url = models.URLField(blank=True, default="")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.NEW)
    last_poll_at = models.DateTimeField(null=True, blank=True)
    # The end of the last poll that succeeded (a failed one sets only last_poll_at): what the pages call current.
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_poll_duration_ms = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_test_at = models.DateTimeField(null=True, blank=True)
    last_test_ok = models.BooleanField(null=True, blank=True)
    last_test_message = models.TextField(blank=True, default="")
    polls_total = models.PositiveBigIntegerField(default=0)
    poll_failures_total = models.PositiveBigIntegerField(default=0)
    # Full polls that took longer than POLL_INTERVAL_SECONDS, and polls due
    # that did not run because the last one still held the cluster's lock:
    # a cluster too big for its workers shows here, never as silence.
    slow_polls_total = models.PositiveBigIntegerField(default=0)
    skipped_polls_total = models.PositiveBigIntegerField(default=0)
    # What the cluster finalized at the last full poll that could ask
    # (``Admin.describeFeatures``): {"metadata_version": "3.9-IV0", "levels":
    # {"metadata.version": 21, ...}}; {} until then. The clusters page shows
    # the kinds of group its release lacks (groups.domain.kafka_features).
    kafka_features = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def features_absent(self) -> list[str]:
        if not self.kafka_features:
            return []
        return features_absent(metadata_version=self.kafka_features.get("metadata_version", ""),
                               levels=self.kafka_features.get("levels", {}))

    @property
    def has_sasl_password(self) -> bool:
        return self.has_secret("sasl_password")

    def set_sasl_password(self, plaintext: str) -> None:
        self.set_secret("sasl_password", plaintext)

    def has_secret(self, name: str) -> bool:
        return bool(getattr(self, f"{name}_encrypted"))

    def set_secret(self, name: str, plaintext: str) -> None:
        if name not in self.SECRETS:
            raise ValueError(f"{name} is not a secret of a cluster")
        setattr(self, f"{name}_encrypted", crypto.encrypt(plaintext) if plaintext else "")

    def secret(self, name: str) -> str:
        """The decrypted secret ("" when none is stored); for ClusterConfig and the save-time checks only."""
        stored = getattr(self, f"{name}_encrypted")
        return crypto.decrypt(stored) if stored else ""

    def cluster_config(self) -> ClusterConfig:
        """What the Kafka adapter needs to connect (every field of
        ``ClusterConfig``, the one list of them, from the column of its name);
        the only place the secrets are decrypted for use."""
        return ClusterConfig(**{f.name: self.secret(f.name) if f.name in self.SECRETS else getattr(self, f.name)
                                for f in dataclass_fields(ClusterConfig)})


class Topic(models.Model):
    """A topic name on a cluster. A topic deleted and recreated keeps this row;
    its generations record the new topic id as a new lineage."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="topics")
    name = models.CharField(max_length=249)
    kafka_topic_id = models.CharField(max_length=64)
    is_internal = models.BooleanField(default=False)
    partition_count = models.PositiveIntegerField(default=0)
    deleted = models.BooleanField(default=False)
    first_seen_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # The sum of the partitions' high watermarks at the last two samples (a
    # poll writes one at most every LAG_SAMPLE_INTERVAL_SECONDS), and when:
    # the topic's produce rate in offsets per second (an expansion's plan,
    # groups.domain.expansion.produce_rate). None until sampled.
    end_offsets = models.BigIntegerField(null=True, blank=True)
    end_offsets_at = models.DateTimeField(null=True, blank=True)
    previous_end_offsets = models.BigIntegerField(null=True, blank=True)
    previous_end_offsets_at = models.DateTimeField(null=True, blank=True)
    # Per partition id (a string key), the last stable offset a complete poll
    # read before listing the groups, at most every LAG_SAMPLE_INTERVAL_SECONDS,
    # and when: a group that poll did not list starts at latest at or above it
    # (detection.first_start_evidence). {} until sampled.
    partition_floors = models.JSONField(default=dict, blank=True)
    partition_floors_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="topic_unique_name")]

    def __str__(self) -> str:
        return self.name


class PartitionGeneration(models.Model):
    """The partition set of a topic as observed; a new row only when the set
    or the topic id changes."""

    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="generations")
    number = models.PositiveIntegerField()
    kafka_topic_id = models.CharField(max_length=64)
    partitions = ArrayField(models.IntegerField())
    added_partitions = ArrayField(models.IntegerField(), default=list)
    removed_partitions = ArrayField(models.IntegerField(), default=list)
    is_new_lineage = models.BooleanField(default=False)
    observed_at = models.DateTimeField()

    class Meta:
        ordering = ["topic", "number"]
        constraints = [models.UniqueConstraint(fields=["topic", "number"], name="generation_unique_number")]

    def __str__(self) -> str:
        return f"{self.topic.name} gen {self.number} ({len(self.partitions)} partitions)"


class BulkJSONField(models.JSONField):
    """A JSON column that bulk inserts as one parameter a row. Django inserts
    many rows of plain columns through UNNEST of arrays, and psycopg escapes a
    JSON array literal with a regular expression call per quote: 1.4 s of a
    3,000-row poll write. A field with ``get_placeholder`` opts out."""

    def get_placeholder(self, value, compiler, connection) -> str:
        return "%s"


class ConsumerGroup(models.Model):
    class Policy(models.TextChoices):
        UNKNOWN = "unknown"
        LATEST = "latest"
        EARLIEST = "earliest"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="groups")
    # Group ids are arbitrary strings from the cluster: hostile text everywhere.
    group_id = models.TextField()
    state = models.CharField(max_length=40, blank=True, default="")
    type = models.CharField(max_length=20, blank=True, default="")
    assignor = models.CharField(max_length=100, blank=True, default="")
    member_count = models.PositiveIntegerField(default=0)
    # As of the last poll: [{"member_id", "client_id", "host", "assignment": [[topic, partition], ...]}].
    members = BulkJSONField(default=list, blank=True)
    class Isolation(models.TextChoices):
        UNKNOWN = "unknown"
        READ_COMMITTED = "read_committed"
        READ_UNCOMMITTED = "read_uncommitted"

    declared_policy = models.CharField(max_length=10, choices=Policy.choices, default=Policy.UNKNOWN)
    # The consumers' isolation.level, as an operator declared it: the broker does
    # not know it. "unknown" bounds a latest start by the last stable offset (a
    # read_committed member starts there); "read_uncommitted" by the high watermark.
    declared_isolation = models.CharField(max_length=16, choices=Isolation.choices, default=Isolation.UNKNOWN)
    # The start rule as the cluster states it, in words, as of the last poll (a
    # share group's "share.auto.offset.reset=latest (the broker's default)");
    # "" where only a declaration can tell (consumer groups).
    reset_setting = models.CharField(max_length=200, blank=True, default="")
    # What the group's own starts proved (detection.PolicyEvidence): "earliest"
    # (seen not starting at latest), "latest", or "unknown"; decides where
    # nothing is declared. Its words and when a poll first saw it.
    evidenced_policy = models.CharField(max_length=10, choices=Policy.choices, default=Policy.UNKNOWN)
    policy_evidence = models.TextField(blank=True, default="")
    policy_evidenced_at = models.DateTimeField(null=True, blank=True)
    # Opt-in: reset new partitions to their log start at once when the group is Empty at detection.
    auto_repair = models.BooleanField(default=False)
    # Backfill defaults for this group (approvers may change them).
    backfill_sink = models.CharField(max_length=10, default=DEFAULT_SINK)
    replay_topic = models.CharField(max_length=249, blank=True, default="")
    present = models.BooleanField(default=True)
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "group_id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "group_id"], name="group_unique_id")]

    def __str__(self) -> str:
        return self.group_id


class GroupTopic(models.Model):
    """A topic a group consumes (committed on, or assigned), with its current lag."""

    group = models.ForeignKey(ConsumerGroup, on_delete=models.CASCADE, related_name="group_topics")
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="group_topics")
    lag = models.BigIntegerField(default=0)
    first_seen_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # Lag samples are written at most every LAG_SAMPLE_INTERVAL_SECONDS.
    last_sample_at = models.DateTimeField(null=True, blank=True)
    # Every partition of the topic as the last poll saw it for this group, by
    # partition id: {"partition", "log_start" (None where the poll did not read
    # it), "committed" (None: no commit), "high_watermark", "lag", "client_id",
    # "host"} (client and host of the member that owns it; "" for nobody).
    # One column, not a row per partition: written with the lag, in the same upsert.
    partitions = BulkJSONField(default=list, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "topic"], name="group_topic_unique")]


class Finding(models.Model):
    """One (group, topic, partition) where the partition appeared in a new
    generation of a topic the group already consumed. The accounting fields
    mirror ``groups.domain.detection.FindingAccounting``; offsets are "next to read" and
    ranges half-open."""

    class State(models.TextChoices):
        # The core's one list (groups.domain.finding_states), what each means said there.
        PENDING = states.PENDING
        UNDECIDED = states.UNDECIDED
        UNOWNED = states.UNOWNED
        GAP = states.GAP
        COVERED = states.COVERED
        EXPIRED = states.EXPIRED

    class Resolution(models.TextChoices):
        REPAIRED = "repaired"  # a verified job covered the whole sound range
        # A verified job covered less than the sound range (the likely start
        # chosen instead of the bound, or no upper bound yet): closed_reason says what.
        PARTIAL = "partial", "repaired to an estimate"
        DISMISSED = "dismissed"  # a person, with a reason
        EXPIRED = "expired"  # retention (or the topic's deletion) took the missed range

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="findings")
    group = models.ForeignKey(ConsumerGroup, on_delete=models.CASCADE, related_name="findings")
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="findings")
    partition = models.IntegerField()
    generation = models.ForeignKey(PartitionGeneration, on_delete=models.CASCADE, related_name="findings")
    state = models.CharField(max_length=10, choices=State.choices)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    first_log_start = models.BigIntegerField()
    log_start_offset = models.BigIntegerField()
    high_watermark = models.BigIntegerField()
    committed_offset = models.BigIntegerField(null=True, blank=True)
    lag = models.BigIntegerField()
    owner_member_id = models.TextField(blank=True, default="")
    owner_client_id = models.TextField(blank=True, default="")
    owner_host = models.TextField(blank=True, default="")
    pre_pickup_high_watermark = models.BigIntegerField(null=True, blank=True)
    # L_k: the last stable offset at the same observation as H_k (below it while
    # a transaction was open). A read_committed latest member starts at or above it.
    pre_pickup_stable_offset = models.BigIntegerField(null=True, blank=True)
    first_commit = models.BigIntegerField(null=True, blank=True)
    polls_without_owner = models.PositiveIntegerField(default=0)
    guard_start_offset = models.BigIntegerField(null=True, blank=True)
    # The pickup bracket: the group took the partition after pickup_after and
    # before pickup_before. likely_start is an estimate, never a bound, of where
    # a latest member started (Kafka's time index; likely_start_evidence says
    # which timestamps), kept inside [pre_pickup_high_watermark, first_commit].
    pickup_after = models.DateTimeField(null=True, blank=True)
    pickup_before = models.DateTimeField(null=True, blank=True)
    likely_start = models.BigIntegerField(null=True, blank=True)
    likely_start_evidence = models.CharField(max_length=100, blank=True, default="")
    # Bounds: 0 definite whenever the policy is only assumed (DESIGN section 3).
    missed_definite = models.BigIntegerField(default=0)
    missed_possible = models.BigIntegerField(default=0)
    # The figures under latest while latest is only assumed ("if the group
    # starts at latest, as assumed"): conditional, never a bound; None otherwise.
    missed_definite_if_latest = models.BigIntegerField(null=True, blank=True)
    missed_possible_if_latest = models.BigIntegerField(null=True, blank=True)
    # The records a reader of each isolation level reads in [records_start,
    # records_end) (the backfill range when counted), read from the log
    # (adapters.kafka.record_reads.count_records): missed_* count offsets, and commit
    # and abort markers and aborted records take offsets. None: not counted;
    # records_read_committed also while a transaction held the range open.
    records_start = models.BigIntegerField(null=True, blank=True)
    records_end = models.BigIntegerField(null=True, blank=True)
    records_read_committed = models.BigIntegerField(null=True, blank=True)
    records_read_uncommitted = models.BigIntegerField(null=True, blank=True)
    expired = models.BigIntegerField(default=0)
    backfill_start = models.BigIntegerField(null=True, blank=True)
    backfill_end = models.BigIntegerField(null=True, blank=True)
    policy_source = models.CharField(max_length=10, blank=True, default="")
    explanation = models.TextField(blank=True, default="")
    # The way out (DESIGN.md section 6): set with closed_at, once, and never reopened.
    resolution = models.CharField(max_length=10, choices=Resolution.choices, blank=True, default="")
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_reason = models.TextField(blank=True, default="")
    closed_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    # Repaired: the verified job, the missed messages it delivered (replayed, or
    # read again after a reset), and for a reset every message the group reads again.
    resolved_by_job = models.ForeignKey(
        "RemediationJob", on_delete=models.SET_NULL, null=True, blank=True, related_name="resolved_findings"
    )
    recovered_messages = models.BigIntegerField(null=True, blank=True)
    redelivered_messages = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "group", "topic", "partition", "generation"], name="finding_unique"
            )
        ]
        indexes = [
            models.Index(fields=["cluster", "state"]),
            models.Index(fields=["closed_at"]),
            models.Index(fields=["resolution", "closed_at"]),
            # The dashboard's default page: open findings, newest first.
            models.Index(
                models.F("created_at").desc(), "id", name="finding_open_newest",
                condition=models.Q(closed_at__isnull=True),
            ),
            # The history and the API with closed findings: every finding, newest first
            # (without it, each page sorted all of them: ~0.1 s at 100,000, more under load).
            models.Index(models.F("created_at").desc(), "id", name="finding_newest"),
            # The topics and groups lists' open findings a row (and their sort by it): counted
            # from the index alone; through the foreign key's index each count read every finding.
            models.Index(fields=["topic", "id"], name="finding_open_by_topic", condition=models.Q(closed_at__isnull=True)),
            models.Index(fields=["group", "id"], name="finding_open_by_group", condition=models.Q(closed_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"{self.group.group_id} {self.topic.name}[{self.partition}] gen {self.generation.number}"


class FindingUrgency(models.Model):
    """What retention leaves of an open finding's missed range, as a worker
    last read it (``tasks.urgency``): the topic's retention configs and the
    first record still stored at or after the missed range's start.
    ``expires_at`` is an estimate (``groups.domain.urgency``): the earliest
    time retention.ms may delete that record; None when time cannot tell.
    ``error``: why the last read failed (the values are the read before)."""

    finding = models.OneToOneField(Finding, on_delete=models.CASCADE, primary_key=True, related_name="urgency")
    read_at = models.DateTimeField()
    retention_ms = models.BigIntegerField(null=True, blank=True)
    retention_bytes = models.BigIntegerField(null=True, blank=True)
    cleanup_policy = models.CharField(max_length=100, blank=True, default="")
    timestamp_type = models.CharField(max_length=20, blank=True, default="")
    first_offset = models.BigIntegerField(null=True, blank=True)
    first_timestamp = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["expires_at"])]


class LagSample(models.Model):
    """Lag of a group on a topic at one poll, for charts. Pruned after
    LAG_SAMPLE_RETENTION_HOURS."""

    group = models.ForeignKey(ConsumerGroup, on_delete=models.CASCADE, related_name="lag_samples")
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="lag_samples")
    at = models.DateTimeField()
    lag = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["group", "topic", "at"]), models.Index(fields=["at"])]


class Notification(models.Model):
    """A webhook delivery: kept so retries and failures are visible."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="notifications")
    finding = models.ForeignKey(Finding, on_delete=models.SET_NULL, null=True, related_name="notifications")
    url = models.URLField(max_length=1000)
    event = models.CharField(max_length=40)
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)


class AuditEvent(models.Model):
    """Every state change by a person or by the system; append-only.

    ``object_type``/``object_id`` name what changed; ``detail`` holds the
    before/after values (never a secret)."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True)
    system = models.BooleanField(default=False)
    action = models.CharField(max_length=60, db_index=True)
    cluster = models.ForeignKey(Cluster, on_delete=models.SET_NULL, null=True, blank=True)
    object_type = models.CharField(max_length=40, blank=True, default="")
    object_id = models.CharField(max_length=40, blank=True, default="")
    detail = models.JSONField(default=dict)

    class Meta:
        ordering = ["-at", "-id"]


class JobStatus(models.TextChoices):
    """The one vocabulary of both kinds of job; what each means, and the moves
    each kind allows, are said in ``groups.domain.job_states``."""

    REQUESTED = job_states.REQUESTED
    APPROVED = job_states.APPROVED
    QUEUED = job_states.QUEUED
    WAITING = job_states.WAITING
    RUNNING = job_states.RUNNING
    SUCCEEDED = job_states.SUCCEEDED
    SUCCEEDED_WITH_LOSS = job_states.SUCCEEDED_WITH_LOSS
    FAILED = job_states.FAILED
    CANCELLED = job_states.CANCELLED
    REFUSED = job_states.REFUSED


def _status_choices(kind: job_states.JobKind) -> list[tuple[str, str]]:
    return [(status, job_states.STATUS_WORDS[status]) for status in job_states.kind_statuses(kind)]


class ApprovedWork(models.Model):
    """Who asked, who approved, when it ran and how it ended: what a
    remediation job and an expansion job both record, in one place. Its
    ``status`` moves only through ``groups.services.job_status.job_status_move``
    (compare-and-set, by the table of ``groups.domain.job_states``)."""

    # The kind of job in the table of moves (``groups.domain.job_states.MOVES``).
    JOB_KIND: job_states.JobKind
    Status = JobStatus

    status_reason = models.TextField(blank=True, default="")
    error = models.TextField(blank=True, default="")
    requested_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, related_name="+")
    approved_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]


class RemediationJob(ApprovedWork):
    """An approved offset reset or Spark backfill for findings of one group.

    Its status moves only by compare-and-set (``groups.services.job_status``, through
    ``groups.services.remediation.job_transition``), so two approvals or two workers can never run one job twice.
    """

    class Kind(models.TextChoices):
        RESET = "reset"
        BACKFILL = "backfill"

    JOB_KIND = job_states.REMEDIATION
    STATUSES = job_states.kind_statuses(JOB_KIND)
    ACTIVE = job_states.active(JOB_KIND)
    CANCELLABLE = job_states.cancellable(JOB_KIND)
    FINISHED = job_states.finished(JOB_KIND)

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="jobs")
    group = models.ForeignKey(ConsumerGroup, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    status = models.CharField(max_length=20, choices=_status_choices(JOB_KIND))
    findings = models.ManyToManyField(Finding, through="JobFinding", related_name="jobs")
    # What the operator chose (reset target, backfill sink) and the exact plan
    # (per partition), stored before anything runs.
    params = models.JSONField(default=dict)
    plan = models.JSONField(default=list)
    result = models.JSONField(default=dict, blank=True)
    progress_done = models.BigIntegerField(null=True, blank=True)
    progress_total = models.BigIntegerField(null=True, blank=True)
    # A backfill's stages as the runner saw them (``groups.domain.job_progress``).
    progress_stages = models.JSONField(default=list, blank=True)
    retry_of = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="retries")

    class Meta(ApprovedWork.Meta):
        permissions = [
            ("approve_remediation", "Can request and approve offset resets, backfills and dismissals"),
            ("manage_clusters", "Can add and change clusters and declared group policies"),
        ]
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"{self.kind} job {self.id} ({self.status})"

    @property
    def progress_percent(self) -> int | None:
        if not self.progress_total:
            return None
        return min(100, int(100 * (self.progress_done or 0) / self.progress_total))


class JobFinding(models.Model):
    """Links a job to its findings. ``active`` while the job is not finished:
    the partial unique constraint allows one active job per finding and kind,
    so a double click or two operators at once yield exactly one job."""

    job = models.ForeignKey(RemediationJob, on_delete=models.CASCADE, related_name="job_findings")
    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, related_name="job_findings")
    kind = models.CharField(max_length=10, choices=RemediationJob.Kind.choices)
    active = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "finding"], name="job_finding_unique"),
            models.UniqueConstraint(
                fields=["finding", "kind"], condition=models.Q(active=True), name="one_active_job_per_finding_kind"
            ),
        ]


class ApiToken(models.Model):
    """A personal token for scripts using the JSON API and /metrics as ``user``
    (the user's permissions, or fewer: ``read_only``). Only a SHA-256 of the
    token is stored; the token is shown once. It stops working at
    ``expires_at`` or when revoked (``revoked_at``); the row stays for the audit."""

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=8, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    read_only = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class DirectoryIdentity(models.Model):
    """Who a user is at the identity provider that last logged them in
    (OpenID Connect or LDAP), and the directory groups it gave then. Roles
    are re-applied from ``groups`` at every login (``RoleMapping``)."""

    class Source(models.TextChoices):
        OIDC = "oidc", "OpenID Connect"
        LDAP = "ldap", "LDAP"

    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="directory_identity")
    source = models.CharField(max_length=8, choices=Source.choices)
    issuer = models.CharField(max_length=500, help_text="the OpenID issuer, or the LDAP server's URI")
    subject = models.CharField(max_length=500, help_text="the OpenID subject (sub), or the LDAP entry's DN")
    groups = models.JSONField(default=list, blank=True, help_text="directory groups at the last login")
    last_login_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "directory identities"
        constraints = [models.UniqueConstraint(fields=["source", "issuer", "subject"], name="one_user_per_identity")]

    def __str__(self) -> str:
        return f"{self.subject} ({self.get_source_display()})"


class PersonSettings(models.Model):
    """One person's own settings. ``time_zone``: the IANA zone the pages show
    times in ("Europe/Berlin"); empty means the browser's own zone.
    ``color_scheme``: light or dark pages, or the system's choice (the
    browser's ``prefers-color-scheme``)."""

    class ColorScheme(models.TextChoices):
        SYSTEM = "system", "as the system is set"
        LIGHT = "light", "light"
        DARK = "dark", "dark"

    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="gapwatch_settings")
    time_zone = models.CharField(max_length=64, blank=True, default="")
    color_scheme = models.CharField(max_length=6, choices=ColorScheme.choices, default=ColorScheme.SYSTEM)

    class Meta:
        verbose_name_plural = "person settings"

    def __str__(self) -> str:
        return f"settings of {self.user_id}"


class RoleMapping(models.Model):
    """A directory group (OpenID groups claim or LDAP group) gives its members
    a Gapwatch role, re-applied at every login, limited to a team scope:
    clusters, and group-id and topic patterns (``groups.domain.scopes``)."""

    class Role(models.TextChoices):
        VIEWER = "viewer", "viewer (reads)"
        APPROVER = "approver", "approver (approves, dismisses, manages clusters)"

    directory_group = models.CharField(max_length=255, help_text="the group's name as the provider gives it")
    role = models.CharField(max_length=16, choices=Role.choices)
    clusters = models.CharField(
        max_length=500, blank=True,
        help_text="cluster names or patterns, comma separated (* any run of characters, ? one); empty: every cluster")
    group_pattern = models.CharField(max_length=255, default="*",
                                     help_text="consumer group ids it covers, e.g. payments-* (* = all)")
    topic_pattern = models.CharField(max_length=255, default="*",
                                     help_text="topic names it covers, e.g. payments.* (* = all)")

    class Meta:
        constraints = [models.UniqueConstraint(
            fields=["directory_group", "role", "clusters", "group_pattern", "topic_pattern"],
            name="one_mapping_per_group_role_scope")]

    def __str__(self) -> str:
        return f"{self.directory_group} → {self.role}"

    @property
    def cluster_patterns(self) -> tuple[str, ...]:
        return tuple(part.strip() for part in self.clusters.split(",") if part.strip())


class RepairRule(models.Model):
    """A standing repair rule (issue 33, item 5; ``groups.domain.standing_rules``):
    findings of groups matching ``group_pattern`` on topics matching
    ``topic_pattern`` of ``cluster`` are backfilled to the rule's sink by
    themselves once decided, up to ``max_records``. Written only through
    ``groups.services.standing_rules`` (audited)."""

    class Action(models.TextChoices):
        REPAIR = "repair", "repair after"
        PROTECT = "protect", "protect, then repair what a lost race missed"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="repair_rules")
    name = models.CharField(max_length=100)
    topic_pattern = models.CharField(max_length=255, help_text="topic names, e.g. orders.* (* any run, ? one)")
    group_pattern = models.CharField(max_length=255, help_text="consumer group ids, e.g. billing-* (* = all)")
    sink = models.CharField(max_length=10, help_text="parquet, kafka (a replay topic) or handler")
    replay_topic = models.CharField(max_length=249, blank=True, default="",
                                    help_text="kafka sink: the replay topic (empty: <topic>.replay)")
    handler = models.CharField(max_length=255, blank=True, default="",
                               help_text="handler sink: one of BACKFILL_HANDLERS")
    max_records = models.PositiveBigIntegerField(help_text="the most records one finding's backfill may replay "
                                                           "by itself; more waits for a person")
    action = models.CharField(
        max_length=10, choices=Action.choices, default=Action.REPAIR,
        help_text="protect: Gapwatch keeps a member of its own in each live group the rule covers and commits "
                  "partitions added by anyone at their log start before the group takes them; repair after: the "
                  "backfill only")
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="one_rule_name_per_cluster")]

    def __str__(self) -> str:
        return f"rule {self.name} ({self.topic_pattern} / {self.group_pattern})"


class RuleRepair(models.Model):
    """What a standing rule did with one finding, once: the job it queued, or
    why it left the finding to a person (``refused``)."""

    rule = models.ForeignKey(RepairRule, on_delete=models.CASCADE, related_name="repairs")
    finding = models.OneToOneField(Finding, on_delete=models.CASCADE, related_name="rule_repair")
    job = models.ForeignKey(RemediationJob, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    refused = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)


class ExpansionJob(ApprovedWork):
    """A guarded expansion (issue 33): raising ``topic`` from ``from_partitions``
    to ``to_partitions``, with the plan as it was approved, and what the job
    did for each group that reads the topic.

    ``plan``: the plan's JSON as shown to the requester (``expansion_plan_as_dict``),
    ``plan_fingerprint`` its decisions' hash (``groups.domain.expansion.job.plan_fingerprint``):
    approval re-plans and refuses a plan that changed since.
    ``decisions``: per group id, ``{"outcome", "kind", "reason", "sink",
    "sink_params", "max_records", "protection": {...}, "fallback": ..., "backfill_jobs": [...]}``;
    a share group's previous ``share.auto.offset.reset`` is written there
    before the job changes it. ``steps``: per step name, when it was done and
    what it found (``{"validate": {"done_at": ..., "detail": ...}}``); a re-run
    continues at the first step not done. ``verdicts``: per group id, the
    end's verdict: ``{"nothing_lost": bool, "words", "unrepaired": [{"partition", "start", "end", "why"}]}``.
    Its status moves only by compare-and-set (``groups.services.job_status``).
    """

    JOB_KIND = job_states.EXPANSION
    STATUSES = job_states.kind_statuses(JOB_KIND)
    ACTIVE = job_states.active(JOB_KIND)
    FINISHED = job_states.finished(JOB_KIND)

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="expansions")
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="expansions")
    from_partitions = models.PositiveIntegerField()
    to_partitions = models.PositiveIntegerField()
    plan = models.JSONField(default=dict)
    plan_fingerprint = models.CharField(max_length=64)
    decisions = models.JSONField(default=dict)
    status = models.CharField(max_length=20, choices=_status_choices(JOB_KIND),
                              default=job_states.REQUESTED)
    steps = models.JSONField(default=dict, blank=True)
    verdicts = models.JSONField(default=dict, blank=True)
    # The job advances in short runs (tasks/expansion/run.py), each enqueueing the next with this
    # token: a run carrying another token (a chain that recovery replaced) ends at once.
    run_token = models.CharField(max_length=32, blank=True, default="")
    # Consecutive runs that found the broker away at the current step.
    attempts = models.PositiveIntegerField(default=0)

    class Meta(ApprovedWork.Meta):
        constraints = [
            # One expansion at a time per topic: a repeated request meets the first.
            models.UniqueConstraint(fields=["topic"], name="one_active_expansion_per_topic",
                                    condition=models.Q(status__in=job_states.active(job_states.EXPANSION))),
        ]
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"expansion {self.id} of {self.topic_id} to {self.to_partitions} ({self.status})"


class Protection(models.Model):
    """A new partition committed at its log start by Gapwatch as a member of a
    live group (issue 43: join, add, commit, leave). ``won``: right after the
    commit no member of the group held the partition and the commit read
    back, so whoever takes it starts at ``offset`` (a committed offset wins
    over ``auto.offset.reset``): the detection core decides the group's
    finding on it from this, a fact, not from the group's policy. Lost: a
    member held it already; the finding runs as any other, with Gapwatch's
    commit told apart from the group's. One row per (group, topic lineage,
    partition)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="protections")
    group_id = models.TextField()
    topic = models.CharField(max_length=249)
    kafka_topic_id = models.CharField(max_length=64)
    partition = models.IntegerField()
    offset = models.BigIntegerField()
    won = models.BooleanField()
    words = models.TextField()
    expansion = models.ForeignKey(ExpansionJob, on_delete=models.SET_NULL, null=True, blank=True,
                                  related_name="protections")
    rule = models.ForeignKey(RepairRule, on_delete=models.SET_NULL, null=True, blank=True, related_name="protections")
    made_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "group_id", "topic", "kafka_topic_id", "partition"],
                                    name="one_protection_per_group_partition"),
        ]

    def __str__(self) -> str:
        return f"{self.group_id} {self.topic}[{self.partition}] at {self.offset} ({'won' if self.won else 'lost'})"
