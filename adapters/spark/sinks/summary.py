"""What a sink holds, counted by Spark: the per-partition summary of a
DataFrame of delivered (topic, partition, offset), by the rules of
``adapters.spark.counting``."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from groups.domain.planning import BackfillRange
from adapters.spark.counting import partition_summary
from adapters.spark.offset_check import Checksum
from adapters.spark.session import is_connect, sql_api

# How a sink's summary was made: proven from what its files say and the
# write's own checksum (Parquet), or from where the replay partitions end (kafka), or
# counted by reading everything back.
FOOTERS = "footers and checksum"
END_OFFSETS = "end offsets"
READ_BACK = "read back"


class ObservedChecksum:
    """The count and checksum of the offsets a write passes
    (``offset_check.Checksum``), as Spark observes them in the same pass:
    ``df.observe(o.observation, *o.columns)``, then ``o.result()`` after
    the write (None if Spark reported nothing)."""

    def __init__(self, spark: SparkSession) -> None:
        F, _ = sql_api(spark)  # noqa: N806
        if is_connect(spark):
            from pyspark.sql.connect.observation import Observation
        else:
            from pyspark.sql import Observation
        self.observation = Observation("gapwatch-offsets")
        hashed = F.xxhash64(F.col("offset"))
        self.columns = (
            F.count(F.lit(1)).alias("rows"),
            F.coalesce(F.sum(F.shiftright(hashed, 32)), F.lit(0)).alias("high"),
            F.coalesce(F.sum(hashed.bitwiseAND(F.lit(0xFFFFFFFF))), F.lit(0)).alias("low"),
        )

    def result(self) -> Checksum | None:
        values = self.observation.get
        if not values or any(values.get(name) is None for name in ("rows", "high", "low")):
            return None
        return Checksum(rows=int(values["rows"]), high=int(values["high"]), low=int(values["low"]))


def summarize_offsets(spark: SparkSession, delivered: DataFrame, ranges: Sequence[BackfillRange]) -> list[dict]:
    """Per range, from a DataFrame of delivered (topic, partition, offset):

    1. one aggregation: rows and distinct offsets inside the range, min and
       max offset, rows outside it;
    2. only for partitions with missing offsets, the contiguous runs
       ("islands") of delivered offsets, with a window over the sorted
       distinct offsets (offset - row_number is constant along a run).
    Records of partitions that are not in the job count as ``outside_range``
    of a summary entry of their own (expected 0).
    """
    F, Window = sql_api(spark)  # noqa: N806 - the usual names of pyspark's API
    bounds = spark.createDataFrame(
        [(r.topic, r.partition, r.start, r.end) for r in ranges],
        "topic string, partition int, range_start long, range_end long",
    )
    tagged = delivered.join(F.broadcast(bounds), ["topic", "partition"], "left").withColumn(
        "in_range", F.coalesce((F.col("offset") >= F.col("range_start")) & (F.col("offset") < F.col("range_end")),
                               F.lit(False))
    )
    in_range_offset = F.when(F.col("in_range"), F.col("offset"))
    stats = {
        (row.topic, row.partition): row
        for row in tagged.groupBy("topic", "partition").agg(
            F.sum(F.col("in_range").cast("long")).alias("rows_in_range"),
            F.count_distinct(in_range_offset).alias("distinct_in_range"),
            F.min(in_range_offset).alias("low"),
            F.max(in_range_offset).alias("high"),
            F.sum((~F.col("in_range")).cast("long")).alias("rows_outside"),
        ).collect()
    }
    gappy = []
    islands: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for r in ranges:
        row = stats.get((r.topic, r.partition))
        if row is None or not row.distinct_in_range:
            islands[(r.topic, r.partition)] = []
        elif row.distinct_in_range == row.high - row.low + 1:
            islands[(r.topic, r.partition)] = [(row.low, row.high + 1)]
        else:
            gappy.append((r.topic, r.partition))
    if gappy:
        wanted = spark.createDataFrame(gappy, "topic string, partition int")
        runs = (
            tagged.where("in_range").join(F.broadcast(wanted), ["topic", "partition"])
            .select("topic", "partition", "offset").distinct()
            .withColumn("run", F.col("offset") - F.row_number().over(
                Window.partitionBy("topic", "partition").orderBy("offset")))
            .groupBy("topic", "partition", "run").agg(F.min("offset").alias("low"), F.max("offset").alias("high"))
            .orderBy("topic", "partition", "low")
        )
        for row in runs.toLocalIterator():
            islands.setdefault((row.topic, row.partition), []).append((row.low, row.high + 1))
    summaries = []
    for r in ranges:
        row = stats.get((r.topic, r.partition))
        summaries.append(partition_summary(
            topic=r.topic, partition=r.partition, start=r.start, end=r.end,
            rows_in_range=int(row.rows_in_range or 0) if row else 0,
            distinct_in_range=int(row.distinct_in_range or 0) if row else 0,
            islands=islands.get((r.topic, r.partition), []),
            rows_outside=int(row.rows_outside or 0) if row else 0,
        ))
    planned = {(r.topic, r.partition) for r in ranges}
    for (topic, partition), row in sorted(stats.items()):
        if (topic, partition) not in planned:
            summaries.append(partition_summary(topic=topic, partition=partition, start=0, end=0, rows_in_range=0,
                                               distinct_in_range=0, islands=[], rows_outside=int(row.rows_outside)))
    return summaries
