"""The records a backfill delivers, as the sinks store and mark them: the
columns of the data set and of its Parquet files, and the headers that a
replayed record carries."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADER_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
# The data set's columns, in order. topic and partition are also the folder
# levels (topic=<t>/partition=<p>/), so Parquet readers get them back.
RECORD_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")
PARQUET_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("headers", HEADER_TYPE),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
    ]
)
ORIGIN_TOPIC = "gapwatch-origin-topic"
ORIGIN_PARTITION = "gapwatch-origin-partition"
ORIGIN_OFFSET = "gapwatch-origin-offset"
JOB_HEADER = "gapwatch-job"
ATTEMPT_HEADER = "gapwatch-attempt"
