"""A new Spark Connect server's warm-up: one Parquet backfill of made-up
records (no Kafka: Spark makes them), written through the Parquet sink into
the backfills' staging folder, proven from its footers, and discarded. The
server then has the writer's classes loaded and its hot code compiled
before the first real job, which otherwise pays for both (bench/RESULTS.md,
"A warm server": a new server's first 1-record job took 3.79 s cold and
1.74-1.92 s warmed); and what the server keeps after a job is, for the most
part, what it keeps once warm (the memory that stays after a job is the
JVM's compiled code, classes and pools, about the same after 10^6 records
as after 10^7).

``manage.py warm_spark_connect`` runs it (``scripts/app.sh`` beside the
server it starts). No Django here.
"""

from __future__ import annotations

from groups.domain.planning import BackfillRange

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
    from tasks.spark.sinks.parquet import ParquetSink

    sink = ParquetSink(spark, output=output, job_id=WARM_UP_JOB, attempt="0")
    sink.prepare()
    try:
        sink.write(warm_up_records(spark, records=records))
        (summary,) = sink.summarize([BackfillRange(WARM_UP_TOPIC, 0, 0, records)])
    finally:
        sink.discard()
    return {"records": records, "verified_by": sink.verified_by, "summary": summary}
