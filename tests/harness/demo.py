"""The demo's stored state, made once per test session the way `make up`
makes it: ``demo.scenario``'s own producer and consumer groups against the
test broker (their metadata refresh shortened from 90 s so the groups pick
the new partitions up within seconds), observed by the real poller; plus two
groups with a loss the tests create (``scenarios.gap_scenario``, their
consumers stopped, so a reset can run). The database is dumped once built;
each test loads the dump into its own (flushed) database."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient
from django.core.management import call_command

from demo import scenario
from groups.models import Cluster, Finding
from tests.harness.kafka_clients import Broker, wait_until
from tests.harness.scenarios import gap_scenario, poll

# Short enough to be quick, longer than the demo producer's 5 s, so the new
# partitions usually hold records before a group takes them.
DEMO_REFRESH_MS = 6_000
EARLY_RECORDS = 60  # 6 s of work for demo-earliest (0.1 s a record)
SETTLED = {Finding.State.GAP, Finding.State.COVERED, Finding.State.EXPIRED}


@dataclass
class DemoStack:
    bootstrap: str
    dump: Path
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    @property
    def topic(self) -> str:
        return f"{scenario.TOPIC}.{self.suffix}"

    @property
    def groups(self) -> dict[str, str]:
        return {name: f"{name}-{self.suffix}" for name in scenario.GROUPS}

    @property
    def loss_topics(self) -> dict[str, str]:
        """The groups with a loss the tests create: group id -> its topic."""
        return {f"loss-{name}-{self.suffix}": f"loss.{name}.{self.suffix}" for name in ("a", "b")}

    def build(self) -> None:
        """1. Start the demo's clients on a topic of its own; 2. meanwhile,
        the two groups with a loss; 3. once the demo groups committed and a
        poll saw them reading, raise the topic (the demo's step 3); 4. poll
        until every new partition's finding is settled (a gap or covered);
        5. stop the clients and dump the database."""
        self.broker = Broker(self.bootstrap)
        cluster = Cluster.objects.create(name="local", bootstrap_servers=self.bootstrap)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        scenario.ensure_topic(admin, self.topic)
        self.broker.topics.append(self.topic)
        self.threads, committed = scenario.start_clients(self.bootstrap, topic=self.topic, groups=self.groups,
                                                         stop=self.stop, refresh_ms=DEMO_REFRESH_MS)
        for group_id, topic in self.loss_topics.items():
            gap_scenario(self.broker, cluster, topic, group_id)
        wait_until(lambda: all(event.is_set() for event in committed.values()), what="the demo groups to commit")
        wait_until(lambda: poll(cluster) and cluster.groups.filter(
            group_id__in=self.groups.values(), group_topics__topic__name=self.topic).count() == 2,
            interval=0.5, what="a poll to see the demo groups reading")
        # Its policy declared, as an operator would: the slow group's partitions are covered
        # whether or not a poll sees the new partitions before its 6 s refresh picks them up
        # (the evidence below needs one to; CI once lost that race: a `gap` of possible offsets).
        cluster.groups.filter(group_id=self.groups["demo-earliest"]).update(declared_policy="earliest")
        scenario.raise_partitions(admin, self.topic)
        # The demo's producer learns of the new partitions within its 5 s refresh; written to at once
        # here, they hold records before any group can take them, as the demo's story has it, and as
        # many as the demo's 90 s would pile up: the slow `earliest` group then takes seconds to drain
        # them, so polls see its commits below the pre-pickup end (its evidence of being covered).
        new = range(scenario.INITIAL_PARTITIONS, scenario.RAISED_PARTITIONS)
        wait_until(lambda: len(self.broker.producer.list_topics(self.topic, timeout=10).topics[self.topic].partitions)
                   == scenario.RAISED_PARTITIONS, what="the test producer to see the new partitions")
        for partition in new:
            self.broker.produce(self.topic, partition, EARLY_RECORDS, prefix="early")

        def settled() -> bool:
            poll(cluster)
            states = list(Finding.objects.filter(topic__name=self.topic).values_list("state", flat=True))
            return len(states) == 2 * (scenario.RAISED_PARTITIONS - scenario.INITIAL_PARTITIONS) and set(
                states) <= SETTLED

        wait_until(settled, timeout=120, interval=0.5, what="the demo's findings to settle")
        self.stop_clients()
        call_command("dumpdata", "groups", output=str(self.dump), verbosity=0)

    def load(self) -> None:
        """The dump, into a test's database (loaddata moves the id sequences past it)."""
        call_command("loaddata", str(self.dump), verbosity=0)

    def stop_clients(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=20)

    def close(self) -> None:
        self.stop_clients()
        self.broker.close()
