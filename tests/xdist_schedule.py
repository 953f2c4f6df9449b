"""Loaded with ``-p tests.xdist_schedule`` (pyproject's addopts): how
pytest-xdist hands the tests of a parallel run (``make test``: ``-n 3``) to
its workers.

- A module is one unit of work, run by one worker (``--dist loadfile``).
- Modules that share a costly session-scoped server (the fault tests'
  brokers, the standalone Spark cluster, the Spark Connect server, the
  secured broker with its identity provider, Chromium) form one unit, so
  that server starts once per run, not once per worker (xdist's own
  ``--dist loadgroup`` ignores its marks on pytest 9.2: pytest-xdist#1386).
- Units go out longest first (``SECONDS``, measured), so both workers
  finish at about the same time.
- A worker that crashes (a native abort, a kill) fails the test it was
  running, once; the rest of its unit goes back to the queue and a new
  worker takes it (``--max-worker-restart``, the Makefile). xdist's own
  scheduler would hand the crashed test out again, to crash again.
- A worker about to start a unit that starts JVMs of its own (``HEAVY``:
  brokers, Spark, Keycloak) while all the other workers but one run such a
  unit takes the longest light unit instead, if one is left: one worker
  keeps to light units while any are left (with two workers, no two
  JVM-heavy units start at once: on two cores they slow each other's
  start-up timeouts down).
"""

from __future__ import annotations

import pytest

# Unit name -> its modules (docs/development.md, "The tests").
UNITS: dict[str, tuple[str, ...]] = {
    # The session's Spark Connect server (connect_server) and its one Kafka 4.3.1 broker (kafka_4_3):
    # the Connect backfills, the release matrix and the share-group loss tests, the transaction backfills,
    # and the expansion proof (with a 4.4.0 broker of its own for Kafka Streams' fixed topic, and the one
    # Chromium of this worker's session).
    "spark-connect": (
        "tests/integration/test_backfill_connect.py",
        "tests/integration/test_kafka_releases.py",
        "tests/integration/test_share_group_detection.py",
        "tests/integration/test_share_groups.py",
        "tests/integration/test_share_group_repair.py",
        "tests/integration/test_backfill_transactions.py",
        "tests/integration/test_backfill_verification.py",
        "tests/integration/test_backfill_replay_verification.py",
        "tests/integration/test_expansion_job.py",
    ),
    "kafka-fault-clusters": (
        "tests/faults/test_kafka_faults.py",
        "tests/faults/test_worker_faults.py",
        "tests/faults/test_replicated_backfill.py",
        "tests/faults/test_split_poll.py",
        # Its own beat and workers: not beside the other worker-killing tests.
        "tests/faults/test_busy_workers.py",
    ),
    # One Keycloak (the session's) for both.
    "secured-broker": ("tests/integration/test_secured_clusters.py", "tests/integration/test_sso_oidc.py"),
    "spark-standalone": (
        "tests/faults/test_spark_cluster.py",
        "tests/faults/test_spark_connect_cluster.py",
        "tests/faults/test_secured_spark_cluster.py",
    ),
    "spark-process": ("tests/integration/test_backfill.py",),
    "chromium": (
        # These two share the demo's state too (tests/harness/demo.py).
        "tests/integration/test_browser_access.py",
        "tests/integration/test_browser_bulk_approve.py",
        "tests/integration/test_browser_approve.py",
        "tests/integration/test_browser_console.py",
        "tests/integration/test_browser_csp.py",
        "tests/integration/test_browser_dashboard.py",
        "tests/integration/test_browser_lifecycle.py",
        "tests/integration/test_browser_login.py",
        "tests/integration/test_browser_expansion.py",
        "tests/integration/test_browser_fit.py",
        "tests/integration/test_browser_links.py",
        "tests/integration/test_browser_filter.py",
        "tests/integration/test_browser_dark.py",
        "tests/integration/test_topic_broker.py",
    ),
}
UNIT_OF_MODULE = {module: unit for unit, modules in UNITS.items() for module in modules}

# Units that start JVMs of their own: brokers, a Spark cluster, Spark processes, Keycloak.
HEAVY = frozenset({"spark-connect", "kafka-fault-clusters", "secured-broker", "spark-standalone", "spark-process"})

