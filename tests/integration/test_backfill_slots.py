"""Backfill slots (tasks/backfill/driver.py, groups.services.jobs.backfill_take_slot)
on the real database: at most BACKFILL_DRIVERS backfills run at once; the
others stay queued, saying why, and start as slots free up; a running job
whose driver died keeps its slot."""

from __future__ import annotations

import pytest

from groups.models import RemediationJob
from groups.selectors.jobs import backfills_waiting
from groups.services.jobs import BACKFILL_STARTING, backfill_take_slot
from groups.services.remediation import job_transition
from tests.harness.backfills import Scenario

Status = RemediationJob.Status


@pytest.mark.django_db(transaction=True)
def test_a_backfill_waits_for_a_free_slot_and_takes_it_when_one_ends(broker, unique, approver, enqueued):
    jobs = [Scenario(broker, f"slot-{n}-{unique}", f"slot-{n}-{unique}", 5).request_job(approver, "parquet")
            for n in range(3)]
    assert [RemediationJob.objects.get(id=job.id).status for job in jobs] == [Status.APPROVED] * 3
    for job in jobs:
        job_transition(job_id=job.id, from_statuses=[Status.APPROVED], to_status=Status.QUEUED)
    assert backfills_waiting() == [job.id for job in jobs]

    assert backfill_take_slot(job_id=jobs[0].id, slots=2) == "launch"
    assert backfill_take_slot(job_id=jobs[1].id, slots=2) == "launch"
    assert backfill_take_slot(job_id=jobs[2].id, slots=2) == "waiting"
    first, waiting = RemediationJob.objects.get(id=jobs[0].id), RemediationJob.objects.get(id=jobs[2].id)
    assert (first.status, first.status_reason) == (Status.RUNNING, BACKFILL_STARTING)
    assert waiting.status == Status.QUEUED
    assert waiting.status_reason == ("waiting for a Spark slot: 2 backfill(s) running, at most 2 at once "
                                     "(BACKFILL_DRIVERS)")
    assert backfills_waiting() == [jobs[2].id]

    # A running job launched again (its driver died) keeps its slot; a finished one is left alone.
    assert backfill_take_slot(job_id=jobs[0].id, slots=2) == "launch"
    job_transition(job_id=jobs[0].id, from_statuses=[Status.RUNNING], to_status=Status.FAILED, status_reason="x")
    assert backfill_take_slot(job_id=jobs[0].id, slots=2) == Status.FAILED
    assert backfill_take_slot(job_id=jobs[2].id, slots=2) == "launch"
    assert RemediationJob.objects.get(id=jobs[2].id).status == Status.RUNNING
    assert backfills_waiting() == []
