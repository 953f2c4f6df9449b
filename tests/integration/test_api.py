"""The JSON API under /api/v1/, against real PostgreSQL; rows are made with
the ORM by the small factories below (tests/integration/test_metrics.py
uses them too)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from jsonschema import Draft202012Validator, FormatChecker

from groups.api.main import api as ninja_api
from groups.models import Cluster, ConsumerGroup, Finding, Topic
from tests.factories import (  # noqa: E402
    HOSTILE_GROUP_ID,
    NOW,
    make_cluster,
    make_finding,
    make_generation,
    make_group,
    make_group_topic,
    make_topic,
    user_with_role,
)
from tests.harness.pages import get_json

# --- Helpers -----------------------------------------------------------------------


def ids(body: dict) -> list[int]:
    return [row["id"] for row in body["results"]]


@pytest.fixture
def two_clusters(db):
    """prod: orders (gen 2 added partition 2) read by billing and audit;
    payments (gen 1) read by billing. stage: orders read by billing.
    Findings, newest first: f_gap, f_pending, f_covered, f_payments, f_stage;
    f_closed is closed."""
    prod, stage = make_cluster("prod"), make_cluster("stage")
    orders = make_topic(prod, "orders")
    payments = make_topic(prod, "payments")
    stage_orders = make_topic(stage, "orders")
    make_generation(orders, 1, (0, 1))
    orders_gen2 = make_generation(orders, 2, (0, 1, 2))
    payments_gen = make_generation(payments, 1, (0,))
    stage_gen = make_generation(stage_orders, 3)
    billing, audit = make_group(prod, "billing"), make_group(prod, "audit")
    stage_billing = make_group(stage, "billing")
    return {
        "f_gap": make_finding(
            billing, orders_gen2, 2, minutes_ago=1, pickup_after=NOW - timedelta(seconds=50, milliseconds=300),
            pickup_before=NOW - timedelta(seconds=50), likely_start=35,
            likely_start_evidence="time index (CreateTime)",
        ),
        "f_pending": make_finding(
            audit, orders_gen2, 2, minutes_ago=2, state=Finding.State.PENDING, committed_offset=None, lag=100,
            missed_definite=0, missed_possible=0, backfill_start=None, backfill_end=None, policy_source="",
        ),
        "f_covered": make_finding(billing, orders_gen2, 1, minutes_ago=3, state=Finding.State.COVERED),
        "f_payments": make_finding(billing, payments_gen, 0, minutes_ago=4),
        "f_stage": make_finding(stage_billing, stage_gen, 2, minutes_ago=5),
        "f_closed": make_finding(audit, orders_gen2, 1, minutes_ago=0, closed_at=NOW, closed_reason="topic deleted"),
    }


# --- Access ------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["findings", "clusters", "topics", "groups", "schema"])
def test_it_answers_401_json_without_a_session(client, db, path):
    response = client.get(f"/api/v1/{path}")
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert "Location" not in response
    assert json.loads(response.content) == {"error": "authentication required: log in first"}


def test_it_answers_405_json_to_a_post(api):
    response = api.post("/api/v1/findings")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
    assert json.loads(response.content) == {"error": "method POST not allowed"}


# --- Findings ----------------------------------------------------------------------


def test_it_lists_open_findings_newest_first_with_every_field(api, two_clusters):
    body = get_json(api, "/api/v1/findings")
    f = two_clusters
    assert ids(body) == [f[name].id for name in ("f_gap", "f_pending", "f_covered", "f_payments", "f_stage")]
    assert (body["count"], body["page"], body["page_size"], body["next"], body["previous"]) == (5, 1, 50, None, None)
    assert body["results"][0] == {
        "id": f["f_gap"].id,
        "cluster": "prod",
        "topic": "orders",
        "partition": 2,
        "group": "billing",
        "group_type": "classic",
        "generation": 2,
        "state": "gap",
        "found_at": "2025-03-01T11:59:00+00:00",
        "updated_at": "2025-03-01T11:59:00+00:00",
        "closed_at": None,
        "closed_reason": "",
        "log_start_offset": 0,
        "high_watermark": 100,
        "committed_offset": 60,
        "lag": 40,
        "missed_definite": 30,
        "missed_possible": 10,
        "missed_definite_if_latest": None,
        "missed_possible_if_latest": None,
        "expired": 0,
        "backfill_start": 0,
        "backfill_end": 40,
        "policy_source": "assumed",
        "explanation": "assumed latest",
        "pickup_after": "2025-03-01T11:59:09.700000+00:00",
        "pickup_before": "2025-03-01T11:59:10+00:00",
        "likely_start": 35,
        "likely_start_evidence": "time index (CreateTime)",
        "owner_client_id": "client-1",
        "owner_host": "/10.0.0.1",
    }
    pending = body["results"][1]
    assert (pending["committed_offset"], pending["policy_source"], pending["lag"]) == (None, None, 100)
    assert (pending["pickup_after"], pending["pickup_before"], pending["likely_start"],
            pending["likely_start_evidence"]) == (None, None, None, "")


def test_it_breaks_ties_of_found_at_by_id(api, db):
    cluster = make_cluster()
    generations = [make_generation(make_topic(cluster, f"t{n}")) for n in range(10)]
    group = make_group(cluster)
    same_time = [make_finding(group, generation, p, minutes_ago=7) for p in (2, 0, 1) for generation in generations]
    newer = make_finding(make_group(cluster, "other"), generations[0], 0, minutes_ago=1)
    # Rewrite every other row so it moves to the end of the table: without the
    # id tie-break, ties come back in storage order.
    Finding.objects.filter(id__in=[f.id for f in same_time[::2]]).update(lag=41)
    body = get_json(api, "/api/v1/findings")
    assert ids(body) == [newer.id] + sorted(f.id for f in same_time)
    pages = [get_json(api, "/api/v1/findings", {"page_size": "7", "page": str(n)}) for n in (1, 2, 3, 4, 5)]
    assert sum((ids(page) for page in pages), []) == ids(body)


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"cluster": "stage"}, ["f_stage"]),
        ({"cluster": "prod", "topic": "orders"}, ["f_gap", "f_pending", "f_covered"]),
        ({"topic": "orders"}, ["f_gap", "f_pending", "f_covered", "f_stage"]),
        ({"group": "billing"}, ["f_gap", "f_covered", "f_payments", "f_stage"]),
        ({"group": "billing", "cluster": "prod", "topic": "payments"}, ["f_payments"]),
        ({"group": "BILLING"}, []),
        ({"group": "billin"}, []),
        ({"state": "pending"}, ["f_pending"]),
        ({"state": "gap"}, ["f_gap", "f_payments", "f_stage"]),
        ({"state": "gap", "cluster": "prod"}, ["f_gap", "f_payments"]),
        ({"include_closed": "true"}, ["f_closed", "f_gap", "f_pending", "f_covered", "f_payments", "f_stage"]),
        ({"include_closed": "false"}, ["f_gap", "f_pending", "f_covered", "f_payments", "f_stage"]),
        ({"include_closed": "1", "group": "audit"}, ["f_closed", "f_pending"]),
        ({"cluster": "nowhere"}, []),
        ({"cluster": "", "state": ""}, ["f_gap", "f_pending", "f_covered", "f_payments", "f_stage"]),
        # The dashboard's boxes: part of a name, ignoring case.
        ({"group_contains": "BILL"}, ["f_gap", "f_covered", "f_payments", "f_stage"]),
        ({"group_contains": "ud", "include_closed": "true"}, ["f_closed", "f_pending"]),
        ({"topic_contains": "pay"}, ["f_payments"]),
        ({"topic_contains": "ORD", "cluster": "stage"}, ["f_stage"]),
        ({"group_contains": "%"}, []),  # a LIKE wildcard is a character
    ],
)
def test_it_filters_findings(api, two_clusters, params, expected):
    body = get_json(api, "/api/v1/findings", params)
    assert ids(body) == [two_clusters[name].id for name in expected]
    assert body["count"] == len(expected)


@pytest.mark.parametrize(
    "params, parameter",
    [
        ({"state": "gone"}, "state"),
        ({"state": "GAP"}, "state"),
        ({"include_closed": "maybe"}, "include_closed"),
        ({"page": "0"}, "page"),
        ({"page": "-1"}, "page"),
        ({"page": "two"}, "page"),
        ({"page": "1.5"}, "page"),
        ({"page_size": "0"}, "page_size"),
        ({"page_size": "501"}, "page_size"),
        ({"page_size": "ten"}, "page_size"),
        ({"group": "nul\x00byte"}, "group"),
        ({"group": ["billing", "audit"]}, "group"),  # one value, not a list
        ({"group_type": "sharing"}, "group_type"),
        ({"group_type": "Share"}, "group_type"),  # the kinds are lower case, like the states
    ],
)
def test_it_answers_400_naming_a_bad_parameter(api, two_clusters, params, parameter):
    body = get_json(api, "/api/v1/findings", params, status=400)
    assert body["parameter"] == parameter
    assert parameter in body["error"]


@pytest.mark.parametrize("path", ["clusters", "topics", "groups"])
def test_it_answers_400_for_a_bad_page_size_on_every_list(api, db, path):
    assert get_json(api, f"/api/v1/{path}", {"page_size": "9999"}, status=400)["parameter"] == "page_size"


def test_it_pages_with_next_and_previous_links(api, two_clusters):
    everything = ids(get_json(api, "/api/v1/findings"))
    first = get_json(api, "/api/v1/findings", {"page_size": "2", "cluster": ""})
    assert (first["count"], first["page"], first["page_size"], first["previous"]) == (5, 1, 2, None)
    assert first["next"] == "http://testserver/api/v1/findings?page_size=2&cluster=&page=2"

    seen = ids(first)
    body = first
    while body["next"]:
        body = get_json(api, body["next"])
        seen += ids(body)
    assert seen == everything
    assert (body["page"], len(body["results"]), body["next"]) == (3, 1, None)
    assert body["previous"] == "http://testserver/api/v1/findings?page_size=2&cluster=&page=2"

    back = get_json(api, body["previous"])
    assert ids(back) == everything[2:4]
    assert back["previous"] == "http://testserver/api/v1/findings?page_size=2&cluster=&page=1"


def test_it_answers_an_empty_page_past_the_end(api, two_clusters):
    body = get_json(api, "/api/v1/findings", {"page_size": "2", "page": "7"})
    assert (body["count"], body["results"], body["next"]) == (5, [], None)
    assert parse_qs(urlsplit(body["previous"]).query)["page"] == ["3"]


def test_it_round_trips_a_hostile_group_id_through_the_filter_links_and_json(api, db):
    cluster = make_cluster()
    generation = make_generation(make_topic(cluster))
    hostile = make_group(cluster, HOSTILE_GROUP_ID)
    make_group(cluster, "<script>alert(1)</script>")
    wanted = [make_finding(hostile, generation, partition, minutes_ago=partition) for partition in (0, 1)]
    make_finding(ConsumerGroup.objects.get(group_id="<script>alert(1)</script>"), generation, 0)

    first = get_json(api, "/api/v1/findings", {"group": HOSTILE_GROUP_ID, "page_size": "1"})
    assert first["count"] == 2
    assert first["results"][0]["group"] == HOSTILE_GROUP_ID
    assert parse_qs(urlsplit(first["next"]).query)["group"] == [HOSTILE_GROUP_ID]
    second = get_json(api, first["next"])
    assert [first["results"][0]["id"], second["results"][0]["id"]] == [f.id for f in wanted]
    assert second["results"][0]["group"] == HOSTILE_GROUP_ID

    groups = get_json(api, "/api/v1/groups")["results"]
    assert HOSTILE_GROUP_ID in [group["group_id"] for group in groups]


def test_it_reads_a_page_of_findings_in_two_queries_whatever_its_size(api, db, django_assert_max_num_queries):
    # Each budget: the request's own, and two for the caller's team scope (directory identity, roles).
    clusters = [make_cluster(f"c{n}") for n in range(3)]
    for n, cluster in enumerate(clusters):
        topics = [make_topic(cluster, f"t{m}") for m in range(3)]
        generations = [make_generation(topic, 2) for topic in topics]
        for g in range(4):
            group = make_group(cluster, f"g{g}")
            for generation in generations:
                make_finding(group, generation, 2, minutes_ago=n)
    # Three for the session, its user and the user's role, one count, one page.
    with django_assert_max_num_queries(7):
        body = get_json(api, "/api/v1/findings", {"page_size": "500"})
    assert len(body["results"]) == 36
    assert {row["topic"] for row in body["results"]} == {"t0", "t1", "t2"}
    with django_assert_max_num_queries(7):
        get_json(api, "/api/v1/topics")
    with django_assert_max_num_queries(7):
        get_json(api, "/api/v1/clusters")
    # Groups add one query for their topics, prefetched for the whole page.
    with django_assert_max_num_queries(8):
        assert len(get_json(api, "/api/v1/groups")["results"]) == 12


# What one page of findings costs (session, user, role, directory identity for scopes, count, keys, rows with
# their group, topic and cluster): measured, and the same for 5 rows or 500.
QUERIES_PER_FINDINGS_PAGE = 7


def test_ten_thousand_findings_page_in_a_fixed_number_of_queries(api, db, django_assert_max_num_queries):
    cluster = make_cluster()
    topic = make_topic(cluster, partition_count=100)
    generation = make_generation(topic, 2, tuple(range(100)))
    groups = ConsumerGroup.objects.bulk_create(
        ConsumerGroup(cluster=cluster, group_id=f"g{n}", first_seen_at=NOW, last_seen_at=NOW) for n in range(100)
    )
    Finding.objects.bulk_create(
        Finding(
            cluster=cluster, group=group, topic=topic, generation=generation, partition=partition,
            state=Finding.State.GAP if partition % 2 else Finding.State.PENDING,
            created_at=NOW - timedelta(seconds=n * 100 + partition), updated_at=NOW,
            first_log_start=0, log_start_offset=0, high_watermark=10, lag=10,
        )
        for n, group in enumerate(groups)
        for partition in range(100)
    )
    # How long these take is bench/pages_bench.py's to measure (a timed test fails on a busy machine, not on
    # slow code); here, that a page's cost does not grow with its rows: a fixed number of queries each.
    with django_assert_max_num_queries(QUERIES_PER_FINDINGS_PAGE):
        first = get_json(api, "/api/v1/findings", {"page_size": "500"})
    with django_assert_max_num_queries(QUERIES_PER_FINDINGS_PAGE):
        last = get_json(api, "/api/v1/findings", {"page_size": "500", "page": "20", "state": "gap"})
    with django_assert_max_num_queries(QUERIES_PER_FINDINGS_PAGE):
        filtered = get_json(api, "/api/v1/findings", {"group": "g99", "cluster": "prod"})
    assert (first["count"], len(first["results"])) == (10_000, 500)
    assert (last["count"], len(last["results"]), last["next"]) == (5_000, 0, None)
    assert filtered["count"] == 100


# --- Clusters, topics, groups ----------------------------------------------------------


NO_TLS_NOR_OAUTH = {"ssl_ca_pem_set": False, "ssl_certificate_pem_set": False, "ssl_key_pem_set": False,
                    "ssl_key_password_set": False, "ssl_endpoint_identification": True, "oauth_token_endpoint": "",
                    "oauth_client_id": "", "oauth_client_secret_set": False, "oauth_scope": ""}


def test_it_never_shows_the_sasl_password_or_its_ciphertext(api, db):
    cluster = make_cluster(
        "secure",
        security_protocol=Cluster.SecurityProtocol.SASL_SSL,
        sasl_mechanism=Cluster.SaslMechanism.SCRAM_SHA_512,
        sasl_username="gapwatch",
        status=Cluster.Status.OK,
        last_poll_at=NOW,
        last_success_at=NOW,
        last_poll_duration_ms=1234,
        polls_total=10,
        poll_failures_total=2, slow_polls_total=3, skipped_polls_total=1,
    )
    cluster.set_sasl_password("s3cret-PASS")
    cluster.save()
    make_cluster("open")
    ciphertext = Cluster.objects.get(name="secure").sasl_password_encrypted
    assert ciphertext and "s3cret-PASS" not in ciphertext

    response = api.get("/api/v1/clusters")
    raw = response.content.decode()
    assert response.status_code == 200
    assert "s3cret-PASS" not in raw
    assert ciphertext not in raw
    assert "sasl_password_encrypted" not in raw
    body = json.loads(raw)
    assert body["results"] == [
        {
            "name": "open",
            "bootstrap_servers": "open-kafka:9092",
            "security_protocol": "PLAINTEXT",
            "sasl_mechanism": "",
            "sasl_username": "",
            "sasl_password_set": False,
            **NO_TLS_NOR_OAUTH,
            "enabled": True,
            "status": "new",
            "last_poll_at": None,
            "last_success_at": None,
            "last_poll_duration_ms": None,
            "last_error": "",
            "polls_total": 0,
            "poll_failures_total": 0,
            "slow_polls_total": 0,
            "skipped_polls_total": 0,
        },
        {
            "name": "secure",
            "bootstrap_servers": "secure-kafka:9092",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "gapwatch",
            "sasl_password_set": True,
            **NO_TLS_NOR_OAUTH,
            "enabled": True,
            "status": "ok",
            "last_poll_at": "2025-03-01T12:00:00+00:00",
            "last_success_at": "2025-03-01T12:00:00+00:00",
            "last_poll_duration_ms": 1234,
            "last_error": "",
            "polls_total": 10,
            "poll_failures_total": 2,
            "slow_polls_total": 3,
            "skipped_polls_total": 1,
        },
    ]


def test_it_lists_topics_with_their_latest_generation_and_filters_by_cluster(api, db):
    prod, stage = make_cluster("prod"), make_cluster("stage")
    orders = make_topic(prod, "orders", partition_count=3)
    for number in (1, 3, 2):
        make_generation(orders, number)
    make_topic(prod, "__consumer_offsets", is_internal=True, partition_count=50)
    make_topic(stage, "orders", deleted=True)

    body = get_json(api, "/api/v1/topics")
    assert [(t["cluster"], t["name"], t["generation"]) for t in body["results"]] == [
        ("prod", "__consumer_offsets", None),
        ("prod", "orders", 3),
        ("stage", "orders", None),
    ]
    assert body["results"][1] == {
        "cluster": "prod",
        "name": "orders",
        "topic_id": "id-prod-orders",
        "partition_count": 3,
        "deleted": False,
        "internal": False,
        "generation": 3,
        "first_seen_at": "2025-03-01T12:00:00+00:00",
    }
    assert body["results"][0]["internal"] is True
    stage_only = get_json(api, "/api/v1/topics", {"cluster": "stage"})
    assert [(t["cluster"], t["deleted"]) for t in stage_only["results"]] == [("stage", True)]


def test_it_lists_groups_with_topic_lags_and_open_findings(api, two_clusters):
    prod = Cluster.objects.get(name="prod")
    billing = ConsumerGroup.objects.get(cluster=prod, group_id="billing")
    make_group_topic(billing, Topic.objects.get(cluster=prod, name="payments"), 7)
    make_group_topic(billing, Topic.objects.get(cluster=prod, name="orders"), 140)
    make_group(prod, "idle", present=False, declared_policy=ConsumerGroup.Policy.EARLIEST, member_count=0)

    body = get_json(api, "/api/v1/groups", {"cluster": "prod"})
    assert body["count"] == 3
    by_id = {group["group_id"]: group for group in body["results"]}
    assert list(by_id) == ["audit", "billing", "idle"]
    assert by_id["billing"] == {
        "cluster": "prod",
        "group_id": "billing",
        "state": "Stable",
        "type": "classic",
        "group_type": "classic",
        "assignor": "range",
        "member_count": 1,
        "declared_policy": "unknown",
        "declared_isolation": "unknown",
        "reset_setting": "",
        "evidenced_policy": "unknown",
        "policy_evidence": "",
        "policy_evidenced_at": None,
        "present": True,
        "topics": [{"topic": "orders", "lag": 140}, {"topic": "payments", "lag": 7}],
        "open_findings": 3,
    }
    # audit's closed finding does not count.
    assert (by_id["audit"]["open_findings"], by_id["audit"]["topics"]) == (1, [])
    assert (by_id["idle"]["open_findings"], by_id["idle"]["present"]) == (0, False)
    assert get_json(api, "/api/v1/groups")["count"] == 4


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"group": "billing"}, [("prod", "billing"), ("stage", "billing")]),  # the issue's ?group= returned all
        ({"group": "billing", "cluster": "stage"}, [("stage", "billing")]),
        ({"group": "bill"}, []),  # exact
        ({"group_contains": "BILL"}, [("prod", "billing"), ("stage", "billing")]),
        ({"group_contains": "i", "cluster": "prod"}, [("prod", "audit"), ("prod", "billing")]),
        ({"group_contains": "_"}, []),  # a LIKE wildcard is a character
        ({"group": "", "group_contains": ""}, [("prod", "audit"), ("prod", "billing"), ("stage", "billing")]),
    ],
)
def test_it_filters_groups_by_exact_or_partial_group_id_and_cluster(api, two_clusters, params, expected):
    body = get_json(api, "/api/v1/groups", params)
    assert [(group["cluster"], group["group_id"]) for group in body["results"]] == expected
    assert body["count"] == len(expected)


def test_it_filters_groups_and_topics_by_a_hostile_name(api, db):
    cluster = make_cluster()
    make_topic(cluster, "orders")
    make_group(cluster, HOSTILE_GROUP_ID)
    make_group(cluster, "billing")
    body = get_json(api, "/api/v1/groups", {"group": HOSTILE_GROUP_ID})
    assert [group["group_id"] for group in body["results"]] == [HOSTILE_GROUP_ID]
    assert get_json(api, "/api/v1/groups", {"group_contains": "<script>"})["count"] == 1
    assert [t["name"] for t in get_json(api, "/api/v1/topics", {"topic_contains": "RDER"})["results"]] == ["orders"]
    assert get_json(api, "/api/v1/topics", {"topic": "order"})["count"] == 0


@pytest.mark.parametrize(
    "path, params, parameter",
    [
        ("groups", {"group": ["a", "b"]}, "group"),
        ("groups", {"group_contains": ["a", "b"]}, "group_contains"),
        ("groups", {"cluster": ["a", "b"]}, "cluster"),
        ("groups", {"group": "nul\x00"}, "group"),
        ("groups", {"group_type": "kafka"}, "group_type"),
        ("topics", {"topic_contains": ["a", "b"]}, "topic_contains"),
        ("groups", {"page": "x"}, "page"),
    ],
)
def test_a_wrong_typed_list_filter_is_a_400_naming_it(api, db, path, params, parameter):
    body = get_json(api, f"/api/v1/{path}", params, status=400)
    assert body["parameter"] == parameter
    if isinstance(params[parameter], list):
        assert body["error"] == f"{parameter} must be given once"


# --- One finding ---------------------------------------------------------------------


def test_it_reads_one_finding_with_its_evidence_repairs_and_audit_trail(api, two_clusters):
    from groups.services.audit import audit_record

    finding = two_clusters["f_gap"]
    ConsumerGroup.objects.filter(id=finding.group_id).update(members=[
        {"member_id": "m-1", "client_id": "c-1", "host": "/10.0.0.1", "assignment": [["orders", 2]]}])
    audit_record(action="finding.state_changed", cluster=finding.cluster, object_type="finding",
                 object_id=finding.id, detail={"from": "undecided", "to": "gap"})
    document = get_json(api, "/api/v1/schema")
    body = get_json(api, f"/api/v1/findings/{finding.id}")
    check_against_schema(document, body, response_schema(document, "/api/v1/findings/{id}", "get", 200))
    listed = next(row for row in get_json(api, "/api/v1/findings")["results"] if row["id"] == finding.id)
    assert {key: body[key] for key in listed} == listed  # every field of the list, the same values
    # The factory's finding: definite [0, 30), possible [30, 40), committed 60, likely start 35.
    assert (body["definite_range"], body["possible_range"], body["likely_start"]) == ([0, 30], [30, 40], 35)
    assert body["group_members"] == [{"client_id": "c-1", "host": "/10.0.0.1", "member_id": "m-1", "holds": True}]
    assert [(o["kind"], o["until"], o["start"], o["end"], o["delivers"], o["definite"], o["possible"],
             o["redelivers"]) for o in body["repair_options"]] == [
        ("reset", None, 0, None, 40, 30, 10, 60), ("backfill", "bound", 0, 40, 40, 30, 10, 10),
        ("backfill", "likely", 0, 35, 35, 30, 5, 5)]
    # The reset re-delivers 60 for 40 missed: under the backfill rule's bounds, and the group has a live member.
    assert body["recommendation"]["action"] == "backfill" and body["recommendation"]["findings"] == [finding.id]
    assert [event["action"] for event in body["audit"]] == ["finding.state_changed"]
    assert body["audit"][0]["actor"] is None and body["audit"][0]["system"] is True


def test_a_closed_finding_has_no_repairs_and_a_missing_one_is_a_json_404(api, two_clusters):
    document = get_json(api, "/api/v1/schema")
    closed = get_json(api, f"/api/v1/findings/{two_clusters['f_closed'].id}")
    check_against_schema(document, closed, response_schema(document, "/api/v1/findings/{id}", "get", 200))
    assert (closed["recommendation"], closed["repair_options"], closed["closed_reason"]) == (
        None, [], "topic deleted")
    missing = get_json(api, "/api/v1/findings/999999", status=404)
    assert missing == {"error": "no finding 999999"}
    check_against_schema(document, missing, response_schema(document, "/api/v1/findings/{id}", "get", 404))
    assert get_json(api, "/api/v1/findings/abc", status=400)["parameter"] == "id"


def test_one_finding_follows_the_lists_permission_rules(client, two_clusters):
    path = f"/api/v1/findings/{two_clusters['f_gap'].id}"
    assert get_json(client, path, status=401) == {"error": "authentication required: log in first"}
    client.force_login(user_with_role("nobody", None))
    assert get_json(client, path, status=403)["error"].startswith("no access")
    client.force_login(user_with_role("viewer", "viewer"))
    assert get_json(client, path)["id"] == two_clusters["f_gap"].id


def test_the_interactive_docs_come_from_local_files(api, db):
    body = api.get("/api/v1/docs").content.decode()
    assert '<div id="swagger-ui"></div>' in body
    assert '"url": "/api/v1/schema"' in body
    scripts = re.findall(r'(?:src|href)="([^"]+)"', body)
    assert scripts and all(url.startswith("/static/") for url in scripts), scripts
    # Collected by collectstatic with the project's own files (ninja is an installed app).
    from django.contrib.staticfiles import finders

    for url in scripts:
        assert finders.find(url.removeprefix("/static/")), url
    api.logout()
    anonymous = api.get("/api/v1/docs")
    assert anonymous.status_code == 302 and anonymous.url.startswith("/accounts/login/")


# --- Schema -------------------------------------------------------------------------


# The formats are checked only if their checkers are installed; without them a
# "date-time" would pass anything.
FORMATS = FormatChecker()
assert {"date-time", "uri"} <= set(FORMATS.checkers)


def _resolve(document: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def check_against_schema(document: dict, instance, schema: dict, where: str = "$") -> None:
    """Validates ``instance`` against ``schema`` with jsonschema (OpenAPI 3.1
    schemas are JSON Schema 2020-12); its $refs point into the document's components."""
    validator = Draft202012Validator({**schema, "components": document["components"]}, format_checker=FORMATS)
    errors = sorted(validator.iter_errors(instance), key=str)
    assert not errors, f"{where}: " + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


