"""The JSON API's writes (approve, dismiss) against real PostgreSQL: bad input
is a 400 (or 404 for an unknown finding) with nothing written, authentication
is decided before CSRF, and methods and paths answer JSON. Answers are checked
against the OpenAPI document in test_api.py."""

from datetime import UTC, datetime, timedelta


import pytest

from groups.models import AuditEvent, Finding, RemediationJob
from groups.services.tokens import api_token_create
from tests.factories import NOW, make_cluster, make_finding, make_generation, make_group, make_topic, user_with_role
from tests.harness.pages import get_json, post_json


@pytest.fixture
def approver_api(client, db):
    client.force_login(user_with_role("approver", "approver"))
    return client


# --- Writes: bad input is a 400/404 JSON, nothing written ------------------------------


@pytest.fixture
def gap(db):
    cluster = make_cluster("prod")
    generation = make_generation(make_topic(cluster, "orders"), 2, (0, 1, 2))
    return make_finding(make_group(cluster, "billing"), generation, 2)


def nothing_written(finding) -> None:
    finding.refresh_from_db()
    assert finding.closed_at is None
    assert RemediationJob.objects.count() == 0
    assert not AuditEvent.objects.filter(action__in=["job.requested", "finding.dismissed"]).exists()


@pytest.mark.parametrize(
    "raw_value, parameter",
    [
        ("2.7", "value"),  # was offset 2
        ("true", "value"),  # was offset 1: a bool is not an int
        ("2.0", "value"),
        ('"5"', "value"),  # text is not an offset
        ("1e400", "value"),  # was an OverflowError (500) in planning
        ("9223372036854775808", "value"),  # one past int64
        ("[1]", "value"),
        ("-Infinity", "value"),  # Python's JSON reads it as a float: not an integer
        ("NaN", "value"),
    ],
)
def test_it_refuses_a_reset_value_that_is_not_an_integer(approver_api, gap, raw_value, parameter):
    response = post_json(approver_api, f"/api/v1/findings/{gap.id}/approve",
                         f'{{"kind": "reset", "target": "offset", "value": {raw_value}}}')
    assert response.status_code == 400, response.content
    assert response.json()["parameter"] == parameter
    nothing_written(gap)


def test_it_takes_an_integer_reset_value(approver_api, gap):
    response = post_json(approver_api, f"/api/v1/findings/{gap.id}/approve",
                         {"kind": "reset", "target": "shift", "value": -3})
    assert response.status_code == 201, response.content
    assert RemediationJob.objects.get().params == {"target": "shift", "value": -3}


def test_a_backfill_ends_at_the_bound_by_default_and_at_the_likely_start_when_asked(approver_api, gap):
    Finding.objects.filter(id=gap.id).update(likely_start=35, likely_start_evidence="time index (CreateTime)")
    response = post_json(approver_api, f"/api/v1/findings/{gap.id}/approve", {"kind": "backfill", "sink": "parquet"})
    assert response.status_code == 201, response.content
    bound = RemediationJob.objects.get()
    assert (bound.params, [(r["end"], r["possible"]) for r in bound.plan]) == ({"sink": "parquet"}, [(40, 10)])
    bound.delete()

    response = post_json(approver_api, f"/api/v1/findings/{gap.id}/approve",
                         {"kind": "backfill", "sink": "parquet", "until": "likely"})
    assert response.status_code == 201, response.content
    likely = RemediationJob.objects.get()
    assert likely.params == {"sink": "parquet", "until": "likely"}
    assert [(r["end"], r["basis"]) for r in likely.plan] == [(35, "likely start (an estimate)")]


@pytest.mark.parametrize("until", ["latest", "", "BOUND"])
def test_it_refuses_an_unknown_range_end(approver_api, gap, until):
    response = post_json(approver_api, f"/api/v1/findings/{gap.id}/approve", {"kind": "backfill", "until": until})
    assert response.status_code == 400, response.content
    assert response.json()["parameter"] == "until"
    nothing_written(gap)


