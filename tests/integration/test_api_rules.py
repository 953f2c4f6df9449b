"""Standing rules through the JSON API (issue 43, item 4): what a platform
team keeps in Git. List, create, change, delete; the approver role with no
team scope writes (as the admin and the rules page), a viewer only reads;
every write audited; bad input a 400 or 409 that writes nothing."""

from __future__ import annotations

import json

from groups.models import AuditEvent, RepairRule
from tests.factories import make_cluster, user_with_role
from tests.harness.pages import client_for
from tests.integration.test_api import check_against_schema, response_schema

HOSTILE = "<script>alert('r')</script>*"


def send(client, method: str, path: str, body=None):
    return getattr(client, method)(path, data=json.dumps(body) if body is not None else None,
                                   content_type="application/json")


def test_a_platform_team_keeps_its_rules_through_the_api(db):
    make_cluster("prod")
    manager, viewer = client_for(user_with_role("mira", "approver")), client_for(user_with_role("vic", "viewer"))
    body = {"cluster": "prod", "name": "orders-protect", "topics": "orders.*", "groups": HOSTILE,
            "action": "protect", "max_records": 5000}

    refused = [
        (viewer, body, 403, "approver role"),
        (manager, {**body, "cluster": "nope"}, 404, "no cluster named 'nope'"),
        (manager, {**body, "action": "delete-everything"}, 400, "action"),
        (manager, {**body, "max_records": 0}, 400, "max_records"),
        (manager, {**body, "max_records": "5"}, 400, "max_records"),
        (manager, {**body, "name": "a\x00b"}, 400, "NUL byte"),
        (manager, {**body, "sink": "kafka", "replay_topic": "bad topic!"}, 400, "A replay topic name has"),
    ]
    for client, request, status, words in refused:
        response = send(client, "post", "/api/v1/rules", request)
        assert response.status_code == status, (request, response.content)
        assert words in response.content.decode(), (request, response.content)
    assert not RepairRule.objects.exists() and not AuditEvent.objects.filter(action__startswith="repair_rule")

    created = send(manager, "post", "/api/v1/rules", body)
    assert created.status_code == 201, created.content
    rule = json.loads(created.content)
    document = json.loads(viewer.get("/api/v1/schema").content)
    check_against_schema(document, rule, response_schema(document, "/api/v1/rules", "post", 201), "rule")
    assert (rule["groups"], rule["action"], rule["sink"], rule["enabled"]) == (HOSTILE, "protect", "parquet", True)
    assert send(manager, "post", "/api/v1/rules", body).status_code == 409  # one name per cluster

    listed = json.loads(viewer.get("/api/v1/rules").content)
    assert [r["name"] for r in listed] == ["orders-protect"]
    assert json.loads(viewer.get(f"/api/v1/rules/{rule['id']}").content)["topics"] == "orders.*"
    assert viewer.get("/api/v1/rules/999999").status_code == 404

    assert send(viewer, "patch", f"/api/v1/rules/{rule['id']}", {"enabled": False}).status_code == 403
    changed = send(manager, "patch", f"/api/v1/rules/{rule['id']}", {"enabled": False, "action": "repair"})
    assert changed.status_code == 200, changed.content
    assert (json.loads(changed.content)["enabled"], json.loads(changed.content)["action"]) == (False, "repair")
    assert send(manager, "patch", f"/api/v1/rules/{rule['id']}", {"enabled": "no"}).status_code == 400
    assert RepairRule.objects.get().enabled is False

    assert send(viewer, "delete", f"/api/v1/rules/{rule['id']}").status_code == 403
    assert send(manager, "delete", f"/api/v1/rules/{rule['id']}").status_code == 204
    assert send(manager, "delete", f"/api/v1/rules/{rule['id']}").status_code == 404
    assert not RepairRule.objects.exists()
    assert list(AuditEvent.objects.filter(action__startswith="repair_rule").order_by("id")
                .values_list("action", flat=True)) == ["repair_rule.created", "repair_rule.changed",
                                                       "repair_rule.deleted"]
