"""The staged -> explain -> publish handshake between a backfill's Spark job
and its runner (adapters.spark.handshake), without Spark: each case says why."""

from __future__ import annotations

import json
import threading

import pytest

from adapters.spark.handshake import (
    DISCARD,
    PUBLISH,
    STAGED,
    Decision,
    ProgressFile,
    await_decision,
    decision_for,
    read_json,
)


def staged(**partition) -> dict:
    return {"status": "running", "partitions": [{"duplicates": 0, "outside_range": 0, **partition}]}


@pytest.mark.parametrize(("partition", "expected", "why"), [
    ({}, PUBLISH, "a clean staged output is published by a job run by hand"),
    ({"duplicates": 2}, DISCARD, "duplicates are never published, even without a runner to ask"),
    ({"outside_range": 1}, DISCARD, "nor records outside the range"),
])
def test_without_a_channel_the_job_decides_alone(tmp_path, partition, expected, why):
    progress = ProgressFile(str(tmp_path / "progress.json"), total=10)
    result = staged(**partition)
    decision = await_decision(channel=None, result=result, result_file=str(tmp_path / "result.json"),
                              progress=progress)
    assert decision == expected, why
    assert not (tmp_path / "result.json").exists(), "nobody waits for a staged result"


def test_the_job_tells_the_runner_it_staged_then_waits_for_its_decision(tmp_path):
    """Steps 2 and 4: the staged counts are written before the phase says
    staged, so a runner that sees the phase finds the counts; the job waits
    until the decision comes, and the first one counts."""
    progress = ProgressFile(str(tmp_path / "progress.json"), total=10)
    channel = Decision()
    result = staged(delivered=10)
    decided: list[str] = []
    job = threading.Thread(target=lambda: decided.append(await_decision(
        channel=channel, result=result, result_file=str(tmp_path / "result.json"), progress=progress)))
    job.start()
    job.join(0.2)
    assert job.is_alive() and decided == [], "the job waits for the runner"
    assert read_json(tmp_path / "progress.json")["phase"] == STAGED
    assert read_json(tmp_path / "result.json")["status"] == STAGED
    assert read_json(tmp_path / "result.json")["partitions"][0]["delivered"] == 10
    channel.decide(DISCARD)
    channel.decide(PUBLISH)
    job.join(5)
    assert decided == [DISCARD]


@pytest.mark.parametrize(("report", "expected", "why"), [
    ([{"unexplained": 0, "problems": []}], PUBLISH, "everything explained: step 3 says publish"),
    ([{"unexplained": 4, "problems": ["4 offsets readable now were not delivered"]}], DISCARD,
     "an unexplained difference is never published"),
])
def test_the_runner_publishes_only_an_explained_output(report, expected, why):
    assert decision_for(report) == expected, why


def test_a_file_not_written_yet_or_half_written_reads_as_none(tmp_path):
    assert read_json(tmp_path / "progress.json") is None
    (tmp_path / "progress.json").write_text('{"phase": "wri')
    assert read_json(tmp_path / "progress.json") is None
    ProgressFile(str(tmp_path / "progress.json"), total=3).write("writing", 1, tasks_done=1)
    written = json.loads((tmp_path / "progress.json").read_text())
    assert {k: v for k, v in written.items() if k not in ("at", "phases")} == {
        "phase": "writing", "done": 1, "total": 3, "tasks_done": 1}
    assert written["phases"] == {"writing": written["at"]}


def test_the_progress_file_keeps_when_each_phase_began(tmp_path):
    progress = ProgressFile(str(tmp_path / "progress.json"), total=3)
    progress.write("writing", 0)
    began = read_json(tmp_path / "progress.json")["at"]
    progress.write("writing", 2)
    progress.write("verifying", 3)
    written = read_json(tmp_path / "progress.json")
    assert written["phases"] == {"writing": began, "verifying": written["at"]}


@pytest.mark.parametrize(("writes", "expected"), [
    ([("writing", 0), ("writing", 5)], ("writing", 5)),
    # A progress tracker's late write after the job staged: the runner waits for "staged" and must see it.
    ([("writing", 10), ("verifying", 10), (STAGED, 10), ("writing", 10)], (STAGED, 10)),
    ([("writing", 3), ("verifying", 10), ("writing", 4)], ("verifying", 10)),
    ([("starting", 0), ("writing", 2), ("starting", 0)], ("writing", 2)),
    ([(STAGED, 10), ("done", 10)], ("done", 10)),
])
def test_a_phase_the_job_has_left_is_never_written_again(tmp_path, writes, expected):
    progress = ProgressFile(str(tmp_path / "progress.json"), total=10)
    for phase, done in writes:
        progress.write(phase, done)
    written = read_json(tmp_path / "progress.json")
    assert (written["phase"], written["done"]) == expected
    assert list(written["phases"]) == list(dict.fromkeys(phase for phase, _ in writes))
