"""The operator's whole loop in a real headless Chromium on the real stack
(Kafka, PostgreSQL, a Celery worker on Redis, Spark): a gap appears, an
approver backfills it, the job succeeds, the finding leaves the open list and
shows in the history as repaired with the job's numbers; then the same with
an offset reset. Screenshots go to .gapwatch/test-artifacts/lifecycle-*.png.
"""

from __future__ import annotations

import pytest

from groups.models import Cluster, Finding, RemediationJob
from tasks.polling import poll_cluster
from tests.harness.kafka_clients import wait_until
from tests.harness.browser import ARTIFACTS, OPERATOR_PASSWORD, approver_operator, log_in
from tests.harness.scenarios import K, gap_scenario


def _finished(job_id: int) -> bool:
    return RemediationJob.objects.get(id=job_id).status in RemediationJob.FINISHED


@pytest.mark.browser
@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_gap_is_backfilled_then_another_reset_and_both_leave_the_open_list_as_repaired(page, 
    live_server, broker, unique, celery_worker_thread, settings, tmp_path
):
    settings.BACKFILL_OUTPUT = str(tmp_path / "backfills")
    settings.SPARK_MASTER = "local[2]"
    operator = approver_operator()
    cluster = Cluster.objects.create(name="local", bootstrap_servers=broker.bootstrap)
    scenarios = {kind: (f"{kind}-{unique}", f"{kind}-group-{unique}") for kind in ("backfill", "reset")}
    for topic, group_id in scenarios.values():
        gap_scenario(broker, cluster, topic, group_id)
    # The consumers committed once more as they closed: a reset planned from
    # older stored offsets would refuse to overwrite that (correctly), so the
    # page shows what a poll after they stopped saw.
    assert poll_cluster(cluster_id=cluster.id).ok
    gaps = {kind: Finding.objects.get(topic__name=topic, partition=2) for kind, (topic, _) in scenarios.items()}
    assert all(f.state == "gap" and f.missed_definite == K for f in gaps.values())

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1500, "height": 900})
    log_in(page, live_server, operator.username, OPERATOR_PASSWORD)
    page.goto(f"{live_server.url}/?view=partitions")
    for finding in gaps.values():
        assert page.locator(f'tr[data-finding="{finding.id}"] .pill').inner_text() == "gap"
    page.screenshot(path=str(ARTIFACTS / "lifecycle-1-open.png"), full_page=True)

    for step, (kind, finding) in enumerate(gaps.items(), start=2):
        page.goto(f"{live_server.url}/findings/{kind}?ids={finding.id}")
        page.click(f"text=Approve {kind}")
        page.wait_for_url("**/jobs/*/")
        job = RemediationJob.objects.get(kind=kind)
        wait_until(lambda: _finished(job.id), timeout=600, interval=1, what=f"the {kind} job to finish")
        job.refresh_from_db()
        assert job.status == "succeeded", (job.status_reason, job.error)
        page.reload()
        assert page.locator("h1 .pill").inner_text() == "succeeded"
        result = page.locator("table.result tbody tr").first
        assert result.locator("td").nth(1).inner_text() == "2"
        page.screenshot(path=str(ARTIFACTS / f"lifecycle-{step}-{kind}-job.png"), full_page=True)

        page.goto(f"{live_server.url}/?view=partitions")
        assert page.locator(f'tr[data-finding="{finding.id}"]').count() == 0, "left the open list"
        page.goto(f"{live_server.url}/")
        assert page.locator(f'a[href="/findings/{finding.id}/"]').count() == 0, "left the triage"
        page.goto(f"{live_server.url}/?view=history&resolution=repaired")
        row = page.locator(f'tr[data-finding="{finding.id}"]')
        assert row.locator(".pill").first.inner_text() == "repaired"
        remediation = row.locator("td.remediation").inner_text()
        assert f"{kind} #{job.id}" in remediation and "succeeded" in remediation
        missed = finding.backfill_end - finding.backfill_start
        if kind == "backfill":
            assert f"{missed} of {missed} records replayed" in remediation
        else:
            assert "offsets reset to 0" in remediation
        page.screenshot(path=str(ARTIFACTS / f"lifecycle-{step}-{kind}-history.png"), full_page=True)

    repaired = {kind: Finding.objects.get(id=f.id) for kind, f in gaps.items()}
    assert {f.resolution for f in repaired.values()} == {"repaired"}
    missed = {kind: f.backfill_end - f.backfill_start for kind, f in gaps.items()}
    assert missed["backfill"] >= K and missed["reset"] >= K, "the definite K and any possibly missed"
    assert repaired["backfill"].recovered_messages == missed["backfill"]
    assert repaired["backfill"].redelivered_messages is None, "a backfill never moves the group"
    reset = repaired["reset"]
    assert reset.recovered_messages == missed["reset"]
    assert reset.redelivered_messages >= reset.recovered_messages, "the group reads its own reads again too"
    assert {f.closed_by for f in repaired.values()} == {operator}
