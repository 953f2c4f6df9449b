"""Bulk dismissal of a selection across groups (issue 22, item 7) and the
findings downloads (item 10), on the page and the API, against real
PostgreSQL: one audited dismissal per finding, refusals per finding with why,
a repeated request dismisses nothing twice, bad input writes nothing, and
hostile group ids leave as data (no formula, no markup)."""

from __future__ import annotations

import csv
import html
import io
import json

import pytest
from django.test import Client

from groups.models import AuditEvent, Finding
from groups.services import bulk, remediation
from tests.harness.pages import client_for, post_json
from tests.factories import (
    HOSTILE_GROUP_ID,
    NOW,
    make_cluster,
    make_finding,
    make_generation,
    make_group,
    make_topic,
    user_with_role,
)

DISMISS = "/api/v1/findings/dismiss"

FORMULA_GROUP_ID = "=cmd|' /C calc'!A0"


@pytest.fixture
def dismissable(approver):
    """Open gap findings of three groups (one hostile, one a formula), one of
    them under an active reset job, and one finding closed already."""
    cluster = make_cluster("prod")
    generation = make_generation(make_topic(cluster, "orders"), 2, (0, 1, 2, 3))
    billing = make_group(cluster, "billing", state="Empty", member_count=0)
    hostile, formula = make_group(cluster, HOSTILE_GROUP_ID), make_group(cluster, FORMULA_GROUP_ID)
    findings = {
        "billing": make_finding(billing, generation, 2, minutes_ago=1),
        "hostile": make_finding(hostile, generation, 2, minutes_ago=2),
        "formula": make_finding(formula, generation, 3, minutes_ago=3, owner_client_id="@SUM(1+1)"),
        "busy": make_finding(billing, generation, 3, minutes_ago=4),
        "closed": make_finding(hostile, generation, 3, minutes_ago=5, closed_at=NOW, resolution="dismissed",
                               closed_reason="dismissed: earlier"),
    }
    job = remediation.job_request(user=approver, finding_ids=[findings["busy"].id], kind="reset",
                                  params={"target": "earliest"})
    findings["job"] = job
    return findings


def dismissed_ids() -> set[int]:
    return set(AuditEvent.objects.filter(action="finding.dismissed").values_list("object_id", flat=True))


def ids_of(dismissable, *names) -> list[int]:
    return [dismissable[name].id for name in names]


# --- The page ----------------------------------------------------------------------


def test_it_dismisses_a_selection_across_groups_each_on_its_own_and_refuses_what_conflicts(approver, dismissable):
    client = client_for(approver)
    chosen = ids_of(dismissable, "billing", "hostile", "formula", "busy", "closed")
    form = client.get("/findings/dismiss", {"ids": chosen})
    assert form.status_code == 200
    body = form.content.decode()
    assert f"job {dismissable['job'].id}</a> is approved on it" in body and "closed already" in body
    assert HOSTILE_GROUP_ID not in body and "&lt;script&gt;" in body

    response = client.post("/findings/dismiss/confirm", {"ids": chosen, "reason": "replayed by hand"}, follow=True)
    assert response.redirect_chain == [("/?view=partitions", 302)]
    shown = [str(message) for message in response.context["messages"]]
    done = ids_of(dismissable, "billing", "hostile", "formula")
    assert shown[0] == f"Dismissed 3 of 5 findings: {', '.join(map(str, sorted(done)))}."
    busy, closed = dismissable["busy"].id, dismissable["closed"].id
    assert shown[1:] == [
        (f"Not dismissed: finding {busy}: reset job {dismissable['job'].id} is approved on finding {busy}: cancel it "
         "(or let it finish) before dismissing"),
        f"Not dismissed: finding {closed}: finding {closed} is already closed: dismissed: earlier",
    ]
    assert dismissed_ids() == {str(i) for i in done}
    for finding in Finding.objects.filter(id__in=done):
        assert (finding.resolution, finding.closed_reason, finding.closed_by) == (
            "dismissed", "dismissed: replayed by hand", approver)
    assert Finding.objects.get(id=busy).closed_at is None

    # The same post again (a double click, a replay): nothing is dismissed twice.
    again = client.post("/findings/dismiss/confirm", {"ids": chosen, "reason": "replayed by hand"}, follow=True)
    assert next(str(m) for m in again.context["messages"]) == "Dismissed none of the 5 findings."
    assert AuditEvent.objects.filter(action="finding.dismissed").count() == 3


