"""Reset a consumer group's offsets, like Kafka's own reset tool: a dry run
by default that prints the plan from live offsets; ``--execute`` creates an
audited job (a system action, "cli") and runs it at once. A share group's
"committed" offsets are its start offsets (``tasks.offset_reset.ShareGroupOffsets``).

    manage.py reset_offsets --cluster C --group G --topic T[:P,P] \\
        (--to-earliest | --to-offset N | --to-datetime ISO | --shift-by N) [--execute]
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from groups.models import RemediationJob
from groups.selectors.clusters import cluster_named, group_named
from groups.domain.planning import PlanError, PlannedReset, ResetTarget, moment_ms, plan_reset
from groups.services.remediation import SOURCE_CLI, DuplicateJob
from groups.services.resets import reset_job_create
from groups.text import text_table
from tasks.celery_tasks import run_remediation_job
from adapters.kafka import KafkaUnavailable
from tasks.offset_reset import active_group_reason, group_offsets_of, reset_adapter, reset_positions

COLUMNS = ("TOPIC", "PARTITION", "LOG-START", "HIGH-WATERMARK", "CURRENT", "PLANNED", "REDELIVERED", "SKIPPED")


def parse_topic(spec: str) -> tuple[str, list[int] | None]:
    """``T`` (every partition) or ``T:P,P``."""
    topic, colon, partitions = spec.partition(":")
    if not topic:
        raise CommandError(f"--topic {spec!r}: a topic name is needed, as T or T:P,P")
    if not colon:
        return topic, None
    try:
        numbers = sorted({int(p) for p in partitions.split(",") if p.strip()})
    except ValueError:
        raise CommandError(f"--topic {spec!r}: partitions must be whole numbers, as T:0,3") from None
    if not numbers:
        raise CommandError(f"--topic {spec!r}: no partition after the colon")
    if numbers[0] < 0:
        raise CommandError(f"--topic {spec!r}: a partition number must not be negative")
    return topic, numbers


def parse_datetime_ms(text: str) -> int:
    """An ISO 8601 date-time as epoch milliseconds; without an offset it is UTC
    (the pages and the API read it the same way: ``planning.moment_ms``)."""
    try:
        return moment_ms(text)
    except PlanError:
        raise CommandError(f"--to-datetime {text!r} is not an ISO 8601 date-time, like 2025-03-01T12:00:00Z") from None


class Command(BaseCommand):
    help = "Plan (dry run) or execute (--execute) an offset reset of one consumer group."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True, help="cluster name, as registered")
        parser.add_argument("--group", required=True, help="consumer group id")
        parser.add_argument("--topic", required=True, action="append",
                            help="T (all partitions) or T:P,P; may be repeated")
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--to-earliest", action="store_true", help="the log start of each partition")
        target.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the partition)")
        target.add_argument("--to-datetime", metavar="ISO",
                            help="the first message at or after this time (UTC unless it names an offset)")
        target.add_argument("--shift-by", type=int, metavar="N", help="move each committed offset by N (+/-)")
        parser.add_argument("--execute", action="store_true",
                            help="commit the plan (the group must be Empty); without it, only print the plan")

    def handle(self, *args, **options):
        cluster = cluster_named(name=options["cluster"])
        if cluster is None:
            raise CommandError(f"no cluster named {options['cluster']!r}")
        group = group_named(cluster=cluster, group_id=options["group"])
        if group is None or not group.present:
            raise CommandError(
                f"group {options['group']!r} is not known on cluster {cluster.name!r}: no poll has listed it "
                f"(run `manage.py poll_now --cluster {cluster.name}` if it was just created)"
            )
        target = self._target(options)
        adapter = reset_adapter(cluster)
        partitions = self._partitions(adapter, [parse_topic(spec) for spec in options["topic"]])
        try:
            with group_offsets_of(cluster=cluster, group=group, adapter=adapter) as offsets:
                status = offsets.describe_group(group_id=group.group_id)
                positions, at_time = reset_positions(adapter=adapter, group_id=group.group_id,
                                                     partitions=partitions, target=target, offsets=offsets)
            plan = plan_reset(target=target, positions=positions, timestamp_offsets=at_time)
        except (PlanError, KafkaUnavailable) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"group {group.group_id!r} on {cluster.name}: {status.state}, "
                          f"{status.member_count} member(s); target {target.kind}"
                          + ("" if target.value is None else f" {target.value}"))
        self._print_plan(plan)
        if not status.inactive:
            self.stdout.write(f"note: {active_group_reason(status)}; an executed job waits until it is Empty")
        if not options["execute"]:
            self.stdout.write("dry run: nothing committed (add --execute to reset)")
            return
        self._execute(cluster, group, target, plan)

    def _target(self, options) -> ResetTarget:
        try:
            if options["to_earliest"]:
                return ResetTarget.parse(kind="earliest", value=None)
            if options["to_offset"] is not None:
                return ResetTarget.parse(kind="offset", value=options["to_offset"])
            if options["shift_by"] is not None:
                return ResetTarget.parse(kind="shift", value=options["shift_by"])
            target = ResetTarget.parse(kind="timestamp", value=parse_datetime_ms(options["to_datetime"]))
            target.require_not_future(now_ms=int(timezone.now().timestamp() * 1000))
            return target
        except PlanError as error:
            raise CommandError(str(error)) from None

    def _partitions(self, adapter, specs: list[tuple[str, list[int] | None]]) -> list[tuple[str, int]]:
        """Every requested (topic, partition); a whole topic means all its partitions now."""
        partitions: set[tuple[str, int]] = set()
        for topic, numbers in specs:
            if numbers is None:
                try:
                    details = adapter.describe_topic(topic)
                except KafkaUnavailable as error:
                    raise CommandError(str(error)) from None
                if details is None:
                    raise CommandError(f"topic {topic!r} does not exist on this cluster")
                numbers = list(details.partition_ids)
            partitions.update((topic, n) for n in numbers)
        return sorted(partitions)

    def _print_plan(self, plan: list[PlannedReset]) -> None:
        for line in text_table(COLUMNS, [
            (p.topic, p.partition, p.log_start, p.high_watermark, "-" if p.current is None else p.current,
             p.planned, p.redelivered, p.skipped)
            for p in plan
        ]):
            self.stdout.write(line)
        for p in plan:
            if p.note:
                self.stdout.write(f"{p.topic}[{p.partition}]: {p.note}")

    def _execute(self, cluster, group, target: ResetTarget, plan: list[PlannedReset]) -> None:
        try:
            job = reset_job_create(cluster=cluster, group=group, target=target, plan=plan, source=SOURCE_CLI,
                                   enqueue=False)
        except DuplicateJob as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"job {job.id} created; running it")
        run_remediation_job.apply(args=(job.id,)).get(propagate=True)
        job.refresh_from_db()
        if job.status == RemediationJob.Status.SUCCEEDED:
            for row in job.result["partitions"]:
                before = "-" if row["before"] is None else row["before"]
                self.stdout.write(f"{row['topic']}[{row['partition']}]: {before} -> {row['after']} (read back)")
            self.stdout.write(f"job {job.id} succeeded: verified "
                              f"{job.result['approval_to_verified_seconds']}s after approval")
            return
        if job.status == RemediationJob.Status.WAITING:
            raise CommandError(f"job {job.id} is waiting: {job.status_reason}. Every poll retries it, for at most "
                               f"RESET_WAIT_DEADLINE_SECONDS; cancel it on the jobs page", returncode=2)
        raise CommandError(f"job {job.id} {job.status}: {job.error or job.status_reason}")
