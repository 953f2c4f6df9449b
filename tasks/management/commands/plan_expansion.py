"""The plan of adding partitions to a topic (issue 33, item 1), like the
page's and the API's: per group that reads it, its policy and where that
comes from, what the expansion does to it and why, the offsets it is
expected to miss (an estimate), and the broker's verdict, asked here with
CreatePartitions validate_only. Nothing changes on the cluster: expansions
are only planned so far.

    manage.py plan_expansion --cluster C --topic T --partitions N [--json]
"""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from groups.selectors.clusters import cluster_named, topic_named
from groups.services.expansion.plan import expansion_plan_as_dict, expansion_plan_of
from groups.text import text_table
from tasks.expansion.verdict import partitions_verdict

COLUMNS = ("GROUP", "KIND", "STATE", "MEMBERS", "POLICY", "SOURCE", "OUTCOME", "EXPECTED-MISSED (ESTIMATE)")


def _missed(missed: dict) -> str:
    if missed["low"] is None:
        return "unknown"
    return str(missed["low"]) if missed["low"] == missed["high"] else f"{missed['low']}-{missed['high']}"


class Command(BaseCommand):
    help = "Plan (dry run only) raising a topic's partition count: what it does to every group reading the topic."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True, help="cluster name, as registered")
        parser.add_argument("--topic", required=True, help="topic name")
        parser.add_argument("--partitions", required=True, type=int, help="the new total partition count")
        parser.add_argument("--json", action="store_true", help="print the plan as the API answers it")

    def handle(self, *args, **options):
        cluster = cluster_named(name=options["cluster"])
        if cluster is None:
            raise CommandError(f"no cluster named {options['cluster']!r}")
        topic = topic_named(cluster=cluster, name=options["topic"])
        if topic is None:
            raise CommandError(f"topic {options['topic']!r} is not known on cluster {cluster.name!r}: no poll has "
                               f"listed it (run `manage.py poll_now --cluster {cluster.name}` if it was just created)")
        try:
            planned = expansion_plan_of(
                cluster=cluster, topic=topic, partitions=options["partitions"],
                verdict=lambda c, name, count: partitions_verdict(cluster=c, topic=name, count=count))
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None
        plan = expansion_plan_as_dict(planned)
        if options["json"]:
            self.stdout.write(json.dumps(plan, indent=2))
            return
        self._print(plan)

    def _print(self, plan: dict) -> None:
        self.stdout.write(f"topic {plan['topic']!r} on {plan['cluster']}: {plan['current_partitions']} -> "
                          f"{plan['new_partitions']} partitions (dry run: nothing changes)")
        verdict = plan["broker_verdict"]
        self.stdout.write("broker: " + ("accepts" if verdict["accepted"] else "REFUSES") + f": {verdict['reason']}")
        rate = plan["produce_rate"]
        self.stdout.write(f"produce rate: {rate['offsets_per_second']} offsets/s, measured from "
                          f"{rate['measured_from']} to {rate['measured_until']}" if rate else
                          "produce rate: not measured yet (two polls of the topic are needed)")
        for line in text_table(COLUMNS, [
            (repr(g["group"]), g["kind"], g["state"] or "-", g["members"], g["policy"], g["policy_source_label"],
             g["outcome_label"], _missed(g["expected_missed"]))
            for g in plan["groups"]
        ]):
            self.stdout.write(line)
        for g in plan["groups"]:
            self.stdout.write(f"{g['group']!r}: {g['outcome_label']}: {g['reason']}")
        if not plan["groups"]:
            self.stdout.write("no group reads this topic")
