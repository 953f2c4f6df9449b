"""Bulk approval of a selection across groups and clusters (issue 22, item
7), on the page and the API, against real PostgreSQL and Redis: one job per
finding, each planned and audited exactly as its single approval; what is
confirmed is what the preview showed; conflicts refused per finding with
why; a repeated or forged request creates nothing twice; bad input is a 400
and creates nothing."""

from __future__ import annotations

import html
import re

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client

from groups.models import AuditEvent, Finding, RemediationJob
from groups.services import bulk, previews, remediation
from tests.harness.pages import client_for, post_json
from tests.factories import (
    HOSTILE_GROUP_ID,
    NOW,
    make_cluster,
    make_finding,
    make_generation,
    make_group,
    make_topic,
)

APPROVE = "/api/v1/findings/approve"


@pytest.fixture
def approvable(approver, enqueued):
    """Open gap findings of three groups on two clusters (one group id
    hostile), one under an active backfill, one covered, one closed."""
    prod, staging = make_cluster("prod"), make_cluster("staging")
    orders = make_generation(make_topic(prod, "orders"), 2, (0, 1, 2, 3))
    payments = make_generation(make_topic(staging, "payments"), 1, (0, 1))
    billing = make_group(prod, "billing", state="Empty", member_count=0)
    hostile = make_group(prod, HOSTILE_GROUP_ID)
    audit = make_group(staging, "audit", state="Empty", member_count=0)
    findings = {
        "billing": make_finding(billing, orders, 2, minutes_ago=1),
        "hostile": make_finding(hostile, orders, 2, minutes_ago=2, backfill_end=45, missed_possible=15),
        "audit": make_finding(audit, payments, 1, minutes_ago=3, committed_offset=None),
        "busy": make_finding(billing, orders, 3, minutes_ago=4),
        "covered": make_finding(hostile, orders, 3, state=Finding.State.COVERED, missed_definite=0,
                                missed_possible=0, backfill_end=None),
        "closed": make_finding(audit, payments, 0, closed_at=NOW, resolution="dismissed",
                               closed_reason="dismissed: earlier"),
    }
    findings["job"] = remediation.job_request(user=approver, finding_ids=[findings["busy"].id], kind="backfill",
                                              params={})
    enqueued.clear()
    return findings


def ids_of(approvable, *names) -> list[int]:
    return [approvable[name].id for name in names]


def new_jobs(approvable):
    return list(RemediationJob.objects.exclude(id=approvable["job"].id).order_by("id"))


def fingerprints(body: str) -> dict[str, str]:
    return dict(re.findall(r'name="previewed-(\d+)" value="([0-9a-f]+)"', body))


# --- The page ----------------------------------------------------------------------


