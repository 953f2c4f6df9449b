"""The spec of one Spark backfill attempt: the one contract between the
runner that writes it (``tasks.backfill.runner``) and the Spark job that
reads it (``adapters.spark.backfill_job``, in a process of its own or on a Spark
Connect session).

Pure: no Django, no pyspark, so both sides (and the unit tests) import it.
A ``JobSpec`` refuses to exist in an invalid state (``__post_init__``), so
the writer cannot write what the reader would refuse; ``from_json`` also
checks the JSON types and names the field that is wrong.

The JSON form (``to_json``)::

    {
      "job_id": "42",                      # names the output: <output>/<job_id>/
      "attempt": "5f0c9e2a71b3",           # new for every run of the job
      "kafka": {"bootstrap_servers": "b1:9092", "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "backfill",
                "ssl_ca_pem": "-----BEGIN CERTIFICATE-----...", "ssl_certificate_pem": "",
                "ssl_endpoint_identification": true,
                "oauth_token_endpoint": "", "oauth_client_id": "", "oauth_scope": ""},
      "ranges": [{"topic": "orders", "partition": 2, "start": 1000, "end": 5000}],
      "isolation": "read_committed",       # or "read_uncommitted": the group's isolation.level
      "sink": {"kind": "parquet", "output": "/data/backfills"}
           | {"kind": "kafka", "topics": {"orders": "orders.replay"},
              "start_offsets": {"orders.replay": {"0": 0, "1": 0, "2": 0}}}
           | {"kind": "handler", "handler": "package.module.function"},
      "spark": {"master": "local[*]", "jars_dir": "/opt/gapwatch/lib/spark",
                "driver_memory": "768m", "records_per_task": 200000},
      "progress_file": "/tmp/.../progress.json",
      "result_file": "/tmp/.../result.json"
    }

No secret is part of the spec (the CA bundle and the client certificate are
public): the SASL password, the client key and its password and the OAuth
client secret (``KafkaSecrets``) travel in the environment variable
``SECRETS_ENV`` of the job's process, or as an argument of
``backfill_job.run`` for a Spark Connect attempt in the worker.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields

from groups.domain.cluster_config import ClusterConfig
from groups.domain.planning import BackfillRange, backfill_range_problem
from groups.domain.read_isolation import READ_COMMITTED, isolation_problem
from groups.domain.sinks import HANDLER, JOB_SINKS, KAFKA, PARQUET

SECRETS_ENV = "GAPWATCH_KAFKA_SECRETS"
DEFAULT_RECORDS_PER_TASK = 200_000
# At most this many read tasks per core (``min_partitions``).
TASKS_PER_CORE = 4
# How long a Kafka request of the job (the offsets Spark plans with, a fetch while
# it reads) may go unanswered before it fails (Spark's own default for a fetch:
# spark.network.timeout, 120 s).
DEFAULT_KAFKA_TIMEOUT_MS = 120_000
DEFAULT_DRIVER_MEMORY = "768m"
DEFAULT_MASTER = "local[*]"


class SpecError(ValueError):
    """The spec is not valid; the message says which field."""


@dataclass(frozen=True)
class KafkaSettings:
    """How the job reaches the cluster (the secrets come separately, ``KafkaSecrets``)."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    ssl_ca_pem: str = ""
    ssl_certificate_pem: str = ""
    ssl_endpoint_identification: bool = True
    oauth_token_endpoint: str = ""
    oauth_client_id: str = ""
    oauth_scope: str = ""

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise SpecError("spec.kafka.bootstrap_servers must be a non-empty str")
        if not isinstance(self.ssl_endpoint_identification, bool):
            raise SpecError("spec.kafka.ssl_endpoint_identification must be a bool")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, kafka: dict) -> KafkaSettings:
        """Optional text fields default to empty; host name verification to on."""
        text = {f.name: kafka.get(f.name) or "" for f in fields(cls)
                if f.name not in ("bootstrap_servers", "ssl_endpoint_identification")}
        for name, value in text.items():
            if not isinstance(value, str):
                raise SpecError(f"spec.kafka.{name} must be a str")
        return cls(bootstrap_servers=_required(kafka, "bootstrap_servers", str, "spec.kafka"),
                   **{**text, "security_protocol": text["security_protocol"] or "PLAINTEXT"},
                   ssl_endpoint_identification=kafka.get("ssl_endpoint_identification", True))

    def config(self, secrets: KafkaSecrets) -> ClusterConfig:
        """The cluster's settings again, with the secrets the job got apart from its spec."""
        return ClusterConfig(**self.to_json(), sasl_password=secrets.sasl_password, ssl_key_pem=secrets.ssl_key_pem,
                             ssl_key_password=secrets.ssl_key_password,
                             oauth_client_secret=secrets.oauth_client_secret)

    @classmethod
    def of(cls, config: ClusterConfig) -> KafkaSettings:
        """A cluster's connection settings, as every Java client of it gets
        them (the Spark job's Kafka source, the poll's JVM): the one mapping."""
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class KafkaSecrets:
    """What the job needs to authenticate and must never write down: the
    SASL password, the client key (PKCS#8 PEM, as the Java client reads it)
    and its password, the OAuth client secret. Its repr shows none of them."""

    sasl_password: str = field(default="", repr=False)
    ssl_key_pem: str = field(default="", repr=False)
    ssl_key_password: str = field(default="", repr=False)
    oauth_client_secret: str = field(default="", repr=False)

    @property
    def values(self) -> tuple[str, ...]:
        """Every secret given, to mask in any text the job reports."""
        return tuple(value for value in asdict(self).values() if value)

    def to_environment(self) -> dict[str, str]:
        """``{SECRETS_ENV: JSON}`` for the job process's environment (empty when there is no secret)."""
        given = {name: value for name, value in asdict(self).items() if value}
        return {SECRETS_ENV: json.dumps(given)} if given else {}

    @classmethod
    def from_environment(cls, environment: Mapping[str, str]) -> KafkaSecrets:
        raw = environment.get(SECRETS_ENV)
        if not raw:
            return cls()
        data = json.loads(raw)
        if not isinstance(data, dict) or set(data) - {f.name for f in fields(cls)} \
                or not all(isinstance(value, str) for value in data.values()):
            raise SpecError(f"{SECRETS_ENV} must be a JSON object of the secrets' names and texts")
        return cls(**data)

    @classmethod
    def of(cls, config: ClusterConfig) -> KafkaSecrets:
        """A cluster's secrets for a Java client: the key as unencrypted PKCS#8,
        the form the Java client reads (``ClusterConfig.for_java``), so no key password."""
        java = config.for_java()
        return cls(sasl_password=java.sasl_password, ssl_key_pem=java.ssl_key_pem,
                   oauth_client_secret=java.oauth_client_secret)