@pytest.mark.parametrize(
    "data, error",
    [
        ({"ids": ["{billing}", "x"], "reason": "r"}, "not a finding id: 'x'"),
        ({"ids": ["{billing},2.5"], "reason": "r"}, "not a finding id: '2.5'"),
        ({"ids": ["{billing}", "99999999999999999999"], "reason": "r"}, "finding ids are whole numbers"),
        ({"ids": ["{billing}", "-1"], "reason": "r"}, "finding ids are whole numbers"),
        ({"ids": ["{billing}"], "reason": "  "}, "a dismissal needs a reason"),
        ({"ids": ["{billing}"]}, "a dismissal needs a reason"),
        ({"reason": "r"}, "select at least one finding"),
        ({"ids": [str(n) for n in range(1, 502)], "reason": "r"}, "at most 500 findings at once, not 501"),
    ],
)
def test_bad_input_is_a_form_error_and_dismisses_nothing(approver, dismissable, data, error):
    data = {key: [v.format(billing=dismissable["billing"].id) for v in value] if isinstance(value, list) else value
            for key, value in data.items()}
    response = client_for(approver).post("/findings/dismiss/confirm", data)
    assert response.status_code == 400
    assert html.escape(error) in response.content.decode()
    assert not dismissed_ids() and Finding.objects.filter(closed_at__isnull=False).count() == 1


def test_a_nul_byte_in_the_reason_is_refused_before_anything_is_written(approver, dismissable):
    response = client_for(approver).post("/findings/dismiss/confirm",
                                         {"ids": [dismissable["billing"].id], "reason": "bad\x00reason"})
    assert response.status_code == 400
    assert not dismissed_ids()
    with pytest.raises(remediation.ValidationError, match="NUL"):
        bulk.findings_dismiss(user=approver, finding_ids=[dismissable["billing"].id], reason="bad\x00")


def test_a_viewer_or_a_forged_post_dismisses_nothing(approver, viewer, dismissable):
    data = {"ids": [dismissable["billing"].id], "reason": "r"}
    assert client_for(viewer).post("/findings/dismiss/confirm", data).status_code == 403
    assert client_for(approver, csrf=True).post("/findings/dismiss/confirm", data).status_code == 403
    assert client_for(approver).get("/findings/dismiss/confirm", data).status_code == 405
    assert not dismissed_ids()


def test_the_list_offers_bulk_dismiss_to_approvers_and_downloads_to_everyone(approver, viewer, dismissable):
    body = client_for(approver).get("/", {"view": "partitions", "group": "bill"}).content.decode()
    assert 'formaction="/findings/dismiss"' in body
    assert 'href="/findings/export.csv?view=partitions&amp;group=bill&amp;sort=found"' in body
    assert 'href="/findings/export.json?view=partitions&amp;group=bill&amp;sort=found"' in body
    assert 'formaction="/findings/dismiss"' not in client_for(viewer).get("/", {"view": "partitions"}).content.decode()


# --- The API -------------------------------------------------------------------------