def test_it_approves_one_job_per_finding_across_groups_and_clusters_and_refuses_what_conflicts(
    approver, approvable, enqueued
):
    client = client_for(approver)
    chosen = ids_of(approvable, "billing", "hostile", "audit", "busy", "covered", "closed") + [999999]
    preview = client.get("/findings/approve", {"ids": chosen, "kind": "reset"})
    assert preview.status_code == 200
    body = preview.content.decode()
    assert HOSTILE_GROUP_ID not in body and "&lt;script&gt;" in body
    accepted = ids_of(approvable, "billing", "hostile", "audit")
    assert sorted(map(int, fingerprints(body))) == sorted(accepted)
    busy, job = approvable["busy"].id, approvable["job"].id
    assert f"backfill job {job} is approved on it" in body
    assert "covered: the group read the new partition from its start; nothing to repair" in body
    assert "closed already (dismissed: earlier)" in body and "no such finding" in body

    form = {"kind": "reset", "ids": chosen, **{f"previewed-{i}": v for i, v in fingerprints(body).items()}}
    response = client.post("/findings/approve/confirm", form, follow=True)
    assert response.redirect_chain == [("/?view=partitions", 302)]
    jobs = new_jobs(approvable)
    assert [sorted(j.findings.values_list("id", flat=True)) for j in jobs] == [[i] for i in sorted(accepted)]
    shown = [str(message) for message in response.context["messages"]]
    assert shown[0] == ("Approved 3 reset jobs for 3 of 7 findings: "
                        + ", ".join(f"job {j.id} for finding {j.findings.get().id}" for j in jobs) + ".")
    assert shown[1:] == [f"Not approved: finding {busy}: backfill job {job} is approved on it",
                         f"Not approved: finding {approvable['covered'].id}: covered: the group read the new "
                         "partition from its start; nothing to repair",
                         f"Not approved: finding {approvable['closed'].id}: closed already (dismissed: earlier)",
                         "Not approved: finding 999999: no such finding"]
    # Each exactly as its single approval: its own preview's params and plan, its cluster and group,
    # approved by the person, audited, enqueued after commit.
    for job in jobs:
        finding = job.findings.get()
        single = previews.job_preview(finding_ids=[finding.id], kind="reset", params={"target": "earliest"})
        assert (job.cluster_id, job.group_id, job.status, job.approved_by) == (
            finding.cluster_id, finding.group_id, "approved", approver)
        assert (job.params, job.plan) == (single["params"], single["plan"])
        assert list(AuditEvent.objects.filter(object_type="job", object_id=str(job.id))
                    .values_list("action", flat=True).order_by("id")) == ["job.requested", "job.approved"]
    assert enqueued == [job.id for job in jobs]

    # The same post again (a double click, a replay): every finding is refused, nothing is created twice.
    again = client.post("/findings/approve/confirm", form, follow=True)
    assert [str(m) for m in again.context["messages"]][0] == "Approved nothing for the 7 findings."
    assert len(new_jobs(approvable)) == 3 and len(enqueued) == 3


def test_a_finding_that_changed_since_the_preview_is_refused_and_the_others_approved(approver, approvable):
    client = client_for(approver)
    chosen = ids_of(approvable, "billing", "hostile")
    body = client.get("/findings/approve", {"ids": chosen, "kind": "backfill"}).content.decode()
    assert "[0, 40): <strong>40</strong> records (30 certain, 10 possible) to the parquet sink" in body
    # A poll saw the group's first commit further on: the range shown is not the range now.
    Finding.objects.filter(id=approvable["billing"].id).update(backfill_end=50, missed_possible=20)
    form = {"kind": "backfill", "ids": chosen, **{f"previewed-{i}": v for i, v in fingerprints(body).items()}}
    response = client.post("/findings/approve/confirm", form, follow=True)
    assert [str(m) for m in response.context["messages"]][1] == (
        f"Not approved: finding {approvable['billing'].id}: {bulk.CHANGED_SINCE_PREVIEW}")
    (job,) = new_jobs(approvable)
    assert list(job.findings.values_list("id", flat=True)) == [approvable["hostile"].id]
    assert job.params == {"sink": "parquet"} and [(p["start"], p["end"]) for p in job.plan] == [(0, 45)]


def test_a_post_without_the_previews_fingerprints_creates_nothing(approver, approvable):
    client = client_for(approver)
    chosen = ids_of(approvable, "billing", "hostile")
    body = client.get("/findings/approve", {"ids": chosen, "kind": "reset"}).content.decode()
    # The reset preview's fingerprints do not approve a backfill, nor does no fingerprint at all.
    forged = {f"previewed-{i}": v for i, v in fingerprints(body).items()}
    client.post("/findings/approve/confirm", {"kind": "backfill", "ids": chosen, **forged})
    client.post("/findings/approve/confirm", {"kind": "reset", "ids": chosen})
    assert new_jobs(approvable) == []