@dataclass(frozen=True)
class SinkSpec:
    """Where the records go: ``parquet`` (``output``, a folder or Hadoop URI),
    ``kafka`` (``topics``: source -> replay topic; ``start_offsets``: replay
    topic -> partition -> its end before the write) or ``handler`` (a dotted
    path)."""

    kind: str
    output: str = ""
    topics: Mapping[str, str] = field(default_factory=dict)
    start_offsets: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    handler: str = ""

    def __post_init__(self) -> None:
        if self.kind not in JOB_SINKS:
            raise SpecError(f"spec.sink.kind must be one of {', '.join(JOB_SINKS)}, got {self.kind!r}")
        if self.kind == PARQUET and not self.output:
            raise SpecError("spec.sink.output must be a non-empty str")
        if self.kind == HANDLER and not self.handler:
            raise SpecError("spec.sink.handler must be a non-empty str")
        if self.kind == KAFKA and set(self.topics.values()) - set(self.start_offsets):
            raise SpecError("spec.sink.start_offsets must give the start offsets of every replay topic")

    def to_json(self) -> dict:
        if self.kind == PARQUET:
            return {"kind": PARQUET, "output": self.output}
        if self.kind == KAFKA:
            return {"kind": KAFKA, "topics": dict(self.topics),
                    "start_offsets": {topic: dict(offsets) for topic, offsets in self.start_offsets.items()}}
        return {"kind": HANDLER, "handler": self.handler}

    def describe(self) -> dict:
        """What a job result says about the sink: no start offsets (they are
        the job's bookkeeping, not where the records went)."""
        return {key: value for key, value in self.to_json().items() if key != "start_offsets"}


