"""A backfill's stages and the job page's lines (groups.domain.job_progress):
each case says why its answer is right."""

from __future__ import annotations

import pytest

from groups.domain.job_progress import EXPLAIN_PUBLISH, READ_WRITE, VERIFY, backfill_stages, stage_lines


@pytest.mark.parametrize("phases, phase, done, at, expected, why", [
    ({"starting": 100.0}, "starting", 0, 100.5, [], "no stage before the read starts"),
    ({"starting": 100.0, "writing": 101.0}, "writing", 400, 103.0,
     [(READ_WRITE, 101.0, 103.0, 400, False)], "the read and write so far: its estimate of records done"),
    ({"writing": 101.0, "verifying": 105.0}, "verifying", 1000, 105.5,
     [(READ_WRITE, 101.0, 105.0, 1000, True), (VERIFY, 105.0, 105.5, 0, False)],
     "verifying ends the read and write with all its records; none verified until it ends"),
    ({"writing": 101.0, "verifying": 105.0, "staged": 105.2, "done": 105.9}, "done", 1000, 105.9,
     [(READ_WRITE, 101.0, 105.0, 1000, True), (VERIFY, 105.0, 105.2, 1000, True),
      (EXPLAIN_PUBLISH, 105.2, 105.9, 1000, True)], "done ends every stage"),
    ({"writing": 101.0, "verifying": 101.1, "done": 101.2}, "done", 1000, 101.2,
     [(READ_WRITE, 101.0, 101.1, 1000, True), (VERIFY, 101.1, 101.2, 1000, True)],
     "a sink that delivers as it writes has nothing to publish"),
])
def test_it_derives_the_stages_from_the_phases_the_job_went_through(phases, phase, done, at, expected, why):
    stages = backfill_stages(phases=phases, phase=phase, done=done, total=1000, at=at)
    assert [(s["name"], s["started"], s["at"], s["done"], s["finished"]) for s in stages] == expected, why


def test_a_running_stage_has_its_rate_so_far_and_an_estimate_of_the_time_left():
    stages = backfill_stages(phases={"writing": 100.0}, phase="writing", done=250, total=1000, at=102.0)
    [line] = stage_lines(stages, now=105.0)
    # 250 records in the 5 s to now: 50 per second, 750 left.
    assert (line.seconds, line.rate, line.left_estimate, line.finished) == (5.0, 50.0, 15.0, False)


def test_a_stage_without_a_record_yet_has_no_rate_and_no_estimate():
    stages = backfill_stages(phases={"writing": 100.0}, phase="writing", done=0, total=1000, at=100.0)
    [line] = stage_lines(stages, now=101.0)
    assert (line.rate, line.left_estimate) == (None, None)


def test_a_finished_stage_keeps_its_own_time_and_rate_and_has_nothing_left():
    stages = backfill_stages(phases={"writing": 100.0, "verifying": 104.0}, phase="verifying", done=1000,
                             total=1000, at=104.0)
    line = stage_lines(stages, now=200.0)[0]
    assert (line.seconds, line.rate, line.left_estimate) == (4.0, 250.0, None)


@pytest.mark.parametrize("phases, phase, done, at, now, expected, why", [
    ({"writing": 100.0, "verifying": 100.25}, "verifying", 1000, 100.25, 100.5,
     ("read and write", 1000, 1000, 0.25, 4000.0, None),
     "a stage shorter than a second keeps its own time and its rate over that time"),
    ({"writing": 100.0, "verifying": 100.0}, "verifying", 1000, 100.0, 100.0,
     ("read and write", 1000, 1000, 0.0, None, None),
     "two phases stamped at the same instant: no time, so no rate (not a division by zero)"),
    ({"writing": 100.0}, "writing", 1000, 104.0, 105.0, ("read and write", 1000, 1000, 5.0, 200.0, 0.0),
     "every record read and written, the phase not moved on yet: nothing left to estimate"),
])
def test_a_stage_line_in_every_field(phases, phase, done, at, now, expected, why):
    (line, *_) = stage_lines(backfill_stages(phases=phases, phase=phase, done=done, total=1000, at=at), now=now)
    assert (line.name, line.done, line.total, line.seconds, line.rate, line.left_estimate) == expected, why
