"""Loaded with ``-p tests.xdist_schedule`` (pyproject's addopts): how
pytest-xdist hands the tests of a parallel run (``make test``: ``-n 2``) to
its workers.

- A module is one unit of work, run by one worker (``--dist loadfile``).
- Modules that share a costly session-scoped server (the fault tests'
  brokers, the standalone Spark cluster, a Spark Connect server, the secured
  broker with its identity provider, Chromium) form one unit, so that server
  starts once per run, not once per worker (xdist's own ``--dist loadgroup``
  ignores its marks on pytest 9.2: pytest-xdist#1386).
- The longest units go first (``UNITS`` lists them longest first), the
  rest follow in collection order, so both workers finish at about the same
  time.
"""

from __future__ import annotations

import pytest

# Unit name -> its modules. Longest first (measured with --durations; docs/development.md, "The tests").
UNITS: dict[str, tuple[str, ...]] = {
    "kafka-fault-clusters": (
        "tests/faults/test_kafka_faults.py",
        "tests/faults/test_worker_faults.py",
        "tests/faults/test_replicated_backfill.py",
        "tests/faults/test_split_poll.py",
    ),
    # One Keycloak (the session's) for both.
    "secured-broker": ("tests/integration/test_secured_clusters.py", "tests/integration/test_sso_oidc.py"),
    "spark-standalone": (
        "tests/faults/test_spark_cluster.py",
        "tests/faults/test_spark_connect_cluster.py",
        "tests/faults/test_secured_spark_cluster.py",
    ),
    "spark-connect": ("tests/integration/test_backfill_connect.py",),
    "spark-process": ("tests/integration/test_backfill.py",),
    # One Kafka 4.3.1 broker (the session's kafka_4_3) for the release matrix and the share-group loss tests.
    "kafka-4.3.1": (
        "tests/integration/test_kafka_releases.py",
        "tests/integration/test_share_group_detection.py",
        "tests/integration/test_share_groups.py",
        "tests/integration/test_share_group_repair.py",
    ),
    "chromium": (
        # These two share the demo's state too (tests/integration/demo_harness.py).
        "tests/integration/test_browser_access.py",
        "tests/integration/test_browser_bulk_approve.py",
        "tests/integration/test_browser_approve.py",
        "tests/integration/test_browser_console.py",
        "tests/integration/test_browser_csp.py",
        "tests/integration/test_browser_dashboard.py",
        "tests/integration/test_browser_lifecycle.py",
        "tests/integration/test_browser_login.py",
    ),
}
UNIT_OF_MODULE = {module: unit for unit, modules in UNITS.items() for module in modules}


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module's unit, else its module."""
    module = nodeid.split("::", 1)[0]
    return UNIT_OF_MODULE.get(module, module)


def units_in_order(nodeids: list[str]) -> dict[str, dict[str, bool]]:
    """xdist's work queue: each unit with its tests (not yet run), the units
    of ``UNITS`` first in that order, then the others as collected."""
    found: dict[str, dict[str, bool]] = {}
    for nodeid in nodeids:
        found.setdefault(unit_of(nodeid), {})[nodeid] = False
    ordered = {unit: found.pop(unit) for unit in UNITS if unit in found}
    ordered.update(found)
    return ordered


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

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