@pytest.mark.parametrize("body", [{"reason": 123}, {"reason": ["a"]}, {"reason": {"a": 1}}, {"reason": True},
                                  {"reason": None}])
def test_it_refuses_a_dismiss_reason_that_is_not_text(approver_api, gap, body):
    response = (post_json(approver_api, f"/api/v1/findings/{gap.id}/dismiss", body))
    assert response.status_code == 400, response.content
    assert response.json()["parameter"] == "reason"
    assert "reason" in response.json()["error"]
    nothing_written(gap)


@pytest.mark.parametrize("key", ["kind", "target", "sink", "replay_topic", "handler", "until"])
def test_it_refuses_approve_fields_that_are_not_text(approver_api, gap, key):
    body = {"kind": "backfill", key: 5}
    response = post_json(approver_api, f"/api/v1/findings/{gap.id}/approve", body)
    assert (response.status_code, response.json()["parameter"]) == (400, key)
    nothing_written(gap)


@pytest.mark.parametrize("also", [[True], [2.5], ["1"], "1", [0]])
def test_it_refuses_also_ids_that_are_not_ids(approver_api, gap, also):
    response = post_json(approver_api, f"/api/v1/findings/{gap.id}/approve", {"kind": "backfill", "also": also})
    assert (response.status_code, response.json()["parameter"]) == (400, "also")
    nothing_written(gap)


@pytest.mark.parametrize("nul_middleware", [True, False], ids=["behind the NUL middleware", "on its own"])
@pytest.mark.parametrize("action, body", [("dismiss", {"reason": "a\x00b"}),
                                          ("approve", {"kind": "backfill", "sink": "kafka", "replay_topic": "t\x00"})])
def test_it_refuses_a_nul_byte_in_any_text_with_or_without_the_middleware(
        approver_api, gap, settings, nul_middleware, action, body):
    if not nul_middleware:
        settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if not m.endswith("RejectNulMiddleware")]
    response = post_json(approver_api, f"/api/v1/findings/{gap.id}/{action}", body)
    assert response.status_code == 400, response.content
    assert "NUL" in response.json()["error"]
    nothing_written(gap)


def test_it_refuses_a_nul_byte_in_a_query_parameter_on_its_own(api, gap, settings):
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if not m.endswith("RejectNulMiddleware")]
    body = get_json(api, "/api/v1/topics", {"cluster": "prod\x00"}, status=400)
    assert body["parameter"] == "cluster" and "NUL" in body["error"]


def test_it_refuses_a_reset_to_a_future_timestamp_up_front(approver_api, gap):
    future_ms = int((datetime.now(UTC) + timedelta(minutes=5)).timestamp() * 1000)
    response = post_json(approver_api, f"/api/v1/findings/{gap.id}/approve",
                         {"kind": "reset", "target": "timestamp", "value": future_ms})
    assert response.status_code == 400
    assert "in the future" in response.json()["error"]
    nothing_written(gap)


@pytest.mark.parametrize("action, body", [("approve", {"kind": "reset"}), ("dismiss", {"reason": "x"})])
def test_an_unknown_finding_is_a_404_json(approver_api, gap, action, body):
    response = post_json(approver_api, f"/api/v1/findings/{gap.id + 1000}/{action}", body)
    assert response.status_code == 404
    assert response.json() == {"error": f"no finding {gap.id + 1000}"}
    also = post_json(approver_api, f"/api/v1/findings/{gap.id}/approve", {"kind": "reset", "also": [gap.id + 7]})
    assert (also.status_code, also.json()["error"]) == (404, f"no finding {gap.id + 7}")
    nothing_written(gap)


def test_a_closed_finding_is_a_409_not_a_404(approver_api, gap):
    Finding.objects.filter(id=gap.id).update(closed_at=NOW, closed_reason="topic deleted")
    for action, body in (("approve", {"kind": "reset"}), ("dismiss", {"reason": "x"})):
        response = post_json(approver_api, f"/api/v1/findings/{gap.id}/{action}", body)
        # It exists: a conflict with its state (the finding lifecycle's rule), not "not found".
        assert response.status_code == 409 and "closed" in response.json()["error"], response.content


