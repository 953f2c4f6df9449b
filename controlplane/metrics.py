"""GET /metrics: Prometheus text format, computed from the database at each
scrape (stored state only; no Kafka call).

A scrape is allowed for a logged-in user with a role, with ``Authorization:
Bearer <METRICS_TOKEN>`` when that setting is non-empty, or from loopback
(forwarding headers believed only from TRUSTED_PROXIES); anything else gets 403. Label values (group ids are arbitrary
text) are escaped by prometheus_client.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator

from django.conf import settings
from redis.exceptions import RedisError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from controlplane.client_address import client_address
from groups.domain.scopes import VIEWER
from groups.selectors.access import Scope, scope_of
from groups.selectors.lists import clusters_with_certificates_list
from groups.selectors.metrics import (
    EXPANSION_HOWS,
    EXPANSION_VERDICTS,
    expansion_verdicts_by_cluster,
    findings_open_lag_list,
    findings_summary_by_cluster,
    group_topics_lag_list,
    jobs_count_by_cluster_kind_status,
)
from groups.models import Cluster, Finding, RemediationJob
from groups.services.cadence import tick_counts

class GapwatchCollector:
    """Evaluated per scrape; six queries whatever the number of clusters.

    ``scope`` (a person scraping with their session or API token, limited to
    a team scope): only the clusters it lets them read, and of the per-group
    series only the groups and topics it covers."""

    def __init__(self, scope: Scope | None = None) -> None:
        self.scope = scope

    def _reads(self, cluster: str, group: str | None = None, topic: str | None = None) -> bool:
        return self.scope is None or self.scope.may(VIEWER, cluster=cluster, group=group, topic=topic) is not None

    def collect(self) -> Iterator[Metric]:
        clusters = [cluster for cluster in clusters_with_certificates_list(
            now=timezone.now(), within_days=settings.CERTIFICATE_EXPIRY_WARNING_DAYS) if self._reads(cluster.name)]
        yield from self._cluster_metrics(clusters)
        yield from self._certificate_metrics(clusters)
        names, summary = [cluster.name for cluster in clusters], findings_summary_by_cluster()
        yield from self._finding_metrics(names, summary)
        yield from self._outcome_metrics(names, summary)
        yield from self._lag_metrics()
        yield from self._expansion_metrics(names)

    def _expansion_metrics(self, cluster_names: list[str]) -> Iterator[Metric]:
        groups = CounterMetricFamily(
            "gapwatch_expansion_groups", "Groups judged at the end of expansion jobs, by verdict (nothing_lost; "
            "loss: offsets remain unrepaired; not_decided: the job failed first).", labels=["cluster", "verdict"])
        counts, hows = expansion_verdicts_by_cluster()
        for name in cluster_names:
            for verdict in EXPANSION_VERDICTS:
                groups.add_metric([name, verdict], counts.get((name, verdict), 0))
        yield groups
        outcomes = CounterMetricFamily(
            "gapwatch_expansion_group_outcomes", "Groups judged at the end of expansion jobs, by how: protected "
            "(Gapwatch made the group start every new partition at its log start), covered (it did by itself), "
            "copied (what its own application did not read was copied to its sink), lost, not_decided.",
            labels=["cluster", "how"])
        for name in cluster_names:
            for how in EXPANSION_HOWS:
                outcomes.add_metric([name, how], hows.get((name, how), 0))
        yield outcomes

    def _cluster_metrics(self, clusters: list[Cluster]) -> Iterator[Metric]:
        up = GaugeMetricFamily("gapwatch_cluster_up", "1 if the last poll of the cluster succeeded.", labels=["cluster"])
        duration = GaugeMetricFamily(
            "gapwatch_last_poll_duration_seconds", "Duration of the last poll of the cluster.", labels=["cluster"]
        )
        last_poll = GaugeMetricFamily(
            "gapwatch_last_poll_timestamp_seconds", "Unix time of the last poll of the cluster.", labels=["cluster"]
        )
        polls = CounterMetricFamily("gapwatch_polls", "Polls of the cluster, failed ones included.", labels=["cluster"])
        failures = CounterMetricFamily("gapwatch_poll_failures", "Failed polls of the cluster.", labels=["cluster"])
        slow = CounterMetricFamily("gapwatch_slow_polls", "Full polls of the cluster that took longer than "
                                   "the poll interval (gapwatch_poll_interval_seconds).", labels=["cluster"])
        skipped = CounterMetricFamily("gapwatch_skipped_polls", "Polls of the cluster that were due but did not "
                                      "run because the last one was still running.", labels=["cluster"])
        interval = GaugeMetricFamily("gapwatch_poll_interval_seconds", "Seconds between full polls (POLL_INTERVAL_SECONDS).")
        interval.add_metric([], settings.POLL_INTERVAL_SECONDS)
        for cluster in clusters:
            up.add_metric([cluster.name], 1 if cluster.status == Cluster.Status.OK else 0)
            # A cluster never polled has no duration or time: no sample rather than a made-up 0.
            if cluster.last_poll_duration_ms is not None:
                duration.add_metric([cluster.name], cluster.last_poll_duration_ms / 1000)
            if cluster.last_poll_at is not None:
                last_poll.add_metric([cluster.name], cluster.last_poll_at.timestamp())
            polls.add_metric([cluster.name], cluster.polls_total)
            failures.add_metric([cluster.name], cluster.poll_failures_total)
            slow.add_metric([cluster.name], cluster.slow_polls_total)
            skipped.add_metric([cluster.name], cluster.skipped_polls_total)
        yield from (up, duration, last_poll, polls, failures, slow, skipped, interval)
        yield from self._tick_metrics(clusters)

    def _tick_metrics(self, clusters: list[Cluster]) -> Iterator[Metric]:
        """The watch's pulse (groups.services.cadence), from Redis; nothing when Redis does not answer."""
        ticks = CounterMetricFamily("gapwatch_watch_ticks", "Watcher ticks that reached a worker, by outcome (ran; "
                                    "skipped: a poll held the cluster's lock).", labels=["cluster", "outcome"])
        last = GaugeMetricFamily("gapwatch_last_watch_tick_timestamp_seconds",
                                 "Unix time at which the cluster's last watcher tick reached a worker.",
                                 labels=["cluster"])
        try:
            counts = {cluster.name: tick_counts(cluster_id=cluster.id) for cluster in clusters}
        except RedisError:
            return
        for name, count in counts.items():
            ticks.add_metric([name, "ran"], count["ran"])
            ticks.add_metric([name, "skipped"], count["skipped"])
            if count["last"] is not None:
                last.add_metric([name], count["last"])
        yield from (ticks, last)

    def _certificate_metrics(self, clusters: list[Cluster]) -> Iterator[Metric]:
        expiry = GaugeMetricFamily(
            "gapwatch_cluster_certificate_expiry_timestamp_seconds",
            "Unix time at which a certificate of the cluster's CA bundle (role ca) or client chain (role client) "
            "stops being valid.", labels=["cluster", "role", "subject"],
        )
        expiring = GaugeMetricFamily(
            "gapwatch_cluster_certificates_expiring",
            "Certificates of the cluster that expire within CERTIFICATE_EXPIRY_WARNING_DAYS, or have expired.",
            labels=["cluster"],
        )
        for cluster in clusters:
            for certificate in cluster.certificates:
                expiry.add_metric([cluster.name, certificate.role, certificate.subject],
                                  certificate.not_after.timestamp())
            expiring.add_metric([cluster.name], len(cluster.certificates_expiring))
        yield expiry
        yield expiring

    def _finding_metrics(self, cluster_names: list[str], summary: dict[str, dict]) -> Iterator[Metric]:
        open_findings = GaugeMetricFamily(
            "gapwatch_open_findings", "Open findings by state.", labels=["cluster", "state"]
        )
        for name in cluster_names:
            for state in Finding.State.values:
                open_findings.add_metric([name, state], summary.get(name, {}).get("open", {}).get(state, 0))
        yield open_findings

        definite = GaugeMetricFamily(
            "gapwatch_missed_messages_definite",
            "Messages certainly never read, summed over open findings in state gap, expired or undecided.",
            labels=["cluster"],
        )
        possible = GaugeMetricFamily(
            "gapwatch_missed_messages_possible",
            "Messages possibly never read (up to the first commit), summed over open findings in state gap or expired.",
            labels=["cluster"],
        )
        # Conditional figures, never bounds: what an assumed latest would make of the same findings.
        if_latest = GaugeMetricFamily(
            "gapwatch_missed_messages_if_latest",
            "Conditional, not a bound: messages missed if the groups whose policy is only assumed start at latest "
            "(kind: definite or possible under that assumption), summed over the same open findings.",
            labels=["cluster", "kind"],
        )
        for name in cluster_names:
            missed_definite, missed_possible = summary.get(name, {}).get("missed", (0, 0))
            definite.add_metric([name], missed_definite)
            possible.add_metric([name], missed_possible)
            assumed_definite, assumed_possible = summary.get(name, {}).get("if_latest", (0, 0))
            if_latest.add_metric([name, "definite"], assumed_definite)
            if_latest.add_metric([name, "possible"], assumed_possible)
        yield from (definite, possible, if_latest)

    def _outcome_metrics(self, cluster_names: list[str], summary: dict[str, dict]) -> Iterator[Metric]:
        """How findings left the open list and what jobs recovered (counts from
        the stored rows: they only grow while clusters are kept)."""
        resolved = CounterMetricFamily(
            "gapwatch_findings_resolved", "Findings closed, by resolution (repaired, partial: repaired to an estimate, dismissed, expired).",
            labels=["cluster", "resolution"],
        )
        recovered = CounterMetricFamily(
            "gapwatch_recovered_messages",
            "Missed messages delivered by verified jobs: replayed by backfills, or read again after resets.",
            labels=["cluster", "kind"],
        )
        redelivered = CounterMetricFamily(
            "gapwatch_redelivered_messages",
            "Messages verified resets made their groups read a second time (the recovered ones included).",
            labels=["cluster"],
        )
        for name in cluster_names:
            entry = summary.get(name, {})
            for resolution in Finding.Resolution.values:
                resolved.add_metric([name, resolution], entry.get("resolved", {}).get(resolution, 0))
            by_kind = entry.get("recovered", {})
            for kind in RemediationJob.Kind.values:
                recovered.add_metric([name, kind], by_kind.get(kind, (0, 0))[0])
            redelivered.add_metric([name], by_kind.get(RemediationJob.Kind.RESET, (0, 0))[1])
        active = GaugeMetricFamily(
            "gapwatch_jobs_active", "Remediation jobs not finished, by kind and status.",
            labels=["cluster", "kind", "status"],
        )
        finished = CounterMetricFamily(
            "gapwatch_jobs_finished", "Remediation jobs finished, by kind and outcome (succeeded, failed, cancelled).",
            labels=["cluster", "kind", "status"],
        )
        job_counts = jobs_count_by_cluster_kind_status()
        for name in cluster_names:
            for kind in RemediationJob.Kind.values:
                for status in RemediationJob.ACTIVE:
                    active.add_metric([name, kind, status], job_counts.get((name, kind, status), 0))
                for status in RemediationJob.FINISHED:
                    finished.add_metric([name, kind, status], job_counts.get((name, kind, status), 0))
        yield from (resolved, recovered, redelivered, active, finished)

    def _lag_metrics(self) -> Iterator[Metric]:
        # Summed per group, topic and state, not one series per partition: those grew with the
        # open findings (3.7 MB a scrape at 20,000, 8.2 MB at 50,000). docs/operations.md, "Metrics".
        finding_lag = GaugeMetricFamily(
            "gapwatch_finding_lag_messages",
            "Lag of a group on the partitions of a topic with an open finding in this state, summed (per "
            "partition: high watermark minus committed offset, or minus log start when the group has no commit).",
            labels=["cluster", "group", "group_type", "topic", "state"],
        )
        for row in findings_open_lag_list():
            if not self._reads(row["cluster"], row["group"], row["topic"]):
                continue
            finding_lag.add_metric([row["cluster"], row["group"], row["group_type"], row["topic"], row["state"]],
                                   row["lag"])
        group_lag = GaugeMetricFamily(
            "gapwatch_group_topic_lag_messages",
            "Total lag of a present group on a topic, over all its partitions.",
            labels=["cluster", "group", "group_type", "topic"],
        )
        for row in group_topics_lag_list():
            if not self._reads(row["cluster"], row["group"], row["topic"]):
                continue
            group_lag.add_metric([row["cluster"], row["group"], row["group_type"], row["topic"]], row["lag"])
        yield from (finding_lag, group_lag)


# A private registry: the process-wide default one would add Python process
# metrics and be shared with anything else that registers there.
registry = CollectorRegistry(auto_describe=False)
registry.register(GapwatchCollector())


def _bearer_token_matches(request: HttpRequest) -> bool:
    expected = getattr(settings, "METRICS_TOKEN", "")
    if not expected:
        return False
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode(), expected.encode())


def _direct_from_loopback(request: HttpRequest) -> bool:
    address = client_address(request)
    return address is not None and address.is_loopback


def may_scrape(request: HttpRequest) -> bool:
    return request.user.is_authenticated or _bearer_token_matches(request) or _direct_from_loopback(request)


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not may_scrape(request):
        return HttpResponse("forbidden\n", status=403, content_type="text/plain; charset=utf-8")
    scope = scope_of(request.user) if request.user.is_authenticated else None
    if scope is not None and not scope.everything:
        scoped = CollectorRegistry(auto_describe=False)
        scoped.register(GapwatchCollector(scope))
        return HttpResponse(generate_latest(scoped), content_type=CONTENT_TYPE_LATEST)
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