def test_under_four_eyes_each_finding_gets_a_request_for_a_second_approver(approver, approvable, settings,
                                                                           enqueued):
    settings.FOUR_EYES = True
    client = client_for(approver)
    chosen = ids_of(approvable, "billing", "audit")
    body = client.get("/findings/approve", {"ids": chosen, "kind": "reset"}).content.decode()
    assert "Request 2 reset jobs" in body
    form = {"kind": "reset", "ids": chosen, **{f"previewed-{i}": v for i, v in fingerprints(body).items()}}
    client.post("/findings/approve/confirm", form)
    jobs = new_jobs(approvable)
    assert [(j.status, j.requested_by, j.approved_by) for j in jobs] == [("requested", approver, None)] * 2
    assert enqueued == []
    with pytest.raises(PermissionDenied, match="four-eyes"):
        remediation.job_approve(user=approver, job_id=jobs[0].id)


@pytest.mark.parametrize(
    "data, error",
    [
        ({"ids": ["{billing}", "x"], "kind": "reset"}, "not a finding id: 'x'"),
        ({"ids": ["{billing},2.5"], "kind": "reset"}, "not a finding id: '2.5'"),
        ({"ids": ["{billing}", "99999999999999999999"], "kind": "reset"}, "finding ids are whole numbers"),
        ({"ids": ["{billing}", "0"], "kind": "reset"}, "finding ids are whole numbers"),
        ({"ids": ["{billing}"], "kind": "dismiss"}, "choose reset or backfill, not 'dismiss'"),
        ({"ids": ["{billing}"]}, "choose reset or backfill, not ''"),
        ({"ids": ["{billing}"], "kind": ["reset", "backfill"]}, None),  # the last one counts: a backfill
        ({"kind": "reset"}, "select at least one finding to approve"),
        ({"ids": [str(n) for n in range(1, 502)], "kind": "reset"}, "at most 500 findings at once, not 501"),
    ],
)
def test_bad_input_is_a_form_error_and_approves_nothing(approver, approvable, data, error):
    data = {key: [v.format(billing=approvable["billing"].id) for v in value] if key == "ids" else value
            for key, value in data.items()}
    response = client_for(approver).post("/findings/approve/confirm", data)
    if error is None:  # not bad input, but no fingerprint: refused as changed, nothing created
        assert response.status_code == 302
    else:
        assert response.status_code == 400
        assert html.escape(error) in response.content.decode()
    assert new_jobs(approvable) == []


def test_the_preview_of_bad_input_is_a_400(approver, approvable):
    client = client_for(approver)
    assert client.get("/findings/approve", {"ids": "x", "kind": "reset"}).status_code == 400
    assert client.get("/findings/approve", {"kind": "reset"}).status_code == 400
    assert client.get("/findings/approve", {"ids": approvable["billing"].id, "kind": "shift"}).status_code == 400
    assert client.get("/findings/approve", {"ids": "1\x00", "kind": "reset"}).status_code == 400
    assert client.post("/findings/approve/confirm", {"ids": approvable["billing"].id,
                                                     "kind": "reset\x00"}).status_code == 400
    assert new_jobs(approvable) == []


def test_a_viewer_or_a_forged_post_approves_nothing(approver, viewer, approvable):
    data = {"ids": [approvable["billing"].id], "kind": "reset"}
    assert client_for(viewer).get("/findings/approve", data).status_code == 403
    assert client_for(viewer).post("/findings/approve/confirm", data).status_code == 403
    assert client_for(approver, csrf=True).post("/findings/approve/confirm", data).status_code == 403
    assert client_for(approver).get("/findings/approve/confirm", data).status_code == 405
    assert new_jobs(approvable) == []


def test_the_list_offers_bulk_approval_to_approvers_only(approver, viewer, approvable):
    body = client_for(approver).get("/", {"view": "partitions"}).content.decode()
    assert 'formaction="/findings/approve" name="kind" value="reset"' in body
    assert 'formaction="/findings/approve" name="kind" value="backfill"' in body
    assert 'formaction="/findings/approve"' not in client_for(viewer).get("/", {"view": "partitions"}).content.decode()


# --- The API -------------------------------------------------------------------------