@dataclass(frozen=True)
class JobSpec:
    """One attempt of one backfill. ``ranges`` are half-open ``[start, end)``,
    sorted by (topic, partition), one per partition. ``isolation``: the
    ``isolation.level`` the ranges are read with, the group's
    (``groups.domain.read_isolation.reader_isolation``)."""

    job_id: str
    attempt: str
    kafka: KafkaSettings
    ranges: tuple[BackfillRange, ...]
    sink: SinkSpec
    jars_dir: str
    progress_file: str
    result_file: str
    master: str = DEFAULT_MASTER
    driver_memory: str = DEFAULT_DRIVER_MEMORY
    records_per_task: int = DEFAULT_RECORDS_PER_TASK
    tasks_per_core: int = TASKS_PER_CORE
    kafka_timeout_ms: int = DEFAULT_KAFKA_TIMEOUT_MS
    isolation: str = READ_COMMITTED

    def __post_init__(self) -> None:
        for name in ("job_id", "attempt", "jars_dir", "progress_file", "result_file"):
            if not getattr(self, name):
                raise SpecError(f"spec.{name} must be a non-empty str")
        problem = isolation_problem(self.isolation)
        if problem:
            raise SpecError(f"spec.{problem}")
        if not self.ranges:
            raise SpecError("spec.ranges must not be empty")
        seen = set()
        for number, r in enumerate(self.ranges):
            where = f"spec.ranges[{number}]"
            if backfill_range_problem(partition=r.partition, start=r.start, end=r.end):
                raise SpecError(f"{where}: need partition >= 0 and 0 <= start < end, "
                                f"got {r.partition} [{r.start}, {r.end})")
            if (r.topic, r.partition) in seen:
                raise SpecError(f"{where}: {r.topic}[{r.partition}] appears twice")
            seen.add((r.topic, r.partition))
        object.__setattr__(self, "ranges", tuple(sorted(self.ranges, key=lambda r: (r.topic, r.partition))))
        if self.sink.kind == KAFKA:
            missing = {r.topic for r in self.ranges} - set(self.sink.topics)
            if missing:
                raise SpecError(f"spec.sink.topics has no replay topic for {sorted(missing)}")
        if isinstance(self.records_per_task, bool) or not isinstance(self.records_per_task, int) \
                or self.records_per_task < 1:
            raise SpecError("spec.spark.records_per_task must be a positive integer")
        if isinstance(self.tasks_per_core, bool) or not isinstance(self.tasks_per_core, int) \
                or self.tasks_per_core < 1:
            raise SpecError("spec.spark.tasks_per_core must be a positive integer")
        if isinstance(self.kafka_timeout_ms, bool) or not isinstance(self.kafka_timeout_ms, int) \
                or self.kafka_timeout_ms < 1:
            raise SpecError("spec.spark.kafka_timeout_ms must be a positive integer")

    @property
    def total(self) -> int:
        return sum(r.count for r in self.ranges)

    def ranges_json(self) -> list[dict]:
        return [{"topic": r.topic, "partition": r.partition, "start": r.start, "end": r.end} for r in self.ranges]

    def to_json(self) -> dict:
        return {
            "job_id": self.job_id, "attempt": self.attempt, "kafka": self.kafka.to_json(),
            "ranges": self.ranges_json(), "isolation": self.isolation, "sink": self.sink.to_json(),
            "spark": {"master": self.master, "jars_dir": self.jars_dir, "driver_memory": self.driver_memory,
                      "records_per_task": self.records_per_task, "tasks_per_core": self.tasks_per_core,
                      "kafka_timeout_ms": self.kafka_timeout_ms},
            "progress_file": self.progress_file, "result_file": self.result_file,
        }

    @classmethod
    def from_json(cls, data: object) -> JobSpec:
        """Check the JSON types (naming the field), then build the spec (which
        checks the rules). Optional fields get their defaults."""
        if not isinstance(data, dict):
            raise SpecError("spec must be a JSON object")
        kafka = _required(data, "kafka", dict)
        ranges = _required(data, "ranges", list)
        clean = []
        for number, item in enumerate(ranges):
            where = f"spec.ranges[{number}]"
            if not isinstance(item, dict):
                raise SpecError(f"{where} must be an object")
            clean.append(BackfillRange(_required(item, "topic", str, where),
                                       *(_required(item, key, int, where) for key in ("partition", "start", "end"))))
        sink = _required(data, "sink", dict)
        kind = sink.get("kind")
        if kind == PARQUET:
            sink_spec = SinkSpec(kind, output=_required(sink, "output", str, "spec.sink"))
        elif kind == KAFKA:
            sink_spec = SinkSpec(kind, topics=_required(sink, "topics", dict, "spec.sink"),
                                 start_offsets=_required(sink, "start_offsets", dict, "spec.sink"))
        elif kind == HANDLER:
            sink_spec = SinkSpec(kind, handler=_required(sink, "handler", str, "spec.sink"))
        else:
            sink_spec = SinkSpec(kind)  # refused: not a sink name
        spark = data.get("spark", {})
        if not isinstance(spark, dict):
            raise SpecError("spec.spark must be an object")
        return cls(
            job_id=str(_required(data, "job_id", str)),
            attempt=_required(data, "attempt", str),
            kafka=KafkaSettings.from_json(kafka),
            ranges=tuple(clean),
            isolation=data.get("isolation", READ_COMMITTED),
            sink=sink_spec,
            master=spark.get("master") or DEFAULT_MASTER,
            jars_dir=_required(spark, "jars_dir", str, "spec.spark"),
            driver_memory=spark.get("driver_memory") or DEFAULT_DRIVER_MEMORY,
            records_per_task=spark.get("records_per_task", DEFAULT_RECORDS_PER_TASK),
            tasks_per_core=spark.get("tasks_per_core", TASKS_PER_CORE),
            kafka_timeout_ms=spark.get("kafka_timeout_ms", DEFAULT_KAFKA_TIMEOUT_MS),
            progress_file=_required(data, "progress_file", str),
            result_file=_required(data, "result_file", str),
        )


