"""The expansion page in words (issue 44, items 3 and 4): a finished
expansion's steps, plans and verdicts are sentences and times from the one
time formatter, never ISO timestamps, microseconds, Python dicts, None/True
or identifiers like ``repaired_after``. Rows from the ORM, as the job's
services store them."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone

from groups.models import ExpansionJob, RemediationJob
from tests.factories import HOSTILE_GROUP_ID, make_cluster, make_generation, make_group, make_topic
from tests.harness.pages import client_for

PROTECTED, REPAIRED = "payments.settlement-consumer_eu-west-1-blue", "fraud-detection.scoring-service_ap-southeast-2-green"


def make_finished_expansion(*, cluster, topic, user, backfill_job: RemediationJob) -> ExpansionJob:
    """Topic raised from 4 to 6 partitions, ended with a loss: one group protected by membership, one
    (a streams group) repaired after with a backfill queued and one waiting for a person, one covered.
    Steps, decisions and verdicts in the shapes tasks/expansion/run.py stores."""
    done_at = (timezone.now() - timedelta(minutes=3)).isoformat()  # with microseconds, as stored
    return ExpansionJob.objects.create(
        cluster=cluster, topic=topic, from_partitions=4, to_partitions=6, requested_by=user,
        approved_by=user, approved_at=timezone.now(), status=ExpansionJob.Status.SUCCEEDED_WITH_LOSS,
        plan={"broker_verdict": {"accepted": True, "reason": "would raise the count to 6"}}, plan_fingerprint="ab" * 32,
        decisions={
            PROTECTED: {"outcome": "protected_before", "kind": "classic", "method": "membership",
                        "reason": "a live latest group: Gapwatch joins it and commits the new partitions",
                        "membership": {"client_id": f"gapwatch-seat-{PROTECTED}", "joined_after_seconds": 3.25,
                                       "left": True, "partitions": {"4": {"offset": 0, "won": True,
                                                                          "words": "committed at the log start"}}},
                        "committed": {"5": 0, "4": 0}},
            REPAIRED: {"outcome": "repaired_after", "kind": "streams", "sink": "kafka", "max_records": None,
                       "reason": "a streams group Gapwatch cannot sit in: a backfill after",
                       "backfills": {"4": {"job": backfill_job.id, "offsets": 120},
                                     "5": {"left": "waits for a person", "offsets": 80}}},
            HOSTILE_GROUP_ID: {"outcome": "covered", "kind": "share", "reason": "an earliest group reads from 0",
                               "protection": {"previous": "latest", "explicit": False, "applied": True, "undone": True,
                                              "starts": {"4": 0, "5": 0}}},
        },
        steps={"validate": {"done_at": done_at, "detail": {"accepted": True, "reason": "would raise"}},
               "add_partitions": {"done_at": done_at, "detail": {"added": True, "words": "4 → 6 partitions"}},
               "watch": {"done_at": done_at, "detail": {"undecided": [], "gave_up_after_seconds": None}}},
        verdicts={PROTECTED: {"nothing_lost": True, "how": "protected", "words": "read from offset 0"},
                  REPAIRED: {"nothing_lost": False, "words": "80 offsets not repaired",
                             "unrepaired": [{"partition": 5, "start": 0, "end": 80, "why": "waits for a person"}]}})


def test_the_expansion_page_speaks_in_sentences_and_times(approver):
    cluster = make_cluster("prod-eu-west-1")
    topic = make_topic(cluster, "payments.settlement-events_v2", partition_count=6)
    make_generation(topic, 1, (0, 1, 2, 3))
    job = RemediationJob.objects.create(cluster=cluster, group=make_group(cluster, REPAIRED),
                                        kind=RemediationJob.Kind.BACKFILL, status=RemediationJob.Status.QUEUED,
                                        requested_by=approver)
    expansion = make_finished_expansion(cluster=cluster, topic=topic, user=approver, backfill_job=job)

    body = client_for(approver).get(f"/expansions/{expansion.id}/").content.decode()
    text = re.sub(r"<[^>]+>", "", body)  # what a person reads: attributes and markup aside
    for raw in (r"\d{4}-\d\d-\d\dT\d\d:\d\d", r"\d\d:\d\d:\d\d\.\d{6}", r"\{'", r"\bNone\b", r"\bTrue\b",
                r"\bFalse\b", "Done With Loss", "succeeded_with_loss", "repaired_after", "protected_before", r"\[\d\]"):
        assert not re.search(raw, text), f"{raw!r} on the page: {re.search(raw, text)}"
    assert '<dd id="expansion-status" data-status="succeeded_with_loss" class="warn">Done with loss</dd>' in body
    assert f'href="/audit/?object_type=expansion&amp;object_id={expansion.id}"' in body  # its audit trail
    # Each step done at a time of the one formatter (UTC here, the viewer's zone in the browser), what it found in rows.
    steps = re.search(r'<ol class="steps">.*?</ol>', body, re.S).group(0)
    assert steps.count('<time datetime="') == 3 and " UTC<" in steps
    assert "<dt>accepted</dt><dd class=\"hostile\">yes</dd>" in steps
    # Stored values as words, no clock read: the fixture's watch step stored gave_up_after_seconds None, and
    # its seat joined_after_seconds 3.25 ("after 3.2 s" below).
    assert "<dt>gave up after seconds</dt><dd class=\"hostile\">none</dd>" in steps
    assert "Protected before: a live latest group" in text and "Repaired after: a streams group" in text
    assert "streams (KIP-1071)" in text and "share (KIP-932)" in text
    assert "committed partition 4 at offset 0, partition 5 at offset 0" in text
    assert "started at partition 4 at offset 0, partition 5 at offset 0" in text
    assert "after 3.2 s, left" in text and "partition 4 committed at offset 0: before any member held it" in text
    assert f'partition 4: <a href="/jobs/{job.id}/">backfill job {job.id}</a> (120 offsets)' in body
    assert "partition 5, offsets 0 to 80 (the end not included): waits for a person" in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and HOSTILE_GROUP_ID not in body
    listing = client_for(approver).get("/expansions/").content.decode()
    assert "<td>done with loss</td>" in listing and "Done With Loss" not in listing


def test_an_active_expansions_page_refreshes_its_live_part_in_place_never_reloads(approver):
    """A page that reloaded itself every 2 s (a meta refresh) wiped a refusal reason being typed, sent
    the keyboard back to the top, and raced a browser test's own navigation; the live part is fetched
    instead (live.js, which leaves it alone while focus is inside), and ends when the job does."""
    cluster = make_cluster("prod-eu-west-1")
    topic = make_topic(cluster, "orders", partition_count=4)
    job = ExpansionJob.objects.create(cluster=cluster, topic=topic, from_partitions=4, to_partitions=6,
                                      requested_by=approver, status=ExpansionJob.Status.REQUESTED,
                                      plan={"broker_verdict": {"accepted": True, "reason": "would raise"}},
                                      plan_fingerprint="cd" * 32)
    client = client_for(approver)
    page = client.get(f"/expansions/{job.id}/").content.decode()
    assert 'http-equiv="refresh"' not in page
    assert f'<div id="expansion" data-live-url="/expansions/{job.id}/live" data-live-every="2000">' in page
    live = client.get(f"/expansions/{job.id}/live").content.decode()
    assert 'data-status="requested"' in live and 'id="approve-expansion"' in live
    assert "data-live-done" not in live and "<html" not in live

    ExpansionJob.objects.filter(id=job.id).update(status=ExpansionJob.Status.SUCCEEDED)
    page = client.get(f"/expansions/{job.id}/").content.decode()
    assert "data-live-url" not in page.split('<div id="expansion"', 1)[1].split(">", 1)[0]
    assert "data-live-done" in client.get(f"/expansions/{job.id}/live").content.decode()
    assert client.get("/expansions/999999/live").status_code == 404