def test_the_api_approves_one_job_per_finding_and_says_what_it_refused_and_why(approver, approvable, enqueued):
    client = client_for(approver)
    chosen = ids_of(approvable, "audit", "busy", "hostile", "covered", "billing") + [999999]
    response = post_json(client, APPROVE, {"kind": "backfill", "ids": chosen})
    assert response.status_code == 200, response.content
    body = response.json()
    made = {row["finding"]: row["job"] for row in body["jobs"]}
    assert sorted(made) == sorted(ids_of(approvable, "audit", "hostile", "billing"))
    assert all(job["findings"] == [finding] and job["kind"] == "backfill" and job["status"] == "approved"
               for finding, job in made.items())
    assert made[approvable["audit"].id]["cluster"] == "staging"
    busy, job = approvable["busy"].id, approvable["job"].id
    assert body["refused"] == [
        {"id": busy, "error": f"backfill job {job} is approved on it"},
        {"id": approvable["covered"].id, "error": "covered: the group read the new partition from its start; "
                                                 "nothing to repair"},
        {"id": 999999, "error": "no such finding"},
    ]
    again = post_json(client, APPROVE, {"kind": "backfill", "ids": chosen}).json()
    assert again["jobs"] == [] and len(again["refused"]) == 6
    assert len(new_jobs(approvable)) == 3 and len(enqueued) == 3


def test_the_api_plans_each_finding_on_its_own_and_refuses_what_its_plan_refuses(approver, approvable):
    """A pending finding: a backfill cannot cover what the group skips when it takes the partition; the
    bulk approval refuses it with the single approval's own words, and approves the others."""
    finding = approvable["billing"]
    Finding.objects.filter(id=finding.id).update(state=Finding.State.PENDING, backfill_end=None)
    single = client_for(approver).post(f"/api/v1/findings/{finding.id}/approve", data={"kind": "backfill"},
                                       content_type="application/json")
    assert single.status_code == 400 and "nobody has taken the partition yet" in single.json()["error"]
    body = post_json(client_for(approver), APPROVE,
                     {"kind": "backfill", "ids": [finding.id, approvable["audit"].id]}).json()
    assert [row["finding"] for row in body["jobs"]] == [approvable["audit"].id]
    assert body["refused"] == [{"id": finding.id, "error": single.json()["error"]}]


@pytest.mark.parametrize(
    "body, parameter",
    [
        ({"kind": "reset", "ids": ["5"]}, "ids"),
        ({"kind": "reset", "ids": [1.5]}, "ids"),
        ({"kind": "reset", "ids": [True]}, "ids"),
        ({"kind": "reset", "ids": [0]}, "ids"),
        ({"kind": "reset", "ids": [2**63]}, "ids"),
        ({"kind": "reset", "ids": []}, "ids"),
        ({"kind": "reset", "ids": 5}, "ids"),
        ({"kind": "reset", "ids": list(range(1, 502))}, "ids"),
        ({"ids": [1]}, "kind"),
        ({"kind": "dismiss", "ids": [1]}, "kind"),
        ({"kind": 1, "ids": [1]}, "kind"),
        ({"kind": "reset\x00", "ids": [1]}, "body"),  # the NUL middleware, before any view
        ("[1, 2]", "body"),
        ("{", "body"),
    ],
)
def test_the_api_refuses_bad_input_with_a_400_and_approves_nothing(approver, approvable, body, parameter):
    response = post_json(client_for(approver), APPROVE, body)
    assert response.status_code == 400, response.content
    assert response.json().get("parameter") == parameter
    assert new_jobs(approvable) == []


def test_the_api_needs_the_approver_role_and_a_csrf_token_with_a_session(approver, viewer, approvable):
    body = {"kind": "reset", "ids": [approvable["billing"].id]}
    assert post_json(client_for(viewer), APPROVE, body).status_code == 403
    assert post_json(client_for(approver, csrf=True), APPROVE, body).status_code == 403
    assert post_json(Client(), APPROVE, body).status_code == 401
    assert new_jobs(approvable) == []