# Seconds of test time per unit (setup, call and teardown summed from a full run's junit XML,
# `make test PYTEST_ARGS="--junitxml=..."`), from a clean-clone run on 2026-11-29 (three workers, nothing
# else running) with two corrections: the Streams module as measured alone after its fix (3a420b2), and
# test_least_privilege's usual minute (its share consumer's close hung that run): weights for the
# order, not timings. A unit not listed weighs nothing (it goes after these, in collection order).
SECONDS: dict[str, float] = {
    "spark-connect": 607,
    "kafka-fault-clusters": 480,
    "spark-standalone": 261,
    "chromium": 286,
    "secured-broker": 227,
    "spark-process": 128,
    "tests/integration/test_guard.py": 93,
    "tests/integration/test_pickup.py": 75,
    "tests/faults/test_membership_faults.py": 67,
    "tests/integration/test_offset_reset.py": 49,
    "tests/integration/test_streams_and_connect_groups.py": 40,
    "tests/faults/test_load.py": 38,
    "tests/faults/test_redis_faults.py": 33,
    "tests/integration/test_detection.py": 31,
    "tests/integration/test_go_clients.py": 31,
    "tests/faults/test_expansion_faults.py": 30,
    "tests/integration/test_membership.py": 24,
    "tests/integration/test_kafka_adapter.py": 22,
    "tests/integration/test_expansion_plan.py": 20,
    "tests/faults/test_postgres_faults.py": 17,
    "tests/integration/test_settings_startup.py": 16,
    "tests/integration/test_poller.py": 15,
    "tests/integration/test_standing_protection.py": 14,
    "tests/integration/test_standing_rules.py": 12,
    "tests/integration/test_pages_browse.py": 10,
    "tests/integration/test_transactions.py": 10,
    "tests/integration/test_pages_findings.py": 9,
    "tests/integration/test_api.py": 9,
    "tests/integration/test_record_viewer.py": 8,
    "tests/integration/test_spark_source.py": 8,
}


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module's unit, else its module."""
    module = nodeid.split("::", 1)[0]
    return UNIT_OF_MODULE.get(module, module)


def units_in_order(nodeids: list[str]) -> dict[str, dict[str, bool]]:
    """xdist's work queue: each unit with its tests (not yet run), longest
    (``SECONDS``) first, units of equal weight as collected."""
    found: dict[str, dict[str, bool]] = {}
    for nodeid in nodeids:
        found.setdefault(unit_of(nodeid), {})[nodeid] = False
    return dict(sorted(found.items(), key=lambda item: -SECONDS.get(item[0], 0)))


def next_unit(queue: list[str], others_running: list[str], *, heavy_at_once: int = 1) -> str:
    """The unit a worker takes next from ``queue`` (longest first): the
    first, unless it is HEAVY while ``heavy_at_once`` other workers run a
    HEAVY unit (the number of workers less one) and a light one is
    waiting; then the first light one."""
    if queue[0] in HEAVY and sum(unit in HEAVY for unit in others_running) >= heavy_at_once:
        return next((unit for unit in queue if unit not in HEAVY), queue[0])
    return queue[0]


def after_crash(workload: dict[str, dict[str, bool]]) -> tuple[str | None, dict[str, dict[str, bool]]]:
    """A crashed worker's workload (unit -> test -> done): the test it was
    running (its first one not done, as xdist sends them in order), or
    None if it had finished all; and what is left to run, the crashed test
    not among it (each unit that still has a test to run, a copy)."""
    pending = [nodeid for tests in workload.values() for nodeid, done in tests.items() if not done]
    if not pending:
        return None, {}
    crashed = pending[0]
    left = {unit: {nodeid: done or nodeid == crashed for nodeid, done in tests.items()}
            for unit, tests in workload.items()}
    return crashed, {unit: tests for unit, tests in left.items() if not all(tests.values())}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            running = [unit for other, work in self.assigned_work.items() if other is not node
                       for unit, tests in work.items() if not all(tests.values())]
            heavy_at_once = max(1, min(2, len(self.nodes) - 1))
            self.workqueue.move_to_end(next_unit(list(self.workqueue), running, heavy_at_once=heavy_at_once),
                                       last=False)
            super()._assign_work_unit(node)

        def remove_node(self, node) -> str | None:
            crashed, left = after_crash(self.assigned_work.pop(node))
            if crashed is None:
                return None
            self.workqueue.update(left)
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

        def schedule(self) -> None:
            if self.collection is None and self.collection_is_completed and self._check_nodes_have_same_collection():
                # Fill the work queue in our order; the base class then hands it out as usual.
                self.collection = list(next(iter(self.registered_collections.values())))
                self.workqueue.update(units_in_order(self.collection))
                if not self.workqueue:
                    return
                for node in self.nodes:
                    if self.workqueue:
                        self._assign_work_unit(node)
                    else:
                        node.shutdown()  # fewer units than workers
                for node in self.nodes:
                    self._reschedule(node)
                return
            super().schedule()

    return UnitScheduling(config, log)