def test_the_api_dismisses_a_selection_and_says_what_it_refused_and_why(approver, dismissable):
    client = client_for(approver)
    chosen = ids_of(dismissable, "busy", "hostile", "billing", "closed") + [999999]
    response = post_json(client, DISMISS, {"ids": chosen + [dismissable["billing"].id], "reason": "known noise"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dismissed"] == sorted(ids_of(dismissable, "billing", "hostile"))
    assert [(row["id"], row["error"].split(":")[0]) for row in body["refused"]] == [
        (dismissable["busy"].id, f"reset job {dismissable['job'].id} is approved on finding {dismissable['busy'].id}"),
        (dismissable["closed"].id, f"finding {dismissable['closed'].id} is already closed"),
        (999999, "no finding 999999"),
    ]
    again = post_json(client, DISMISS, {"ids": chosen, "reason": "known noise"}).json()
    assert again["dismissed"] == [] and len(again["refused"]) == 5
    assert AuditEvent.objects.filter(action="finding.dismissed").count() == 2


BILLING = object()  # stands for the id of the billing finding


def _with_id(value, billing: int):
    if value is BILLING:
        return billing
    if isinstance(value, list):
        return [_with_id(item, billing) for item in value]
    if isinstance(value, dict):
        return {key: _with_id(item, billing) for key, item in value.items()}
    return value


@pytest.mark.parametrize(
    "body, parameter",
    [
        ({"ids": [BILLING, "5"], "reason": "r"}, "ids"),  # text is not an id
        ({"ids": [BILLING, 1.5], "reason": "r"}, "ids"),
        ({"ids": [True], "reason": "r"}, "ids"),
        ({"ids": [BILLING, 0], "reason": "r"}, "ids"),
        ({"ids": [BILLING, 2**63], "reason": "r"}, "ids"),
        ({"ids": [], "reason": "r"}, "ids"),
        ({"ids": BILLING, "reason": "r"}, "ids"),
        ({"ids": list(range(1, 502)), "reason": "r"}, "ids"),
        ({"ids": [BILLING]}, "reason"),
        ({"ids": [BILLING], "reason": 5}, "reason"),
        ({"ids": [BILLING], "reason": "  "}, None),  # the service's rule: a reason is required
        ({"ids": [BILLING], "reason": "a\x00b"}, "body"),  # the NUL middleware, before any view
    ],
)
def test_the_api_refuses_bad_input_with_a_400_and_dismisses_nothing(approver, dismissable, body, parameter):
    response = post_json(client_for(approver), DISMISS, _with_id(body, dismissable["billing"].id))
    assert response.status_code == 400, response.content
    assert response.json().get("parameter") == parameter
    assert not dismissed_ids()


def test_the_api_needs_the_approver_role_and_a_csrf_token_with_a_session(approver, viewer, dismissable):
    body = {"ids": [dismissable["billing"].id], "reason": "r"}
    assert post_json(client_for(viewer), DISMISS, body).status_code == 403
    assert post_json(client_for(approver, csrf=True), DISMISS, body).status_code == 403
    assert post_json(Client(), DISMISS, body).status_code == 401
    assert not dismissed_ids()


# --- Downloads ---------------------------------------------------------------------


def test_a_viewer_downloads_the_filtered_list_as_csv_with_formulas_defused(viewer, dismissable):
    response = client_for(viewer).get("/findings/export.csv", {"view": "partitions", "sort": "group"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="gapwatch-findings.csv"'
    assert response["X-Content-Type-Options"] == "nosniff"
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    # Sorted by group id like the page: "<script>…", "=cmd…", "billing" twice; the closed one is not open work.
    assert [row["group"] for row in rows] == [HOSTILE_GROUP_ID, "'" + FORMULA_GROUP_ID, "billing", "billing"]
    formula = rows[1]
    assert (formula["owner_client_id"], formula["lag"], formula["committed_offset"]) == ("'@SUM(1+1)", "40", "60")
    assert (formula["resolution"], formula["closed_at"], formula["likely_start"]) == ("open", "", "")
    assert formula["found_at"] == dismissable["formula"].created_at.isoformat()


def test_the_json_download_keeps_group_ids_verbatim_without_markup(viewer, dismissable):
    client = client_for(viewer)
    response = client.get("/findings/export.json", {"view": "history", "group": "<scr"})
    assert response["Content-Type"] == "application/json"
    raw = b"".join(response.streaming_content).decode()
    assert "<" not in raw and "\\u003cscript\\u003e" in raw
    rows = json.loads(raw)
    assert [(row["group"], row["resolution"]) for row in rows] == [(HOSTILE_GROUP_ID, "open"),
                                                                 (HOSTILE_GROUP_ID, "dismissed")]
    assert rows[0]["id"] == dismissable["hostile"].id and rows[0]["missed_definite"] == 30
    empty = client.get("/findings/export.json", {"view": "partitions", "cluster": "nowhere"})
    assert json.loads(b"".join(empty.streaming_content)) == []


def test_a_download_with_a_bad_filter_is_a_400_and_needs_a_login(viewer, dismissable):
    client = client_for(viewer)
    bad = client.get("/findings/export.csv", {"view": "history", "since": "yesterday"})
    assert bad.status_code == 400 and b"since" in bad.content
    anonymous = Client().get("/findings/export.json")
    assert anonymous.status_code == 302 and anonymous.url.startswith("/accounts/login/")
    assert client_for(user_with_role("nobody", None)).get("/findings/export.csv").status_code == 403
