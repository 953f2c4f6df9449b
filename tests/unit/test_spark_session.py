"""Spark's JVM starts in $GAPWATCH_HOME/spark, never in the repository:
Spark writes run-time files (``spark-warehouse/``, ``derby.log``; 4.0.0 also
its session ``artifacts/``) under the JVM's working directory. No JVM starts here. A local master tries a task twice."""

from __future__ import annotations

import os

import pytest

from pyspark import SparkContext

from adapters.spark import session


def test_a_new_jvm_starts_in_gapwatch_home_and_the_process_goes_back(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPWATCH_HOME", str(tmp_path))
    monkeypatch.setattr(SparkContext, "_gateway", None)
    before = os.getcwd()
    with session._jvm_working_directory():
        assert os.getcwd() == str(tmp_path / "spark")
    assert os.getcwd() == before
    assert session.spark_dir() == tmp_path / "spark"


def test_a_running_jvm_is_left_where_it_is(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPWATCH_HOME", str(tmp_path))
    monkeypatch.setattr(SparkContext, "_gateway", object())
    before = os.getcwd()
    with session._jvm_working_directory():
        assert os.getcwd() == before
    assert not (tmp_path / "spark").exists()


def test_the_process_goes_back_when_the_jvm_fails_to_start(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPWATCH_HOME", str(tmp_path))
    monkeypatch.setattr(SparkContext, "_gateway", None)
    before = os.getcwd()
    try:
        with session._jvm_working_directory():
            raise RuntimeError("Java gateway process exited")
    except RuntimeError:
        pass
    assert os.getcwd() == before


@pytest.mark.parametrize(("master", "expected"), [
    ("local", "local[1,4]"),
    ("local[2]", "local[2,4]"),
    ("local[12]", "local[12,4]"),
    ("local[*]", "local[*,4]"),
    ("local[2,5]", "local[2,5]"),  # names its own tries
    ("local[*,1]", "local[*,1]"),
    ("spark://10.0.0.5:7077", "spark://10.0.0.5:7077"),
    ("yarn", "yarn"),
    ("k8s://https://k8s:6443", "k8s://https://k8s:6443"),
    ("local-cluster[2,1,1024]", "local-cluster[2,1,1024]"),
])
def test_a_local_master_tries_a_task_four_times_and_any_other_is_left_alone(master, expected):
    assert session.with_task_retries(master) == expected