def _required(data: dict, key: str, kind: type, where: str = "spec"):
    value = data.get(key)
    if not isinstance(value, kind) or (kind is str and not value) or (isinstance(value, bool) and kind is int):
        raise SpecError(f"{where}.{key} must be a {'non-empty ' if kind is str else ''}{kind.__name__}")
    return value


def parse_spec(data: object) -> JobSpec:
    """``JobSpec.from_json``: the name the job uses."""
    return JobSpec.from_json(data)


def min_partitions(spec: JobSpec, parallelism: int = 1) -> int | None:
    """How many Spark tasks to split the read into, or None to keep one task
    per Kafka partition: one per ``records_per_task``, but at most
    ``spec.tasks_per_core`` (``TASKS_PER_CORE`` unless a test asks for
    small tasks) per core (``parallelism``: the cores Spark runs tasks
    on), rounded up to a multiple of ``parallelism`` so that the last wave of
    tasks keeps every core busy (5 tasks on 2 cores took 0.75 s for 1M
    records here, 6 took 0.59 s). Each task costs about a tenth of a second
    beside its records (10M records of one partition on 2 cores: 36 s in
    tasks of 50,000, 16-21 s of 200,000, 13-15 s of 1M, 11-12 s of 5M); the
    cap keeps a big job's tasks few and large, with a progress step per
    task still. Replay keeps one task per partition so that a partition's
    records reach the replay topic in offset order."""
    if spec.sink.kind == KAFKA:
        return None
    cores = max(1, parallelism)
    wanted = min(math.ceil(spec.total / spec.records_per_task), spec.tasks_per_core * cores)
    if wanted <= len(spec.ranges):
        return None
    return math.ceil(wanted / cores) * cores
