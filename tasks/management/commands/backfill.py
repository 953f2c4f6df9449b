"""Backfill one partition's offset range with the Spark job: prints the plan
from live offsets by default; ``--execute`` runs it at once (synchronously,
in its own process, like a job) and prints the verification.

    manage.py backfill --cluster C --topic T --partition P --start S --end E \\
        [--sink parquet|kafka] [--replay-topic R] [--execute]
    manage.py backfill --job ID [--execute]      # show, or run, an existing backfill job

A command-line backfill has no job row: its Parquet output is named
``cli-<topic>-<partition>-<start>-<end>`` under BACKFILL_OUTPUT, so running
the same command again replaces it. It is audited as a system action.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from groups.services.jobs import backfill_record_cli_run
from groups.models import RemediationJob
from groups.selectors.clusters import cluster_named, topic_names
from groups.selectors.jobs import job_find_backfill
from groups.domain.planning import PlanError, plan_backfill
from groups.domain.read_isolation import ISOLATION_LEVELS, READ_COMMITTED
from groups.text import text_table
from groups.domain.sinks import DEFAULT_SINK, GROUP_SINKS, KAFKA, backfill_sink_for
from tasks.backfill.executor import cluster_request
from tasks.backfill.runner import BackfillFailed, BackfillRunner
from tasks.celery_tasks import run_remediation_job
from adapters.kafka import KafkaUnavailable

PLAN_COLUMNS = ("TOPIC", "PARTITION", "START", "END", "RECORDS", "LOG-START", "HIGH-WATERMARK", "EXPIRED", "TO-READ")
RESULT_COLUMNS = ("TOPIC", "PARTITION", "EXPECTED", "DELIVERED", "EXPLAINED", "UNEXPLAINED")


class Command(BaseCommand):
    help = "Plan (default) or run (--execute) a Spark backfill of [start, end) of one partition."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", help="cluster name, as registered")
        parser.add_argument("--topic")
        parser.add_argument("--partition", type=int)
        parser.add_argument("--start", type=int, help="first offset to deliver")
        parser.add_argument("--end", type=int, help="offset after the last one to deliver (exclusive)")
        parser.add_argument("--sink", choices=GROUP_SINKS, default="", help=f"default {DEFAULT_SINK}")
        parser.add_argument("--replay-topic", default="", help="for --sink kafka (default <topic>.replay)")
        parser.add_argument("--isolation", choices=ISOLATION_LEVELS, default=READ_COMMITTED,
                            help="the isolation.level of the group it is for (read_uncommitted delivers aborted "
                                 "records too); default read_committed")
        parser.add_argument("--job", type=int, help="an existing backfill job instead of a range")
        parser.add_argument("--execute", action="store_true", help="run it now; without it, only print the plan")

    def handle(self, *args, **options):
        if options["job"] is not None:
            return self._job(options["job"], execute=options["execute"])
        missing = [f"--{name}" for name in ("cluster", "topic", "partition", "start", "end") if options[name] is None]
        if missing:
            raise CommandError(f"missing {', '.join(missing)} (or give --job ID)")
        topic, start, end, partition = options["topic"], options["start"], options["end"], options["partition"]
        try:
            ranges = plan_backfill(ranges=[(topic, partition, start, end)])
        except PlanError as error:
            raise CommandError(f"{error} (--partition and --start must not be negative, and --end must be greater "
                               "than --start: the range is [start, end))") from None
        cluster = cluster_named(name=options["cluster"])
        if cluster is None:
            raise CommandError(f"no cluster named {options['cluster']!r}")
        try:
            # No group here: the sink given, else the default; a replay topic named by the operator is theirs to
            # reuse, as a group's configured one is.
            sink = backfill_sink_for(
                sink=options["sink"], replay_topic="", handler="", default_sink="",
                configured_replay_topic=options["replay_topic"], handlers=(), sources=[topic],
                existing_topics=topic_names(cluster=cluster),
            )
        except PlanError as error:
            raise CommandError(str(error)) from None
        run_id = f"cli-{topic}-{partition}-{start}-{end}"
        request = cluster_request(cluster=cluster, ranges=tuple(ranges), sink=sink, run_id=run_id,
                                  isolation=options["isolation"])
        runner = BackfillRunner(request, on_progress=self._progress)
        try:
            prepared = runner.preflight()
        except (PlanError, KafkaUnavailable) as error:
            raise CommandError(str(error)) from None
        self._table(PLAN_COLUMNS, [
            (p.range.topic, p.range.partition, p.range.start, p.range.end, p.range.count, p.log_start,
             p.high_watermark, p.read_start - p.range.start, p.to_read) for p in prepared])
        for p in prepared:
            if p.read_start > p.range.start:
                self.stdout.write(f"{p.range.topic}[{p.range.partition}]: offsets [{p.range.start}, {p.read_start}) "
                                  "are below the log start (expired): reported, not read")
        destination = (f"replay topic {request.replay_topics[topic]}" if sink.kind == KAFKA
                       else f"Parquet at {request.output.rstrip('/')}/{run_id}/ (replaced if it exists)")
        self.stdout.write(f"sink: {destination}")
        if not options["execute"]:
            self.stdout.write("plan only: nothing read (add --execute to run the Spark job)")
            return
        self.stdout.write(f"running the Spark job ({request.master})")
        try:
            result = runner.run()
        except BackfillFailed as failure:
            self._audit(cluster, run_id, request, outcome="failed", result=failure.result)
            if failure.result.get("partitions"):
                self._verification(failure.result)
            raise CommandError(f"backfill failed: {failure.reason}\n{failure.error}") from None
        except (PlanError, KafkaUnavailable) as error:
            raise CommandError(str(error)) from None
        self._audit(cluster, run_id, request, outcome="succeeded", result=result)
        self._verification(result)
        self.stdout.write(f"succeeded: {result['delivered']} of {result['expected']} records delivered; "
                          f"every difference explained")

    def _job(self, job_id: int, *, execute: bool) -> None:
        job = job_find_backfill(job_id=job_id)
        if job is None:
            raise CommandError(f"no backfill job {job_id}")
        self._table(("TOPIC", "PARTITION", "START", "END", "RECORDS"),
                    [(r["topic"], r["partition"], r["start"], r["end"], r["end"] - r["start"]) for r in job.plan])
        self.stdout.write(f"job {job.id}: {job.status}; sink {job.params.get('sink', '(none recorded)')}"
                          + (f"; {job.status_reason}" if job.status_reason else ""))
        if not execute:
            return
        if job.status not in (RemediationJob.Status.APPROVED, RemediationJob.Status.QUEUED,
                              RemediationJob.Status.RUNNING):
            raise CommandError(f"job {job.id} is {job.status}: only an approved, queued or running job can be run")
        run_remediation_job.apply(args=(job.id,)).get(propagate=True)
        job.refresh_from_db()
        if job.result.get("partitions"):
            self._verification(job.result)
        if job.status != RemediationJob.Status.SUCCEEDED:
            raise CommandError(f"job {job.id} {job.status}: {job.status_reason}\n{job.error}")
        self.stdout.write(f"job {job.id} succeeded: {job.status_reason}")

    def _progress(self, done: int, total: int) -> None:
        if total:
            self.stderr.write(f"  {done} of {total} records")

    def _verification(self, result: dict) -> None:
        self._table(RESULT_COLUMNS, [
            (p["topic"], p["partition"], p["expected"], p["delivered"],
             ", ".join(f"{count} {cause}" for cause, count in p["explained"].items()) or "-", p["unexplained"])
            for p in result["partitions"]])
        for p in result["partitions"]:
            for missing in p["missing_ranges"][:20]:
                self.stdout.write(f"{p['topic']}[{p['partition']}]: [{missing['start']}, {missing['end']}) "
                                  f"{missing['cause'].replace('_', ' ')}")
            for problem in p.get("problems", []):
                self.stdout.write(f"{p['topic']}[{p['partition']}]: {problem}")
        sink = result.get("sink", {})
        if sink.get("output"):
            self.stdout.write(f"output: {sink['output']}")
        elif sink.get("topics"):
            self.stdout.write("replayed to: " + ", ".join(f"{s} -> {r}" for s, r in sink["topics"].items()))
        for attempt in result.get("attempts", []):
            if attempt.get("mode") == "connect":
                where = f"the Spark Connect server {attempt.get('server')} (session {attempt.get('session_id')})"
            else:
                where = f"a Spark process of its own (pid {attempt['pid']})"
            self.stdout.write(f"attempt {attempt['attempt']}: {attempt['outcome']} on {where}")

    def _table(self, columns: tuple[str, ...], rows: list[tuple]) -> None:
        for line in text_table(columns, rows):
            self.stdout.write(line)

    def _audit(self, cluster, run_id: str, request, *, outcome: str, result: dict) -> None:
        backfill_record_cli_run(cluster=cluster, run_id=run_id, sink=request.sink, outcome=outcome,
                                ranges=[r.as_dict() for r in request.ranges], result=result)
