"""Pages that fit the screen (issue 44, item 2), in a real headless Chromium
at 1,440×900 and on a phone (390×844): nothing scrolls sideways, long group
ids and topic names wrap at their separators ('-', '.', '_'), not mid-word,
and on a phone the finding, the expansion plan and the job pages put each
label above its value. Rows come from the ORM factories, with names as long
as real clusters have and the hostile group id."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from groups.models import AuditEvent, Finding, RemediationJob
from groups.services.expansion.plan import _verdict_key
from groups.services.redis_client import redis_client
from groups.web.links import group_url, topic_url
from tests.factories import (
    HOSTILE_GROUP_ID,
    make_cluster,
    make_finding,
    make_generation,
    make_group,
    make_group_topic,
    make_topic,
)
from tests.harness.browser import OPERATOR_PASSWORD, VIEWPORTS, approver_operator, axe_violations, log_in
from tests.integration.test_pages_expansion import PROTECTED, REPAIRED, make_finished_expansion

pytestmark = pytest.mark.browser

DESKTOP, PHONE = VIEWPORTS["desktop"], VIEWPORTS["phone"]
LONG_GROUPS = (PROTECTED, REPAIRED)  # the expansion protected the first and repaired the second
LONG_TOPIC = "payments.settlement-events_v2.eu-west-1"

# Elements that scroll sideways inside the page (a table wider than its box), as "tag.class: scroll/client".
SIDEWAYS = """(selector = 'main *') => [...document.querySelectorAll(selector)].filter(element => {
    const style = getComputedStyle(element);
    return ['auto', 'scroll'].includes(style.overflowX) && element.scrollWidth > element.clientWidth + 1;
}).map(element => `${element.tagName.toLowerCase()}.${element.className}: ${element.scrollWidth}/${element.clientWidth}`)"""

# Where the browser broke a line inside a name between two letters or digits (mid-word), by the character the
# line ends with; a break after a separator or punctuation is where a name may wrap.
MID_WORD_BREAKS = """(selector) => {
    const breaks = [];
    for (const element of document.querySelectorAll(selector)) {
        const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
        let previous = null;
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (let index = 0; index < node.length; index++) {
                const range = document.createRange();
                range.setStart(node, index);
                range.setEnd(node, index + 1);
                const rect = range.getClientRects()[0];
                if (!rect) continue;
                const character = node.data[index];
                if (previous && rect.top > previous.top + 2 && /[\\p{L}\\p{N}]/u.test(previous.character)
                        && /[\\p{L}\\p{N}]/u.test(character)) {
                    breaks.push(`${element.textContent}: after '${previous.character}'`);
                }
                previous = {top: rect.top, character};
            }
        }
    }
    return breaks;
}"""


@pytest.fixture
def long_names(db, live_server, page):
    """Three groups with long ids (one hostile) reading a long-named topic: open findings, a closed one, a
    backfill job of the second group (queued by the expansion), a finished expansion and an audit row; the
    operator logged in."""
    operator = approver_operator()
    cluster = make_cluster("prod-eu-west-1")
    topic = make_topic(cluster, LONG_TOPIC, partition_count=4)
    generation = make_generation(topic, 2, (0, 1, 2, 3))
    groups = [make_group(cluster, group_id, member_count=2) for group_id in (*LONG_GROUPS, HOSTILE_GROUP_ID)]
    findings = [make_finding(group, generation, partition, high_watermark=1_234_567, committed_offset=1_200_000,
                             lag=34_567, missed_definite=12_345, missed_possible=678, backfill_end=12_345,
                             owner_client_id=f"{group.group_id}-client-7f3a9c", owner_host="/10.120.33.201")
                for group in groups for partition in (2, 3)]
    for group in groups:
        make_group_topic(group, topic, 34_567)
    closed = findings[3]  # the second group's partition 3, repaired by the job below
    Finding.objects.filter(id=closed.id).update(
        resolution=Finding.Resolution.REPAIRED, closed_at=timezone.now(), closed_by=operator,
        closed_reason="backfill job verified: 12,345 of 12,345 offsets replayed to the sink")
    job = RemediationJob.objects.create(
        cluster=cluster, group=groups[1], kind=RemediationJob.Kind.BACKFILL, status=RemediationJob.Status.SUCCEEDED,
        requested_by=operator, approved_by=operator, approved_at=timezone.now(),
        started_at=timezone.now() - timedelta(seconds=75), finished_at=timezone.now(),
        params={"sink": "kafka", "replay_topic": f"{LONG_TOPIC}.replay-for_{LONG_GROUPS[1]}", "max_records": 20000},
        plan=[{"topic": LONG_TOPIC, "partition": 2, "start": 0, "end": 12_345, "count": 12_345,
               "definite": 12_345, "possible": 678}])
    job.findings.add(findings[2], closed, through_defaults={"kind": job.kind})
    expansion = make_finished_expansion(cluster=cluster, topic=topic, user=operator, backfill_job=job)
    AuditEvent.objects.create(actor=operator, action="job.approve", cluster=cluster, object_type="job",
                              object_id=str(job.id), detail={"group": HOSTILE_GROUP_ID, "kind": "backfill"})
    redis_client().set(_verdict_key(cluster, LONG_TOPIC, 6),
                       json.dumps({"accepted": True, "reason": "would raise", "asked": True}), ex=600)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
    yield {"finding": findings[0], "job": job, "expansion": expansion, "topic": topic, "group": groups[0],
           "generation": generation, "groups": groups}
    assert dialogs == []  # no script from a group id ever ran


def _pages(rows) -> dict[str, str]:
    return {
        "findings": "/?view=partitions",
        "history": "/?view=history",
        "triage": "/",
        "jobs": "/jobs/",
        "groups": "/groups/?all=1",
        "group": group_url(rows['group']),
        "finding": f"/findings/{rows['finding'].id}/",
        "job": f"/jobs/{rows['job'].id}/",
        "expansion": f"/expansions/{rows['expansion'].id}/",
        "plan": f"{topic_url(rows['topic'])}?partitions=6",
        "audit": "/audit/",
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_no_page_scrolls_sideways_and_names_wrap_at_their_separators(long_names, live_server, page, size):
    page.set_viewport_size(size)
    overflowing, sideways, mid_word = {}, {}, {}
    for name, path in _pages(long_names).items():
        page.goto(f"{live_server.url}{path}")
        width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        if width[0] > width[1]:
            overflowing[name] = width
        if size == DESKTOP and (inside := page.evaluate(SIDEWAYS)):
            sideways[name] = inside
        if breaks := page.evaluate(MID_WORD_BREAKS, ".group-id, .topic-name"):
            mid_word[name] = breaks
    assert not overflowing, f"pages wider than the window: {json.dumps(overflowing, indent=1)}"
    assert not sideways, f"tables that scroll sideways inside the page: {json.dumps(sideways, indent=1)}"
    assert not mid_word, f"names broken mid-word: {json.dumps(mid_word, indent=1, ensure_ascii=False)}"


# The cells of the pages' card tables whose column name is not shown above the value, the cell not a whole line.
NOT_STACKED = """() => {
    const cells = [...document.querySelectorAll('table.stack td[data-label]')].filter(td => td.offsetParent);
    const wrong = cells.filter(td => {
        const before = getComputedStyle(td, '::before');
        const row = td.closest('tr').getBoundingClientRect();
        return before.content !== JSON.stringify(td.dataset.label) || before.display !== 'block'
            || td.getBoundingClientRect().width < row.width - 2;
    }).map(td => `${td.closest('table').className} ${td.dataset.label}`);
    return {cells: cells.length, wrong};
}"""


@pytest.mark.django_db(transaction=True)
def test_on_a_phone_the_finding_plan_and_job_pages_put_each_label_above_its_value(long_names, live_server, page):
    page.set_viewport_size(PHONE)
    for name in ("finding", "plan", "job", "expansion"):
        page.goto(f"{live_server.url}{_pages(long_names)[name]}")
        stacked = page.evaluate(NOT_STACKED)
        assert stacked["cells"] >= 5 and stacked["wrong"] == [], (name, stacked)
        assert page.evaluate(SIDEWAYS, "table.stack, table.stack *") == [], name  # nothing in a card scrolls
    page.set_viewport_size(DESKTOP)  # a table again where there is room: one row per line, names in the head
    assert page.evaluate(NOT_STACKED)["wrong"] != []
    assert page.locator("table.stack thead").first.is_visible()
    assert axe_violations(page) == []
