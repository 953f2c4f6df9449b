import json

from django.core.management.base import BaseCommand, CommandError

from groups.selectors.clusters import cluster_ids_enabled, cluster_named
from tasks.polling import poll_cluster


class Command(BaseCommand):
    help = "Poll clusters once, synchronously, and print a summary."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", help="cluster name (default: every enabled cluster)")
        parser.add_argument("--json", action="store_true", help="print JSON: duration, counts, new findings")

    def handle(self, *args, **options):
        name = options["cluster"]
        if name:
            named = cluster_named(name=name)
            if named is None:
                raise CommandError(f"no cluster named {name!r}")
            cluster_ids = [named.id]  # enabled or not: asked for by name
        else:
            cluster_ids = cluster_ids_enabled()
        summaries = [poll_cluster(cluster_id=cluster_id) for cluster_id in cluster_ids]
        if options["json"]:
            self.stdout.write(json.dumps([s.as_dict() for s in summaries], indent=2))
        else:
            for s in summaries:
                if not s.ok:
                    self.stdout.write(f"{s.cluster}: FAILED ({s.error})")
                    continue
                self.stdout.write(
                    f"{s.cluster}: {s.topics} topics, {s.partitions} partitions, {s.groups} groups, "
                    f"{s.new_generations} new generations, {len(s.new_findings)} new findings, "
                    f"{s.open_findings} open findings in {s.kafka_seconds + s.write_seconds:.2f}s "
                    f"(kafka {s.kafka_seconds:.2f}s, writes {s.write_seconds:.2f}s)"
                )
        if any(not s.ok for s in summaries):
            raise CommandError("a poll failed")

