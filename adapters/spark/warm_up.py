"""A new Spark Connect server's warm-up, before its first real job:

1. ``warm_up``: one Parquet backfill of made-up records (no Kafka: Spark
   makes them), written through the Parquet sink into the backfills'
   staging folder, proven from its footers, and discarded;
2. ``warm_up_kafka``: one backfill of real records, the newest of the
   fullest partition a cluster has (``warm_up_range``), run by the job's own
   code (``backfill_job.run``: Kafka's source, the Parquet sink, the
   verification) and discarded by the handshake's decision.

The server then has the read's and the writer's classes loaded and their hot
code compiled. Otherwise the first real job pays for both, and what the
server keeps after any job (its compiled code, classes and pools: about the
same after 10^6 records as after 10^7) is not yet in the memory it starts
with (bench/RESULTS.md, "A warm server": a first 1-record job took 3.79 s
cold, 1.74-1.92 s after step 1 and 0.59-0.63 s after both; after a
10^7-record job the server held +81%, +21% and +0% of the memory it was
ready with).

``manage.py warm_spark_connect`` runs it (``scripts/app.sh`` beside the
server it starts). No Django here.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from groups.domain.planning import BackfillRange
from groups.domain.read_isolation import READ_UNCOMMITTED
from groups.domain.sinks import PARQUET
from groups.domain.snapshot import PartitionOffsets
from adapters.spark.spec import JobSpec, KafkaSecrets, KafkaSettings, SinkSpec

WARM_UP_TOPIC = "gapwatch-warm-up"
WARM_UP_JOB = "warm-up"  # never a job's id (those are numbers)
# Enough records for the JIT to compile the write's hot paths (its tasks run
# the Parquet writer's inner loops hundreds of thousands of times), few enough
# to take seconds: 8 tasks of 50,000 records of 200 B.
WARM_UP_RECORDS = 400_000
WARM_UP_TASKS = 8
VALUE_BYTES = 200


def warm_up_records(spark, *, records: int = WARM_UP_RECORDS, tasks: int = WARM_UP_TASKS):
    """Records shaped as the Kafka source gives them (the sink's input
    columns), of partition 0 of ``WARM_UP_TOPIC``, offsets 0..records-1."""
    return spark.range(0, records, 1, tasks).selectExpr(
        "cast(concat('key-', id) as binary) as key",
        f"cast(concat(cast(id as string), repeat('v', {VALUE_BYTES})) as binary) as value",
        f"'{WARM_UP_TOPIC}' as topic", "cast(0 as int) as partition", "id as offset",
        "timestamp_millis(id) as timestamp",
        "array(named_struct('key', 'trace', 'value', cast(cast(id as string) as binary))) as headers",
    )


def warm_up(spark, output: str, *, records: int = WARM_UP_RECORDS) -> dict:
    """The Parquet sink's write and proof of ``records`` made-up records,
    staged under ``output`` (the backfills' output: a folder the server and
    this process share) as job ``warm-up`` and discarded: the sink's summary
    of the range and how it was verified."""
    from adapters.spark.sinks.parquet import ParquetSink

    sink = ParquetSink(spark, output=output, job_id=WARM_UP_JOB, attempt="0")
    sink.prepare()
    try:
        sink.write(warm_up_records(spark, records=records))
        (summary,) = sink.summarize([BackfillRange(WARM_UP_TOPIC, 0, 0, records)])
    finally:
        sink.discard()
    return {"records": records, "verified_by": sink.verified_by, "summary": summary}


# At most this many partitions' offsets are asked for to find the warm-up's read.
WARM_UP_PARTITIONS = 256
# The read takes WARM_UP_RECORDS records, fewer when the partition's newest
# SAMPLE_RECORDS say that many would pass WARM_UP_BYTES (keys, values and
# headers): 400,000 records of 200 B are 80 MB, of 1 MiB 400 GB.
WARM_UP_BYTES = 256 * 1024 * 1024
SAMPLE_RECORDS = 100


def warm_up_range(offsets: Mapping[tuple[str, int], PartitionOffsets], *, records: int) -> BackfillRange | None:
    """The newest ``records`` records (fewer if it holds fewer) of the
    partition that holds the most, the first by topic and partition among
    equals; None when no partition holds a record."""
    held = {key: o.high_watermark - (o.log_start or 0) for key, o in offsets.items()}
    if not held or max(held.values()) <= 0:
        return None
    topic, partition = min(held, key=lambda key: (-held[key], key))
    count, end = held[(topic, partition)], offsets[(topic, partition)].high_watermark
    return BackfillRange(topic, partition, end - min(count, records), end)


def within_bytes(source: BackfillRange, sample_sizes: Sequence[int], *, max_bytes: int = WARM_UP_BYTES) -> BackfillRange:
    """``source`` cut to its newest records whose sampled mean size keeps
    them within ``max_bytes``; at least one record, whole when the sample is
    empty (its records were transaction markers, or compacted away)."""
    if not sample_sizes:
        return source
    mean = max(1.0, sum(sample_sizes) / len(sample_sizes))
    count = max(1, min(source.end - source.start, int(max_bytes // mean)))
    return BackfillRange(source.topic, source.partition, source.end - count, source.end)


def warm_up_source(adapter, *, records: int, timeout: float) -> BackfillRange | None:
    """What the Kafka read takes from the cluster ``adapter`` (the Kafka
    adapter) reads: ``warm_up_range`` of its first partitions, cut by the
    size of its newest records (``within_bytes``); None when it holds no
    record. Raises the adapter's KafkaUnavailable."""
    source = warm_up_range(adapter.retained_offsets(max_partitions=WARM_UP_PARTITIONS), records=records)
    if source is None:
        return None
    sample = adapter.read_records(topic=source.topic, partition=source.partition,
                                  ranges=[(max(source.start, source.end - SAMPLE_RECORDS), source.end)],
                                  deadline=time.monotonic() + timeout)
    return within_bytes(source, [len(r.key or b"") + len(r.value or b"")
                                 + sum(len(k) + len(v or b"") for k, v in r.headers) for r in sample])


def warm_up_kafka(spark, output: str, *, kafka: KafkaSettings, secrets: KafkaSecrets, source: BackfillRange,
                  jars_dir: str) -> dict:
    """One backfill of ``source`` by the job's own code on ``spark`` (the
    Parquet sink, staged under ``output`` as job ``warm-up``, verified, then
    discarded by the handshake's decision), read_uncommitted (no wait for open
    transactions): the job's result (status ``discarded``, the partition's
    summary, ``verified_by``; status ``failed`` and ``error`` if it failed)."""
    from adapters.spark.backfill_job import run
    from adapters.spark.handshake import DISCARD, Decision, read_json

    decision = Decision()
    decision.decide(DISCARD)
    with tempfile.TemporaryDirectory(prefix="gapwatch-warm-up-") as folder:
        spec = JobSpec(job_id=WARM_UP_JOB, attempt="kafka", kafka=kafka, ranges=(source,),
                       sink=SinkSpec(PARQUET, output=output), jars_dir=jars_dir, isolation=READ_UNCOMMITTED,
                       progress_file=str(Path(folder) / "progress.json"),
                       result_file=str(Path(folder) / "result.json"))
        run(spec, parent_pipe=decision, started=time.time(), spark=spark, secrets=secrets)
        return read_json(spec.result_file) or {"status": "failed", "error": "the job wrote no result"}
