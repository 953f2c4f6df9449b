"""The backfill job's spec: the JSON the runner (``tasks.backfill.runner``)
writes and the Spark job (``tasks.spark.backfill_job``, where its format is
described) checks before it starts Spark. No Spark, no Django: the Spark host
and the unit tests use it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from groups.domain.sinks import JOB_SINKS

# The SASL password reaches the job in this environment variable, never in the spec.
PASSWORD_ENV = "GAPWATCH_KAFKA_SASL_PASSWORD"
SINK_KINDS = JOB_SINKS
DEFAULT_RECORDS_PER_TASK = 200_000


class SpecError(ValueError):
    """The spec is not valid; the message says which field."""


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""


@dataclass(frozen=True)
class JobSpec:
    job_id: str
    attempt: str
    kafka: KafkaSettings
    ranges: tuple[dict, ...]
    sink: dict
    master: str
    jars_dir: str
    driver_memory: str
    records_per_task: int
    progress_file: str
    result_file: str

    @property
    def total(self) -> int:
        return sum(r["end"] - r["start"] for r in self.ranges)


def _required(data: dict, key: str, kind: type, where: str = "spec"):
    value = data.get(key)
    if not isinstance(value, kind) or (kind is str and not value) or isinstance(value, bool) and kind is int:
        raise SpecError(f"{where}.{key} must be a {'non-empty ' if kind is str else ''}{kind.__name__}")
    return value


def parse_spec(data: dict) -> JobSpec:
    """Validate a spec; every range is half-open, ``0 <= start < end``, and
    no partition appears twice."""
    if not isinstance(data, dict):
        raise SpecError("spec must be a JSON object")
    kafka = _required(data, "kafka", dict)
    ranges = _required(data, "ranges", list)
    if not ranges:
        raise SpecError("spec.ranges must not be empty")
    seen = set()
    clean = []
    for number, item in enumerate(ranges):
        where = f"spec.ranges[{number}]"
        if not isinstance(item, dict):
            raise SpecError(f"{where} must be an object")
        topic = _required(item, "topic", str, where)
        partition, start, end = (_required(item, key, int, where) for key in ("partition", "start", "end"))
        if partition < 0 or start < 0 or end <= start:
            raise SpecError(f"{where}: need partition >= 0 and 0 <= start < end, got {partition} [{start}, {end})")
        if (topic, partition) in seen:
            raise SpecError(f"{where}: {topic}[{partition}] appears twice")
        seen.add((topic, partition))
        clean.append({"topic": topic, "partition": partition, "start": start, "end": end})
    sink = _required(data, "sink", dict)
    kind = sink.get("kind")
    if kind not in SINK_KINDS:
        raise SpecError(f"spec.sink.kind must be one of {', '.join(SINK_KINDS)}, got {kind!r}")
    if kind == "parquet":
        _required(sink, "output", str, "spec.sink")
    elif kind == "kafka":
        topics = _required(sink, "topics", dict, "spec.sink")
        starts = _required(sink, "start_offsets", dict, "spec.sink")
        missing = {r["topic"] for r in clean} - set(topics)
        if missing:
            raise SpecError(f"spec.sink.topics has no replay topic for {sorted(missing)}")
        if set(topics.values()) - set(starts):
            raise SpecError("spec.sink.start_offsets must give the start offsets of every replay topic")
    else:
        _required(sink, "handler", str, "spec.sink")
    spark = data.get("spark") or {}
    records_per_task = spark.get("records_per_task", DEFAULT_RECORDS_PER_TASK)
    if not isinstance(records_per_task, int) or records_per_task < 1:
        raise SpecError("spec.spark.records_per_task must be a positive integer")
    return JobSpec(
        job_id=str(_required(data, "job_id", str)),
        attempt=_required(data, "attempt", str),
        kafka=KafkaSettings(
            bootstrap_servers=_required(kafka, "bootstrap_servers", str, "spec.kafka"),
            security_protocol=kafka.get("security_protocol") or "PLAINTEXT",
            sasl_mechanism=kafka.get("sasl_mechanism") or "",
            sasl_username=kafka.get("sasl_username") or "",
        ),
        ranges=tuple(sorted(clean, key=lambda r: (r["topic"], r["partition"]))),
        sink=sink,
        master=spark.get("master") or "local[*]",
        jars_dir=_required(spark, "jars_dir", str, "spec.spark"),
        driver_memory=spark.get("driver_memory") or "768m",
        records_per_task=records_per_task,
        progress_file=_required(data, "progress_file", str),
        result_file=_required(data, "result_file", str),
    )
