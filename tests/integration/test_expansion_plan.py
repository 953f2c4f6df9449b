"""An expansion's plan (issue 33, item 1) on the real stack: a real broker
(Kafka 4.4.0), real groups (librdkafka consumers, a librdkafka share
consumer), a real Celery worker asking the broker's verdict with
CreatePartitions validate_only. The plan changes nothing: the topic keeps its
partitions and nothing is stored.

One topic, read by a live latest group (protected by membership), a group that
consumed, committed and left (protected before), a group declared earliest
(covered) and a share group left at the default (covered on 4.4.0:
KAFKA-20742)."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import TopicCollection
from django.core.management import call_command

from groups.models import AuditEvent, Cluster, ConsumerGroup, RemediationJob, Topic
from groups.services.expansion.plan import NOT_YET
from groups.web.links import topic_url
from tests.factories import NOW, make_group, make_group_topic, user_with_role
from tests.harness.kafka_clients import GroupConsumer, ShareGroupConsumer, wait_until
from tests.harness.pages import client_for, post_json
from tests.harness.scenarios import poll, start_consuming_group
from tests.integration.test_api import check_against_schema, response_schema

EXPANSIONS = "/api/v1/expansions"

HOSTILE = "<script>alert('plan')</script>"


def broker_partitions(broker, topic: str) -> int:
    description = broker.admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)
    return len(description.partitions)


@pytest.fixture
def readers(transactional_db, broker, cluster, unique, settings, share_consumers):
    """Topic ``plan-<unique>`` (2 partitions) with its four readers, polled
    twice a second apart while records are produced (the produce rate)."""
    settings.LAG_SAMPLE_INTERVAL_SECONDS = 1
    topic = f"plan-{unique}"
    broker.create_topic(topic, 2)
    live = start_consuming_group(broker, cluster, topic, f"live-{unique}", offset_reset="latest")
    left = start_consuming_group(broker, cluster, topic, f"left-{unique}", offset_reset="latest")
    left.close()
    earliest = start_consuming_group(broker, cluster, topic, f"early-{unique}", offset_reset="earliest")
    ConsumerGroup.objects.filter(group_id=f"early-{unique}").update(declared_policy="earliest")
    share = ShareGroupConsumer(broker.bootstrap, f"share-{unique}", topic)
    share_consumers.append(share)
    wait_until(lambda: broker.produce(topic, 0, 1) or share.count(0) > 0, interval=0.5,
               what="the share consumer to read partition 0")

    def everyone_seen() -> bool:
        poll(cluster)
        groups = {g.group_id: g for g in ConsumerGroup.objects.filter(group_topics__topic__name=topic)}
        return (groups.get(f"left-{unique}") is not None and groups[f"left-{unique}"].member_count == 0
                and f"share-{unique}" in groups and groups[f"live-{unique}"].member_count == 1)

    wait_until(everyone_seen, interval=0.5, what="a poll to see the four readers as they are")
    broker.produce(topic, 0, 50)
    broker.produce(topic, 1, 50)

    def rate_sampled() -> bool:
        poll(cluster)  # samples at most LAG_SAMPLE_INTERVAL_SECONDS apart: the later one counts the 100 records
        sampled = Topic.objects.get(name=topic)
        return sampled.previous_end_offsets is not None and sampled.end_offsets - sampled.previous_end_offsets >= 100

    wait_until(rate_sampled, interval=0.25, what="two end samples, before and after the 100 records")
    yield topic
    live.close()
    earliest.close()


def test_it_plans_every_reader_with_the_brokers_verdict_and_changes_nothing(
        transactional_db, broker, cluster, unique, readers, celery_worker_thread):
    topic = readers
    client = client_for(user_with_role("viewer", "viewer"))
    response = post_json(client, EXPANSIONS, {"cluster": "local", "topic": topic, "partitions": 4, "dry_run": True})
    assert response.status_code == 200, response.content
    plan = json.loads(response.content)
    document = json.loads(client.get("/api/v1/schema").content)
    check_against_schema(document, plan, response_schema(document, "/api/v1/expansions", "post", 200), "plan")

    assert (plan["current_partitions"], plan["new_partitions"], plan["added_partitions"]) == (2, 4, [2, 3])
    assert plan["broker_verdict"] == {"accepted": True, "asked": True,
                                      "reason": f"the broker would raise '{topic}' to 4 partitions"}
    assert plan["produce_rate"]["offsets"] >= 100 and plan["produce_rate"]["offsets_per_second"] > 0
    groups = {g["group"]: g for g in plan["groups"]}
    assert set(groups) == {f"live-{unique}", f"left-{unique}", f"early-{unique}", f"share-{unique}"}

    live = groups[f"live-{unique}"]
    assert (live["outcome"], live["policy"], live["policy_source"], live["protocol"], live["members"]) == \
        ("protected_before", "latest", "assumed", "classic", 1)
    assert (live["protection"], live["sink"]) == ("membership", "parquet")
    assert "joins it with a member of its own" in live["reason"]
    assert "two rebalances" in live["cost"] and "eager assignor 'range'" in live["cost"]
    assert live["needs"].startswith(f"Read on group 'live-{unique}'")
    assert live["alternative"].startswith("repair after: a backfill of the sound range to parquet")
    missed = live["expected_missed"]
    assert missed["estimate"] is True and missed["low"] == 0 and missed["high"] > 0
    assert missed["words"].startswith("none if the protection wins") and "300 s" in missed["words"]

    left = groups[f"left-{unique}"]
    assert (left["outcome"], left["members"], left["policy_source"]) == ("protected_before", 0, "assumed")
    assert "commits the new partitions at their log start" in left["reason"]
    assert (left["expected_missed"]["low"], left["expected_missed"]["high"]) == (0, 0)

    early = groups[f"early-{unique}"]
    assert (early["outcome"], early["policy"], early["policy_source"]) == ("covered", "earliest", "declared")

    share = groups[f"share-{unique}"]
    assert Cluster.objects.get(name="local").kafka_features["metadata_version"].startswith("4.4")
    assert (share["outcome"], share["kind"], share["policy"], share["policy_source"]) == \
        ("covered", "share", "latest", "cluster")
    assert "KAFKA-20742" in share["reason"]
    assert share["policy_words"] == "share.auto.offset.reset=latest (the broker's default)"
    assert plan["counts"] == {"covered": 2, "protected_before": 2, "repaired_after": 0, "at_risk": 0}

    # A plan only: the broker still has 2 partitions; no job, no audit row.
    assert broker_partitions(broker, topic) == 2
    assert not RemediationJob.objects.exists() and not AuditEvent.objects.filter(action__startswith="expansion")

    # The command line shows the same plan, asking the broker itself.
    call_command("plan_expansion", "--cluster", "local", "--topic", topic, "--partitions", "4", "--json",
                 stdout=(out := _Out()))
    assert {g["group"]: g["outcome"] for g in json.loads(out.text)["groups"]} == \
        {g: groups[g]["outcome"] for g in groups}
    call_command("plan_expansion", "--cluster", "local", "--topic", topic, "--partitions", "4", stdout=(out := _Out()))
    assert "broker: accepts" in out.text and "protected before" in out.text


def test_the_brokers_refusal_is_shown_in_words(transactional_db, broker, cluster, unique, celery_worker_thread):
    """Partitions added behind Gapwatch's back (no poll since): the stored count
    says 2, the broker has 3, so 3 is no increase and the broker says so."""
    topic = f"refused-{unique}"
    broker.create_topic(topic, 2)
    poll(cluster)
    broker.raise_partitions(topic, 3)
    approver = user_with_role("approver", "approver")
    response = post_json(client_for(approver), EXPANSIONS, {"cluster": "local", "topic": topic, "partitions": 3,
                                                "dry_run": True})
    assert response.status_code == 200, response.content
    verdict = json.loads(response.content)["broker_verdict"]
    assert verdict["accepted"] is False and verdict["asked"] is True
    assert verdict["reason"].startswith("INVALID_PARTITIONS: ") and "3 partition" in verdict["reason"]

    page = client_for(approver).get(topic_url(Topic.objects.get(name=topic)), {"partitions": "3"})
    body = page.content.decode()
    assert page.status_code == 200 and "The broker refuses" in body and "INVALID_PARTITIONS" in body

    # More than the broker takes in one request: its own limit, in its words.
    response = post_json(client_for(approver), EXPANSIONS, {"cluster": "local", "topic": topic, "partitions": 20_003,
                                                "dry_run": True})
    verdict = json.loads(response.content)["broker_verdict"]
    assert verdict["accepted"] is False and verdict["reason"].startswith("POLICY_VIOLATION: ")
    assert broker_partitions(broker, topic) == 3


class _Out:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


@pytest.fixture
def stored_topic(db):
    cluster = Cluster.objects.create(name="local", bootstrap_servers="127.0.0.1:1")
    topic = Topic.objects.create(cluster=cluster, name="orders", kafka_topic_id="id", partition_count=2,
                                 first_seen_at=NOW, updated_at=NOW)
    make_group_topic(make_group(cluster, HOSTILE, member_count=1), topic, 0)
    return topic


def _refused_without_asking(*, name, args, timeout):
    raise AssertionError("bad input must be refused before a worker asks the broker")


def _accepted(*, name, args, timeout):
    return {"accepted": True, "reason": "would raise", "asked": True}


@pytest.mark.parametrize(("body", "status", "error"), [
    pytest.param({"cluster": "local", "topic": "orders", "partitions": 3, "dry_run": False}, 403,
                 "needs the approver role", id="dry-run-false-by-a-viewer"),
    pytest.param({"cluster": "local", "topic": "orders", "partitions": 3}, 400, NOT_YET, id="dry-run-missing"),
    pytest.param({"cluster": "local", "topic": "orders", "partitions": 3, "dry_run": "true"}, 400,
                 "dry_run must be", id="dry-run-text"),
    pytest.param({"cluster": "local", "topic": "orders", "partitions": "3", "dry_run": True}, 400,
                 "partitions must be a whole number", id="partitions-text"),
    pytest.param({"cluster": "local", "topic": "orders", "partitions": 3.5, "dry_run": True}, 400,
                 "partitions must be a whole number", id="partitions-float"),
    pytest.param({"cluster": "local", "topic": "orders", "partitions": True, "dry_run": True}, 400,
                 "partitions must be a whole number", id="partitions-bool"),
    pytest.param({"cluster": "local", "topic": "orders", "partitions": None, "dry_run": True}, 400,
                 "partitions must be", id="partitions-null"),
    pytest.param({"cluster": "local", "topic": "orders", "partitions": 2, "dry_run": True}, 400,
                 "higher than the topic's 2 partitions", id="partitions-not-higher"),
    pytest.param({"cluster": "local", "topic": "orders", "partitions": -1, "dry_run": True}, 400,
                 "higher than the topic's 2 partitions", id="partitions-negative"),
    pytest.param({"cluster": "local", "topic": "orders", "partitions": 2**63, "dry_run": True}, 400,
                 "partitions must be at most", id="partitions-huge"),
    pytest.param({"cluster": "local", "topic": "ord\x00ers", "partitions": 3, "dry_run": True}, 400,
                 "NUL", id="nul-in-topic"),
    pytest.param({"cluster": ["local"], "topic": "orders", "partitions": 3, "dry_run": True}, 400,
                 "cluster must be text", id="cluster-list"),
    pytest.param({"cluster": "nope", "topic": "orders", "partitions": 3, "dry_run": True}, 404,
                 "no topic 'orders' on cluster 'nope'", id="unknown-cluster"),
    pytest.param({"cluster": "local", "topic": "nope", "partitions": 3, "dry_run": True}, 404,
                 "no topic 'nope' on cluster 'local'", id="unknown-topic"),
    pytest.param("[1, 2]", 400, "the body must be a JSON object", id="body-a-list"),
    pytest.param("{not json", 400, "the body must be a JSON object", id="body-not-json"),
])
def test_bad_input_is_refused_and_changes_nothing(stored_topic, body, status, error, monkeypatch):
    from groups.services.expansion import plan as expansions

    # The worker's answer is faked at the one crossing to workers (no worker runs here).
    monkeypatch.setattr(expansions, "task_answer", _refused_without_asking)
    client = client_for(user_with_role("viewer", "viewer"))
    response = post_json(client, EXPANSIONS, body)
    assert response.status_code == status, response.content
    assert error in json.loads(response.content)["error"]
    assert Topic.objects.get().partition_count == 2
    document = json.loads(client.get("/api/v1/schema").content)
    check_against_schema(document, json.loads(response.content),
                         response_schema(document, "/api/v1/expansions", "post", status), "refused")


def test_who_may_plan(stored_topic):
    anonymous = post_json(client_for_anonymous(), EXPANSIONS, {"cluster": "local", "topic": "orders", "partitions": 3,
                                                   "dry_run": True})
    assert anonymous.status_code == 401
    nobody = post_json(client_for(user_with_role("nobody", None)), EXPANSIONS, {"cluster": "local", "topic": "orders",
                                                                    "partitions": 3, "dry_run": True})
    assert nobody.status_code == 403 and "no role" in json.loads(nobody.content)["error"]
    csrf = post_json(client_for(user_with_role("viewer", "viewer"), csrf=True), EXPANSIONS,
                     {"cluster": "local", "topic": "orders", "partitions": 3, "dry_run": True})
    assert csrf.status_code == 403  # a session's POST without its CSRF token


def client_for_anonymous():
    from django.test import Client

    return Client()


def test_the_page_plans_and_escapes_a_hostile_group_id(stored_topic, monkeypatch):
    from groups.services.expansion import plan as expansions

    monkeypatch.setattr(expansions, "task_answer", _accepted)  # the one crossing to workers; none runs here
    client = client_for(user_with_role("viewer", "viewer"))
    page = client.get(topic_url(stored_topic))
    assert page.status_code == 200 and 'name="partitions"' in page.content.decode()

    page = client.get(topic_url(stored_topic), {"partitions": "3"})
    body = page.content.decode()
    assert page.status_code == 200
    assert "&lt;script&gt;alert(&#x27;plan&#x27;)&lt;/script&gt;" in body and HOSTILE not in body
    assert "protected before" in body and "estimate" in body and "The broker accepts" in body
    assert "two rebalances" in body and "Read on group" in body  # the protection's cost and needs
    assert "dry run" in body.lower()

    bad = client.get(topic_url(stored_topic), {"partitions": "2"})
    assert bad.status_code == 400 and "higher than the topic&#x27;s 2 partitions" in bad.content.decode()
    junk = client.get(topic_url(stored_topic), {"partitions": "x\x00"})
    assert junk.status_code == 400


def test_the_request_that_follows_a_plan_waits_on_no_worker(stored_topic, monkeypatch):
    """Issue 42, item 2: the broker's verdict the plan was shown with is kept for the request that
    follows it (the job's first step asks the broker again before anything changes): one worker
    round trip for plan and request, not two. A count not asked yet is asked."""
    from groups.services.expansion import plan as expansions

    asked = []

    def worker_answer(*, name, args, timeout):
        asked.append(args)
        return {"accepted": True, "reason": "would raise", "asked": True}
    monkeypatch.setattr(expansions, "task_answer", worker_answer)
    alice = client_for(user_with_role("alice", "approver"))
    body = {"cluster": stored_topic.cluster.name, "topic": stored_topic.name, "partitions": 3, "dry_run": True}
    plan = alice.post("/api/v1/expansions", data=json.dumps(body), content_type="application/json")
    assert plan.status_code == 200 and len(asked) == 1
    request = {**body, "dry_run": False, "fingerprint": json.loads(plan.content)["fingerprint"],
               "repairs": {HOSTILE: {"max_records": 10}}}
    created = alice.post("/api/v1/expansions", data=json.dumps(request), content_type="application/json")
    assert created.status_code == 201, created.content
    assert len(asked) == 1  # the request used the verdict the plan was shown with
    other = alice.post("/api/v1/expansions", data=json.dumps({**body, "partitions": 5}),
                       content_type="application/json")
    assert other.status_code == 200 and len(asked) == 2
