"""Where a backfill delivers the records it read, and how it counts what it
delivered. Runs inside the Spark job (``adapters.spark.backfill_job``): no
Django, no ORM. ``backfill_job.make_sink`` picks one of three sinks:

- ``parquet.ParquetSink`` writes to a staging folder, proves what the staging
  folder holds from its files' footers and a checksum of the offsets the
  write observed (``adapters.spark.offset_check``; read back from storage when
  that proof fails, to locate every hole and duplicate), and only then
  swaps it in as ``<output>/<job id>/`` (``adapters.spark.handshake``): a re-run
  replaces the previous output, never adds to it;
- ``kafka.KafkaSink`` produces to the replay topic (partition p of the source
  goes to partition p of the replay topic, so per-partition order is kept),
  with origin headers (``records``), then reads the replay topic back from
  where it stood before the write and counts the records that carry this
  attempt's headers;
- ``handler.HandlerSink`` calls a Python function once per Spark partition
  with an iterator of records (``handler_call``; on Spark Connect the code
  is shipped to the session, ``code_archive``), and counts the records the
  function pulled.

Each has ``needs_publish``, ``verified_by`` (how ``summarize`` knew), ``describe()``, ``prepare()`` (before reading),
``write(records)``, ``summarize(ranges)``, ``publish(manifest)`` and
``discard()``, and ends with the same per-partition summary
(``adapters.spark.counting``; Spark counts delivered offsets in ``summary``):
how many of the offsets ``[start, end)`` it delivered, which offsets are
missing (``holes``, half-open ranges), duplicates and records outside the
range. The runner (``tasks.backfill.runner``) explains the missing offsets.
"""
