"""How a parallel run hands out its tests (tests/xdist_schedule.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.xdist_schedule import HEAVY, SECONDS, UNITS, after_crash, next_unit, unit_of, units_in_order

ROOT = Path(__file__).resolve().parents[2]


def test_it_puts_the_modules_of_a_shared_server_in_one_unit_and_any_other_module_in_its_own():
    assert unit_of("tests/faults/test_kafka_faults.py::test_a") == "kafka-fault-clusters"
    assert unit_of("tests/faults/test_worker_faults.py::test_b[x]") == "kafka-fault-clusters"
    assert unit_of("tests/integration/test_api.py::test_c") == "tests/integration/test_api.py"
    # The standalone cluster's modules, the secured backfills on it among them (its broker is its own).
    assert unit_of("tests/faults/test_secured_spark_cluster.py::test_d[scram-kafka]") == "spark-standalone"
    assert unit_of("tests/faults/test_spark_cluster.py::test_e") == "spark-standalone"


def test_it_queues_the_units_longest_first_then_the_unweighed_as_collected():
    nodeids = [
        "tests/unit/test_core.py::test_1",
        "tests/integration/test_backfill.py::test_2",
        "tests/faults/test_replicated_backfill.py::test_3",
        "tests/unit/test_core.py::test_4",
        "tests/faults/test_kafka_faults.py::test_5",
        "tests/integration/test_api.py::test_6",
        "tests/integration/test_kafka_releases.py::test_7",
    ]
    queue = units_in_order(nodeids)
    assert list(queue) == ["spark-connect", "kafka-fault-clusters", "spark-process", "tests/integration/test_api.py",
                           "tests/unit/test_core.py"]
    assert queue["kafka-fault-clusters"] == {"tests/faults/test_replicated_backfill.py::test_3": False,
                                             "tests/faults/test_kafka_faults.py::test_5": False}
    assert sorted(n for unit in queue.values() for n in unit) == sorted(nodeids), "every test once"


def test_a_worker_takes_a_light_unit_while_the_other_runs_a_heavy_one_if_one_is_left():
    queue = ["kafka-fault-clusters", "spark-process", "tests/integration/test_api.py", "tests/unit/test_core.py"]
    assert next_unit(queue, others_running=[]) == "kafka-fault-clusters"
    assert next_unit(queue, others_running=["chromium"]) == "kafka-fault-clusters"
    assert next_unit(queue, others_running=["spark-connect"]) == "tests/integration/test_api.py"
    assert next_unit(queue[:2], others_running=["spark-connect"]) == "kafka-fault-clusters"  # no light one left


def test_with_three_workers_two_heavy_units_run_at_once_and_the_third_worker_keeps_to_light_ones():
    queue = ["kafka-fault-clusters", "spark-process", "tests/integration/test_api.py"]
    assert next_unit(queue, others_running=["spark-connect"], heavy_at_once=2) == "kafka-fault-clusters"
    assert next_unit(queue, others_running=["spark-connect", "chromium"], heavy_at_once=2) == "kafka-fault-clusters"
    assert next_unit(queue, others_running=["spark-connect", "secured-broker"], heavy_at_once=2) == \
        "tests/integration/test_api.py"
    assert next_unit(queue[:2], others_running=["spark-connect", "secured-broker"], heavy_at_once=2) == \
        "kafka-fault-clusters"  # no light one left


def test_its_weights_and_heavy_units_name_units_that_exist():
    assert HEAVY <= set(UNITS)
    assert [unit for unit in SECONDS if unit not in UNITS and not (ROOT / unit).is_file()] == []


def test_every_module_it_names_exists():
    """A renamed module would silently leave its unit (and start its server on both workers)."""
    missing = [module for modules in UNITS.values() for module in modules if not (ROOT / module).is_file()]
    assert missing == []


def test_after_a_crash_the_running_test_is_not_handed_out_again_and_the_rest_of_its_unit_is():
    workload = {
        "kafka-fault-clusters": {"tests/faults/test_kafka_faults.py::test_1": True,
                                 "tests/faults/test_kafka_faults.py::test_2": False,
                                 "tests/faults/test_worker_faults.py::test_3": False},
        "tests/integration/test_api.py": {"tests/integration/test_api.py::test_4": False},
        "tests/unit/test_core.py": {"tests/unit/test_core.py::test_5": True},
    }
    crashed, left = after_crash(workload)
    assert crashed == "tests/faults/test_kafka_faults.py::test_2"
    assert left == {
        "kafka-fault-clusters": {"tests/faults/test_kafka_faults.py::test_1": True,
                                 "tests/faults/test_kafka_faults.py::test_2": True,
                                 "tests/faults/test_worker_faults.py::test_3": False},
        "tests/integration/test_api.py": {"tests/integration/test_api.py::test_4": False},
    }
    assert workload["kafka-fault-clusters"]["tests/faults/test_kafka_faults.py::test_2"] is False, "a copy"
    assert after_crash({"u": {"a::t": False}}) == ("a::t", {})
    assert after_crash({"u": {"a::t": True}}) == (None, {})
    assert after_crash({}) == (None, {})


CRASHING = '''
import os
from pathlib import Path

RAN = Path(__file__).with_name("ran.txt")


def note(name):
    with RAN.open("a") as ran:
        ran.write(name + "\\n")


def test_before():
    note("before")


def test_crashes():
    note("crashes")
    os.abort()


def test_after():
    note("after")
'''


def test_a_run_whose_worker_crashes_fails_that_test_once_and_runs_every_other(tmp_path):
    """A real run of three xdist workers (the Makefile's options) in which one worker aborts."""
    (tmp_path / "test_crash.py").write_text(CRASHING)
    for name in ("test_other_a.py", "test_other_b.py"):
        (tmp_path / name).write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {key: value for key, value in os.environ.items() if key not in ("DJANGO_SETTINGS_MODULE", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(ROOT)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "3", "--max-worker-restart=3", "-p", "tests.xdist_schedule",
         "-p", "no:django", "-p", "no:cacheprovider", "-q", "-rf", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert sorted((tmp_path / "ran.txt").read_text().split()) == ["after", "before", "crashes"], run.stdout
    assert "1 failed, 6 passed" in run.stdout, run.stdout
    assert "FAILED test_crash.py::test_crashes" in run.stdout, run.stdout