def response_schema(document: dict, path: str, method: str, status: int) -> dict:
    return document["paths"][path][method]["responses"][str(status)]["content"]["application/json"]["schema"]


def test_the_schema_check_can_fail(api, two_clusters):
    document = get_json(api, "/api/v1/schema")
    body = get_json(api, "/api/v1/findings")
    ok = response_schema(document, "/api/v1/findings", "get", 200)
    check_against_schema(document, body, ok)
    for broken in ({**body, "extra": 1}, {**body, "results": [{**body["results"][0], "found_at": "yesterday"}]},
                   {**body, "results": [{**body["results"][0], "lag": "40"}]},
                   {**body, "next": "not a url"}, {k: v for k, v in body.items() if k != "count"}):
        with pytest.raises(AssertionError):
            check_against_schema(document, broken, ok)


def test_it_serves_an_openapi_document_that_every_answer_conforms_to(api, two_clusters):
    prod = Cluster.objects.get(name="prod")
    billing = ConsumerGroup.objects.get(cluster=prod, group_id="billing")
    make_group_topic(billing, Topic.objects.get(cluster=prod, name="orders"), 140)
    make_topic(prod, "fresh")  # no generation yet: a null
    Cluster.objects.filter(name="prod").update(last_poll_at=NOW, last_poll_duration_ms=12, status="ok")
    document = get_json(api, "/api/v1/schema")
    assert document == json.loads(json.dumps(ninja_api.get_openapi_schema()))
    # django-ninja writes OpenAPI 3.1 (the hand-written document was 3.0).
    assert document["openapi"].startswith("3.1.")
    assert set(document["paths"]) == {f"/api/v1/{name}" for name in ("findings", "clusters", "topics", "groups", "schema",
                                                                      "jobs", "findings/{id}", "findings/{id}/approve",
                                                                      "findings/{id}/dismiss", "findings/dismiss",
                                                                      "findings/approve", "expansions",
                                                                      "expansions/{job_id}",
                                                                      "expansions/{job_id}/approve",
                                                                      "expansions/{job_id}/refuse",
                                                                      "rules", "rules/{rule_id}")}
    approver = user_with_role("approver-for-schema", "approver")
    api.force_login(approver)
    finding = Finding.objects.filter(closed_at__isnull=True).first()
    created = api.post(f"/api/v1/findings/{finding.id}/approve", data=json.dumps({"kind": "backfill"}),
                       content_type="application/json")
    assert created.status_code == 201, created.content
    approve = "/api/v1/findings/{id}/approve"
    check_against_schema(document, created.json(), response_schema(document, approve, "post", 201), "approve 201")
    again = api.post(f"/api/v1/findings/{finding.id}/approve", data=json.dumps({"kind": "backfill"}),
                     content_type="application/json")
    assert again.status_code == 409 and again.json()["job"] == created.json()["id"]
    check_against_schema(document, again.json(), response_schema(document, approve, "post", 409), "approve 409")
    for body, status in (({"kind": "reset", "value": 2.7}, 400), ({"kind": "backfill", "sink": 5}, 400)):
        refused = api.post(f"/api/v1/findings/{finding.id}/approve", data=json.dumps(body),
                           content_type="application/json")
        assert refused.status_code == status, refused.content
        check_against_schema(document, refused.json(), response_schema(document, approve, "post", status), "400")
    missing = api.post("/api/v1/findings/999999/dismiss", data=json.dumps({"reason": "x"}),
                       content_type="application/json")
    assert missing.status_code == 404
    dismiss = "/api/v1/findings/{id}/dismiss"
    check_against_schema(document, missing.json(), response_schema(document, dismiss, "post", 404), "404")
    other = Finding.objects.filter(closed_at__isnull=True).exclude(id=finding.id).first()
    dismissed = api.post(f"/api/v1/findings/{other.id}/dismiss", data=json.dumps({"reason": "known"}),
                         content_type="application/json")
    assert dismissed.status_code == 200, dismissed.content
    check_against_schema(document, dismissed.json(), response_schema(document, dismiss, "post", 200), "dismiss")
    many = api.post("/api/v1/findings/dismiss", data=json.dumps({"ids": [other.id, 999999], "reason": "again"}),
                    content_type="application/json")
    assert many.status_code == 200 and len(many.json()["refused"]) == 2, many.content
    check_against_schema(document, many.json(), response_schema(document, "/api/v1/findings/dismiss", "post", 200),
                         "dismiss many")
    api.force_login(User.objects.get(username="viewer"))
    denied = api.post(f"/api/v1/findings/{finding.id}/dismiss", data=json.dumps({"reason": "x"}),
                      content_type="application/json")
    assert denied.status_code == 403
    check_against_schema(document, denied.json(), response_schema(document, dismiss, "post", 403), "403")

    for path, item in document["paths"].items():
        if "get" not in item or "{" in path:  # one object's path: its own tests below
            continue
        operation = item["get"]
        ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
        body = get_json(api, path, {"include_closed": "true"} if path.endswith("findings") else {})
        check_against_schema(document, body, ok, path)
        if "results" in body:
            assert body["results"], f"{path} walked no rows"
            # Every field of every row is checked: all are required, none undocumented.
            item_schema = _resolve(document, _resolve(document, ok)["properties"]["results"]["items"])
            assert set(item_schema["required"]) == set(item_schema["properties"])
            assert item_schema["additionalProperties"] is False
        # Every declared parameter is accepted; every enum value too.
        for parameter in operation.get("parameters", []):
            values = parameter["schema"].get("enum") or [{"integer": "1", "boolean": "true"}.get(parameter["schema"]["type"], "x")]
            for value in values:
                get_json(api, path, {parameter["name"]: value})
        error_schema = operation["responses"]["401"]["content"]["application/json"]["schema"]
        api.logout()
        check_against_schema(document, get_json(api, path, status=401), error_schema, f"{path} 401")
        api.force_login(User.objects.get(username="viewer"))

    bad = get_json(api, "/api/v1/findings", {"state": "nope"}, status=400)
    error_schema = document["paths"]["/api/v1/findings"]["get"]["responses"]["400"]["content"]["application/json"]["schema"]
    check_against_schema(document, bad, error_schema, "400")
    state = next(p for p in document["paths"]["/api/v1/findings"]["get"]["parameters"] if p["name"] == "state")
    assert state["schema"]["enum"] == ["pending", "undecided", "unowned", "gap", "covered", "expired"]
