"""Bad and hostile input gets a clear 400/401/403/404 and writes nothing:
NUL bytes, wrong JSON types, unknown ids, missing credentials, users in no
role. Each case here was a 500 or a wrong answer before (issue 13)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from groups.models import AuditEvent, Finding, RemediationJob
from groups.services.tokens import api_token_create
from tests.factories import make_cluster, make_finding, make_generation, make_group, make_topic, user_with_role


@pytest.fixture
def finding(db):
    cluster = make_cluster("prod")
    return make_finding(make_group(cluster, "billing", state="Empty", member_count=0),
                        make_generation(make_topic(cluster, "orders"), 2, (0, 1, 2)), 2)


def nothing_written(finding: Finding) -> None:
    finding.refresh_from_db()
    assert finding.closed_at is None
    assert RemediationJob.objects.count() == 0
    assert not AuditEvent.objects.filter(action__startswith="job.").exists()


@pytest.mark.parametrize("path", ["/?group=%00x", "/findings/table?topic=%00", "/jobs/?status=a%00",
                                  "/api/v1/findings?topic=%00"])
def test_a_nul_byte_in_a_query_parameter_is_a_400(approver_client, finding, path):
    response = approver_client.get(path)
    assert response.status_code == 400
    assert b"NUL" in response.content


def test_a_nul_byte_in_a_form_field_is_a_400_and_dismisses_nothing(approver_client, finding):
    response = approver_client.post(f"/findings/{finding.id}/dismiss/confirm", {"reason": "a\x00b"})
    assert response.status_code == 400
    nothing_written(finding)


def test_a_nul_byte_in_a_json_body_is_a_400_json(approver_client, finding):
    response = approver_client.post(f"/api/v1/findings/{finding.id}/dismiss", data='{"reason": "\\u0000"}',
                                    content_type="application/json")
    assert response.status_code == 400
    assert "NUL" in response.json()["error"]
    nothing_written(finding)


@pytest.mark.parametrize("reason", [123, ["a"], {"a": 1}, True, None])
def test_a_dismiss_reason_that_is_not_text_is_a_400(approver_client, finding, reason):
    response = approver_client.post(f"/api/v1/findings/{finding.id}/dismiss", data=json.dumps({"reason": reason}),
                                    content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["parameter"] == "reason"
    nothing_written(finding)


@pytest.mark.parametrize("raw_value", ["2.7", "true", "1e400", "-Infinity", "NaN", "[1]", "{}"])
def test_a_reset_value_that_is_not_a_whole_number_is_a_400(approver_client, finding, raw_value):
    body = f'{{"kind": "reset", "target": "offset", "value": {raw_value}}}'
    response = approver_client.post(f"/api/v1/findings/{finding.id}/approve", data=body,
                                    content_type="application/json")
    assert response.status_code == 400, response.content
    nothing_written(finding)


def test_a_reset_to_a_future_timestamp_is_refused_up_front(approver_client, finding):
    future_ms = int((datetime.now(UTC) + timedelta(hours=1)).timestamp() * 1000)
    response = approver_client.post(f"/api/v1/findings/{finding.id}/approve",
                                    data=json.dumps({"kind": "reset", "target": "timestamp", "value": future_ms}),
                                    content_type="application/json")
    assert response.status_code == 400
    assert "future" in response.json()["error"]
    nothing_written(finding)


@pytest.mark.parametrize("key", ["sink", "replay_topic", "handler", "target"])
def test_approve_parameters_that_are_not_text_are_a_400(approver_client, finding, key):
    body = {"kind": "backfill", "sink": "parquet", key: 5}
    response = approver_client.post(f"/api/v1/findings/{finding.id}/approve", data=json.dumps(body),
                                    content_type="application/json")
    assert response.status_code == 400
    assert response.json()["parameter"] == key
    nothing_written(finding)


@pytest.mark.parametrize("action", ["approve", "dismiss"])
def test_an_unknown_finding_is_a_404(approver_client, finding, action):
    response = approver_client.post(f"/api/v1/findings/{finding.id + 1000}/{action}",
                                    data=json.dumps({"kind": "backfill", "reason": "x"}),
                                    content_type="application/json")
    assert response.status_code == 404
    assert "no finding" in response.json()["error"]


@pytest.mark.parametrize("headers", [{}, {"HTTP_AUTHORIZATION": "Bearer abc"}, {"HTTP_AUTHORIZATION": "Basic eDp5"}])
def test_the_api_without_credentials_answers_401_json_before_csrf(client, finding, headers):
    client.handler.enforce_csrf_checks = True
    for method, path in (("post", f"/api/v1/findings/{finding.id}/dismiss"), ("get", "/api/v1/findings")):
        response = getattr(client, method)(path, data="{}" if method == "post" else None,
                                           content_type="application/json", **headers)
        assert response.status_code == 401, (method, response.status_code)
        assert response["Content-Type"] == "application/json"
    nothing_written(finding)


def test_a_token_request_needs_no_csrf_and_a_session_request_does(client, finding, approver):
    _, key = api_token_create(user=approver, name="ci")
    client.handler.enforce_csrf_checks = True
    response = client.post(f"/api/v1/findings/{finding.id}/dismiss", data=json.dumps({"reason": "known"}),
                           content_type="application/json", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200
    other = make_finding(finding.group, finding.generation, 1)
    client.force_login(approver)
    response = client.post(f"/api/v1/findings/{other.id}/dismiss", data=json.dumps({"reason": "known"}),
                           content_type="application/json")
    assert response.status_code == 403  # a session without its CSRF token
    other.refresh_from_db()
    assert other.closed_at is None


@pytest.mark.parametrize("path", ["/", "/jobs/", "/clusters/", "/audit/", "/findings/table"])
def test_a_user_in_no_role_sees_only_a_no_access_page(client, finding, path):
    client.force_login(user_with_role("nobody", None))
    response = client.get(path)
    assert response.status_code == 403
    assert b"No access" in response.content
    assert b"orders" not in response.content and b"billing" not in response.content


def test_a_user_in_no_role_gets_403_json_from_the_api(client, finding):
    client.force_login(user_with_role("nobody", None))
    for path in ("/api/v1/findings", "/api/v1/jobs", "/api/v1/groups"):
        response = client.get(path)
        assert response.status_code == 403
        assert "no access" in response.json()["error"]


def test_a_viewer_still_reads_and_a_user_without_a_role_can_log_out(client, finding, viewer):
    client.force_login(viewer)
    assert client.get("/").status_code == 200
    client.force_login(user_with_role("nobody", None))
    assert client.post("/accounts/logout/").status_code in (200, 302)


@pytest.mark.parametrize("path", ["/", "/accounts/login/", "/admin/login/"])
def test_pages_carry_a_content_security_policy_without_inline_script(client, viewer, path):
    client.force_login(viewer)
    policy = client.get(path)["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy


@pytest.mark.parametrize(("replay_topic", "message"), [
    (".", "not . or .."), ("..", "not . or .."), ("__consumer_offsets", "internal topic"),
    ("payments", "already exists and is not a replay topic"),
])
def test_a_backfill_into_a_topic_that_is_not_a_replay_topic_is_refused(approver_client, finding, replay_topic,
                                                                       message):
    make_topic(finding.cluster, "payments")  # another application's topic
    response = approver_client.post(f"/api/v1/findings/{finding.id}/approve",
                                    data=json.dumps({"kind": "backfill", "sink": "kafka",
                                                     "replay_topic": replay_topic}),
                                    content_type="application/json")
    assert response.status_code == 400
    assert message in response.json()["error"]
    nothing_written(finding)