@pytest.mark.parametrize("path", ["/api/v1/findings/99999999999999999999/dismiss", "/api/v1/findings/abc/dismiss",
                                  "/api/v1/findings/-1/dismiss"])
def test_a_finding_id_that_is_no_id_is_a_400(approver_api, gap, path):
    response = post_json(approver_api, path, {"reason": "x"})
    assert (response.status_code, response.json()["parameter"]) == (400, "id")


def test_a_body_that_is_not_json_is_a_400_naming_the_body(approver_api, gap):
    for raw in ("{", "not json", "[1]", '"text"'):
        response = post_json(approver_api, f"/api/v1/findings/{gap.id}/dismiss", raw)
        assert (response.status_code, response.json()["parameter"]) == (400, "body"), raw
    nothing_written(gap)


# --- Writes: authentication before CSRF -----------------------------------------------


@pytest.mark.parametrize("headers", [{}, {"HTTP_AUTHORIZATION": "Bearer abc"}, {"HTTP_AUTHORIZATION": "Token abc"},
                                     {"HTTP_AUTHORIZATION": "Basic eDp5"}])
def test_without_credentials_it_answers_401_json_never_the_csrf_page(client, gap, headers):
    client.handler.enforce_csrf_checks = True
    for action, body in (("approve", {"kind": "reset"}), ("dismiss", {"reason": "x"})):
        response = post_json(client, f"/api/v1/findings/{gap.id}/{action}", body, **headers)
        assert response.status_code == 401, (action, response.content)
        assert response["Content-Type"] == "application/json"
        assert "error" in response.json()
    for path in ("/api/v1/findings", "/api/v1/jobs", "/api/v1/schema"):
        response = client.get(path, **headers)
        assert (response.status_code, response["Content-Type"]) == (401, "application/json")
    nothing_written(gap)


def test_a_token_needs_no_csrf_but_a_session_does(client, gap):
    approver = user_with_role("approver", "approver")
    _, key = api_token_create(user=approver, name="ci")
    client.handler.enforce_csrf_checks = True
    client.force_login(approver)
    refused = post_json(client, f"/api/v1/findings/{gap.id}/dismiss", {"reason": "x"})
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["error"]
    nothing_written(gap)
    client.logout()
    done = post_json(client, f"/api/v1/findings/{gap.id}/dismiss", {"reason": "x"}, HTTP_AUTHORIZATION=f"Token {key}")
    assert done.status_code == 200, done.content
    assert done.json()["closed_reason"] == "dismissed: x"


def test_a_session_with_its_csrf_token_may_write(client, gap):
    client.handler.enforce_csrf_checks = True
    client.force_login(user_with_role("approver", "approver"))
    client.get("/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = post_json(client, f"/api/v1/findings/{gap.id}/dismiss", {"reason": "x"}, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 200, response.content


# --- Methods and paths ---------------------------------------------------------------


def test_it_answers_head_like_get_without_a_body(api, gap):
    response = api.head("/api/v1/findings")
    assert (response.status_code, response.content) == (200, b"")


def test_it_answers_405_json_to_a_get_of_a_write(approver_api, gap):
    response = approver_api.get(f"/api/v1/findings/{gap.id}/approve")
    assert (response.status_code, response["Allow"]) == (405, "POST")
    assert response.json() == {"error": "method GET not allowed"}


def test_it_answers_404_json_for_an_unknown_api_path(api, db):
    for path in ("/api/v1/nothing", "/api/v1/", "/api/v1/findings/1/nothing"):
        response = api.get(path)
        assert (response.status_code, response["Content-Type"]) == (404, "application/json"), path
        assert "no API endpoint" in response.json()["error"]


def test_no_answer_is_cached(api, db):
    assert "no-cache" in api.get("/api/v1/findings")["Cache-Control"]
