"""The shipped monitoring: the Prometheus alerting rules pass ``promtool``
(syntax and their own unit tests), and every metric the rules and the
Grafana dashboard use exists on /metrics; the outcome metrics count what
verified jobs repaired and recovered."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from groups.models import Cluster, Finding, RemediationJob
from groups.services import remediation
from groups.services.cadence import tick_record
from groups.services.remediation import job_transition
from tests.factories import make_finding

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "prometheus" / "gapwatch-rules.yml"
RULES_TESTS = ROOT / "monitoring" / "prometheus" / "gapwatch-rules.test.yml"
DASHBOARD = ROOT / "monitoring" / "grafana" / "gapwatch-dashboard.json"
METRIC_NAME = re.compile(r"\bgapwatch_[a-z_]+\b")


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60, cwd=RULES.parent)


def test_promtool_accepts_the_rules_and_their_unit_tests_pass():
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 7 rules found" in checked.stdout
    tested = promtool("test", "rules", str(RULES_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_rules_alert_on_gaps_unowned_partitions_failed_jobs_and_unreachable_clusters():
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    assert {rule["alert"] for rule in rules} >= {
        "GapwatchGapOpened", "GapwatchPartitionUnowned", "GapwatchJobFailed", "GapwatchClusterUnreachable"
    }


def _used_metrics() -> dict[str, set[str]]:
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = {"rules": [rule["expr"] for rule in rules],
                   "dashboard": [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]}
    variables = [v["definition"] for v in dashboard["templating"]["list"] if v.get("definition")]
    expressions["dashboard"] += variables
    return {source: {name for expr in exprs for name in METRIC_NAME.findall(expr)}
            for source, exprs in expressions.items()}


def _exposed(client) -> dict[str, dict]:
    """Sample name -> {labels tuple: value}, from a scrape as Prometheus does it."""
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    samples: dict[str, dict] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def test_every_metric_the_rules_and_the_dashboard_use_is_on_metrics(client, stored_state):
    # A tick reached a worker (the last-tick time has no sample before one did).
    tick_record(cluster_id=Cluster.objects.get(name="prod").id, arrived=time.time(), ran=True)
    exposed = _exposed(client)
    used = _used_metrics()

    assert used["rules"] and used["dashboard"]
    for source, names in used.items():
        missing = sorted(name for name in names if name not in exposed)
        assert not missing, f"{source} use metrics /metrics does not have: {missing}"


def test_repaired_findings_and_recovered_messages_are_counted(client, stored_state, approver):
    gap = Finding.objects.get(group__group_id="billing", state="gap", closed_at__isnull=True)
    other = make_finding(gap.group, gap.generation, 0, backfill_start=5, backfill_end=25)
    reset = remediation.job_request(user=approver, finding_ids=[gap.id], kind="reset", params={})
    backfill = remediation.job_request(user=approver, finding_ids=[other.id], kind="backfill", params={})
    for job, result in (
        (reset, {"verified": True, "partitions": [{"topic": "orders", "partition": 2, "before": 60, "after": 0,
                                                   "planned": 0}]}),
        (backfill, {"sink": {"kind": "parquet", "output": "/x"}, "partitions": [
            {"topic": "orders", "partition": 0, "expected": 20, "delivered": 20, "explained": {}}]}),
    ):
        for old, new in (("approved", "queued"), ("queued", "running"), ("running", "succeeded")):
            assert job_transition(job_id=job.id, from_statuses=[old], to_status=new,
                                  **({"result": result} if new == "succeeded" else {}))
    still_open = make_finding(gap.group, gap.generation, 1)
    failed = remediation.job_request(user=approver, finding_ids=[still_open.id], kind="reset", params={})
    RemediationJob.objects.filter(id=failed.id).update(status="failed")

    exposed = _exposed(client)

    prod = ("cluster", "prod")
    assert exposed["gapwatch_findings_resolved_total"][(prod, ("resolution", "repaired"))] == 2
    assert exposed["gapwatch_recovered_messages_total"][(prod, ("kind", "reset"))] == 40
    assert exposed["gapwatch_recovered_messages_total"][(prod, ("kind", "backfill"))] == 20
    assert exposed["gapwatch_redelivered_messages_total"][(prod,)] == 60
    assert exposed["gapwatch_jobs_finished_total"][(prod, ("kind", "reset"), ("status", "failed"))] == 1
    assert exposed["gapwatch_jobs_finished_total"][(prod, ("kind", "backfill"), ("status", "succeeded"))] == 1
