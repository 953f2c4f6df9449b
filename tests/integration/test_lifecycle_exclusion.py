"""Approve, dismiss and cancel on the same finding exclude each other: fired
at the same moment from threads against the real PostgreSQL, exactly one
wins and the other gets a Conflict (the API's 409). Each race runs
``ROUNDS`` times on fresh rows, so a lucky interleaving cannot pass it."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable

import pytest
from django.db import connections
from django.test import Client

from groups.models import AuditEvent, Finding, RemediationJob
from groups.services import remediation
from groups.services.tokens import api_token_create
from tests.factories import make_cluster, make_finding, make_generation, make_group, make_topic, user_with_role

ROUNDS = 20
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_leftover_tasks():
    """Approved jobs are enqueued in Redis; no worker runs here, so drop them."""
    yield
    from controlplane.celery import app

    app.control.purge()


@pytest.fixture
def approvers():
    return user_with_role("alice", "approver"), user_with_role("bob", "approver")


@pytest.fixture
def new_finding():
    cluster = make_cluster("prod")
    generation = make_generation(make_topic(cluster, "orders"), 2, tuple(range(2 * ROUNDS + 2)))
    group = make_group(cluster, "billing", state="Empty", member_count=0)
    partitions = itertools.count(2)
    return lambda: make_finding(group, generation, next(partitions))


def race(*actions: Callable[[], object]) -> list[object]:
    """Run the actions in threads released together; each result is what the
    action returned or the exception it raised."""
    barrier = threading.Barrier(len(actions))
    results: list[object] = [None] * len(actions)

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = actions[index]()
        except Exception as error:  # noqa: BLE001 - the race's loser is part of the answer
            results[index] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(actions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def winners_and_losers(results: list[object]) -> tuple[list, list]:
    losers = [r for r in results if isinstance(r, Exception)]
    assert all(isinstance(r, remediation.Conflict) for r in losers), losers
    return [r for r in results if not isinstance(r, Exception)], losers


def test_it_lets_exactly_one_of_approve_and_dismiss_win(approvers, new_finding):
    alice, bob = approvers
    outcomes = set()
    for _ in range(ROUNDS):
        finding = new_finding()
        results = race(
            lambda: remediation.job_request(user=alice, finding_ids=[finding.id], kind="reset", params={}),
            lambda: remediation.finding_dismiss(user=bob, finding_id=finding.id, reason="noise"),
        )
        winners, losers = winners_and_losers(results)
        assert (len(winners), len(losers)) == (1, 1), results
        finding.refresh_from_db()
        jobs = RemediationJob.objects.filter(job_findings__finding=finding)
        if isinstance(winners[0], RemediationJob):
            assert finding.closed_at is None and jobs.count() == 1, "the job won: the finding stays open"
            outcomes.add("approved")
        else:
            assert finding.resolution == "dismissed" and not jobs.exists(), "the dismissal won: no job"
            outcomes.add("dismissed")
    assert outcomes, "every round had a winner"


def test_it_lets_exactly_one_of_a_four_eyes_approval_and_a_cancel_win(settings, approvers, new_finding):
    settings.FOUR_EYES = True
    alice, bob = approvers
    carol = user_with_role("carol", "approver")
    for _ in range(ROUNDS):
        finding = new_finding()
        job = remediation.job_request(user=alice, finding_ids=[finding.id], kind="reset", params={})
        results = race(
            lambda: remediation.job_approve(user=bob, job_id=job.id),
            lambda: remediation.job_cancel(user=carol, job_id=job.id, seen_status="requested"),
        )
        winners, losers = winners_and_losers(results)
        assert (len(winners), len(losers)) == (1, 1), results
        job.refresh_from_db()
        assert job.status == winners[0].status and job.status in ("approved", "cancelled")
        assert AuditEvent.objects.filter(object_type="job", object_id=str(job.id),
                                         action__in=["job.approved", "job.cancelled"]).count() == 1


def test_it_lets_exactly_one_of_two_dismissals_and_of_two_cancels_win(approvers, new_finding):
    alice, bob = approvers
    for _ in range(ROUNDS):
        finding = new_finding()
        winners, _ = winners_and_losers(race(
            lambda: remediation.finding_dismiss(user=alice, finding_id=finding.id, reason="one"),
            lambda: remediation.finding_dismiss(user=bob, finding_id=finding.id, reason="two"),
        ))
        assert len(winners) == 1
        assert AuditEvent.objects.filter(action="finding.dismissed", object_id=str(finding.id)).count() == 1

        other = new_finding()
        job = remediation.job_request(user=alice, finding_ids=[other.id], kind="backfill", params={})
        winners, _ = winners_and_losers(race(
            lambda: remediation.job_cancel(user=alice, job_id=job.id),
            lambda: remediation.job_cancel(user=bob, job_id=job.id),
        ))
        assert len(winners) == 1


def test_the_api_answers_the_loser_with_a_409(approvers, new_finding):
    alice, bob = approvers
    clients = [Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user, name='race')[1]}")
               for user in (alice, bob)]
    for _ in range(ROUNDS):
        finding = new_finding()
        statuses = race(
            lambda: clients[0].post(f"/api/v1/findings/{finding.id}/approve", data=json.dumps({"kind": "reset"}),
                                    content_type="application/json").status_code,
            lambda: clients[1].post(f"/api/v1/findings/{finding.id}/dismiss", data=json.dumps({"reason": "x"}),
                                    content_type="application/json").status_code,
        )
        assert sorted(statuses) in ([201, 409], [200, 409]), statuses


def test_a_finding_with_an_active_job_is_not_dismissed_and_the_page_says_why(approvers, new_finding):
    alice, _ = approvers
    finding = new_finding()
    job = remediation.job_request(user=alice, finding_ids=[finding.id], kind="reset", params={})
    client = Client()
    client.force_login(alice)

    response = client.post(f"/findings/{finding.id}/dismiss/confirm", {"reason": "noise"})

    assert response.status_code == 409
    assert f"reset job {job.id} is approved on finding {finding.id}" in response.content.decode()
    assert Finding.objects.get(id=finding.id).closed_at is None
    remediation.job_cancel(user=alice, job_id=job.id)
    assert client.post(f"/findings/{finding.id}/dismiss/confirm", {"reason": "noise"}).status_code == 302
    closed = client.post("/findings/reset/approve", {"ids": finding.id})
    assert closed.status_code == 409 and "is already closed: dismissed: noise" in closed.content.decode()
