import time
import warnings

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tasks.spark.connect import ConnectUnavailable, connect_session, first_line, server_address
from tasks.spark.warm_up import WARM_UP_RECORDS, warm_up

WARM_LINE = "the Spark Connect server is warm"


class Command(BaseCommand):
    help = ("Warm the Spark Connect server (SPARK_CONNECT_URL) with one made-up Parquet job "
            "(tasks/spark/warm_up.py), waiting for it to answer first.")

    def add_arguments(self, parser):
        parser.add_argument("--wait", type=float, default=180.0, help="seconds to wait for the server to answer")
        parser.add_argument("--records", type=int, default=WARM_UP_RECORDS)

    def handle(self, *args, **options):
        if not settings.SPARK_CONNECT_URL:
            raise CommandError("SPARK_CONNECT_URL is empty: no Spark Connect server to warm")
        if options["records"] < 1:
            raise CommandError("--records must be 1 or more")
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
            done = warm_up(spark, settings.BACKFILL_OUTPUT, records=options["records"])
        except Exception as error:  # noqa: BLE001 - said in one line; the server still serves, cold
            raise CommandError(f"the warm-up of the Spark Connect server at {where} failed: {first_line(error)}") from None
        finally:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - a session already gone
                pass
        summary = done["summary"]
        if (summary["delivered"], summary["missing"], summary["duplicates"]) != (options["records"], 0, 0):
            raise CommandError(f"the warm-up of the Spark Connect server at {where} counted wrong: {summary}")
        self.stdout.write(f"{WARM_LINE} at {where}: a Parquet write of {options['records']:,} made-up records, "
                          f"verified by {done['verified_by']}, in {time.monotonic() - started:.1f} s")
