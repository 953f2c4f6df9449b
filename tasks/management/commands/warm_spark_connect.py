import time
import warnings

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from groups.selectors.clusters import cluster_to_warm_up_with
from adapters.kafka.adapter import KafkaUnavailable
from tasks.cluster_client import kafka_client
from adapters.spark.connect import ConnectUnavailable, connect_session, first_line, server_address
from adapters.spark.handshake import DISCARDED
from adapters.spark.spec import KafkaSecrets, KafkaSettings
from adapters.spark.warm_up import WARM_UP_RECORDS, warm_up, warm_up_kafka, warm_up_source

WARM_LINE = "the Spark Connect server is warm"


class Command(BaseCommand):
    help = ("Warm the Spark Connect server (SPARK_CONNECT_URL), waiting for it to answer first: one made-up "
            "Parquet job, then one backfill of a cluster's newest records, discarded (adapters/spark/warm_up.py).")

    def add_arguments(self, parser):
        parser.add_argument("--wait", type=float, default=180.0, help="seconds to wait for the server to answer")
        parser.add_argument("--records", type=int, default=WARM_UP_RECORDS, help="records of each of the two jobs")
        parser.add_argument("--cluster", default="",
                            help="the cluster whose newest records the second job reads (default: the first enabled "
                                 "cluster by name)")
        parser.add_argument("--no-kafka", action="store_true", help="the made-up job only")

    def handle(self, *args, **options):
        if not settings.SPARK_CONNECT_URL:
            raise CommandError("SPARK_CONNECT_URL is empty: no Spark Connect server to warm")
        if options["records"] < 1:
            raise CommandError("--records must be 1 or more")
        if "\x00" in options["cluster"]:
            raise CommandError("--cluster must not hold a NUL character")
        cluster = None if options["no_kafka"] else cluster_to_warm_up_with(name=options["cluster"])
        if options["cluster"] and cluster is None:
            raise CommandError(f"no cluster is named {options['cluster']!r}")
        where = server_address(settings.SPARK_CONNECT_URL)
        started = time.monotonic()
        deadline = started + options["wait"]
        while True:
            try:
                with warnings.catch_warnings():  # pyspark warns of every give-up while the server starts
                    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
                    spark = connect_session(settings.SPARK_CONNECT_URL, token=settings.SPARK_CONNECT_TOKEN)
                break
            except ConnectUnavailable as error:
                if time.monotonic() > deadline:
                    raise CommandError(f"no warm-up: {error}") from None
                time.sleep(1)
        try:
            try:
                done = warm_up(spark, settings.BACKFILL_OUTPUT, records=options["records"])
            except Exception as error:  # noqa: BLE001 - said in one line; the server still serves, cold
                raise CommandError(f"the warm-up of the Spark Connect server at {where} failed: "
                                   f"{first_line(error)}") from None
            summary = done["summary"]
            if (summary["delivered"], summary["missing"], summary["duplicates"]) != (options["records"], 0, 0):
                raise CommandError(f"the warm-up of the Spark Connect server at {where} counted wrong: {summary}")
            read = "no Kafka read (--no-kafka)" if options["no_kafka"] else self._read_kafka(spark, cluster, options)
        finally:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - a session already gone
                pass
        self.stdout.write(f"{WARM_LINE} at {where}: a Parquet write of {options['records']:,} made-up records, "
                          f"verified by {done['verified_by']}; {read}; in {time.monotonic() - started:.1f} s")

    def _read_kafka(self, spark, cluster, options) -> str:
        """The second job: a backfill of the cluster's newest records,
        discarded. What it did, in words; a cluster that cannot be read (or
        holds no record yet) leaves the server warm for writes only, said on
        stderr, not an error."""
        if cluster is None:
            return self._no_read("no Kafka read: no cluster is registered")
        config = cluster.cluster_config()
        try:
            source = warm_up_source(kafka_client(config),
                                    records=options["records"], timeout=settings.KAFKA_TIMEOUT_SECONDS)
        except KafkaUnavailable as error:
            return self._no_read(f"no Kafka read: cluster {cluster.name!r}: {error}")
        if source is None:
            return self._no_read(f"no Kafka read: cluster {cluster.name!r} holds no record yet")
        result = warm_up_kafka(spark, settings.BACKFILL_OUTPUT, kafka=KafkaSettings.of(config),
                               secrets=KafkaSecrets.of(config), source=source,
                               jars_dir=str(settings.SPARK_KAFKA_JARS_DIR))
        if result.get("status") != DISCARDED:
            return self._no_read(f"the Kafka read of {source.topic}[{source.partition}] failed: "
                                 f"{first_line(result.get('error') or result.get('status'))}")
        delivered = sum(p["delivered"] for p in result["partitions"])
        return (f"a backfill of {delivered:,} records of {source.topic}[{source.partition}] on cluster "
                f"{cluster.name!r}, verified by {result['verified_by']}, discarded")

    def _no_read(self, why: str) -> str:
        self.stderr.write(f"the Spark Connect server is warm for writes only: {why}")
        return why
