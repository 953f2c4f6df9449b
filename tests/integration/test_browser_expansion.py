"""An expansion requested and approved in a real headless Chromium (issue
33): one approver shows the plan on the topic's page and requests it, a
second approves it on the job's page; the plan approved is the plan shown.
From stored state, the broker's verdict answered by the test and the job's
task captured (the job itself runs in test_expansion_job.py). Screenshots go
to .gapwatch/test-artifacts/expansion-*.png."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from groups.models import ExpansionJob
from tests.harness.browser import (
    ARTIFACTS,
    OPERATOR_PASSWORD,
    approve_expansion_as,
    approver_operator,
    log_in,
    show_expansion_plan,
)
from tests.integration.test_expansion_job import HOSTILE, requested_topic  # noqa: F401 - the fixture

pytestmark = pytest.mark.browser


@pytest.mark.django_db(transaction=True)
def test_a_plan_shown_in_the_browser_is_requested_and_approved_by_a_second_person(
        page, live_server, requested_topic):  # noqa: F811 - the fixture imported above
    topic, sent = requested_topic
    alice = approver_operator("alice")
    bob = User.objects.create_user("bob", password=OPERATOR_PASSWORD)
    bob.groups.add(Group.objects.get(name="approver"))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1500, "height": 900})

    log_in(page, live_server, alice.username, OPERATOR_PASSWORD)
    show_expansion_plan(page, live_server, topic.id, 3)
    assert page.locator("table.expansion-plan td.group-id").first.inner_text() == HOSTILE  # text, not markup
    page.screenshot(path=str(ARTIFACTS / "expansion-plan.png"), full_page=True)
    page.click("text=Request this expansion")
    page.wait_for_url(f"{live_server.url}/expansions/*/")
    job = ExpansionJob.objects.get()
    assert job.status == "requested" and job.requested_by == alice
    page.click("#approve-expansion")  # four-eyes: the requester cannot
    page.wait_for_load_state("load")
    assert "four-eyes" in page.locator("ul.messages").inner_text() and ExpansionJob.objects.get().status == "requested"

    assert "approved" in approve_expansion_as(page, live_server, bob.username, job.id)
    job.refresh_from_db()
    assert (job.status, job.approved_by) == ("approved", bob) and sent == [(job.id,)]
    page.screenshot(path=str(ARTIFACTS / "expansion-approved.png"), full_page=True)
