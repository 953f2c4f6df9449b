"""GET /metrics: exact values from stored state, label escaping, access rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from groups.models import Cluster, ConsumerGroup, Finding, PartitionGeneration
from tests.factories import (
    HOSTILE_METRICS_GROUP_ID,
    NOW,
    make_finding,
    make_generation,
    user_with_role,
)
from tests.pki import CertificateAuthority

HOSTILE_GROUP_ID = HOSTILE_METRICS_GROUP_ID
REMOTE = "203.0.113.7"


def scrape(client, status: int = 200, **extra) -> str:
    response = client.get("/metrics", **extra)
    assert response.status_code == status, response.content
    if status == 200:
        assert response["Content-Type"] == CONTENT_TYPE_LATEST
    return response.content.decode()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def expected_samples() -> dict[tuple[str, tuple], float]:
    expected: dict[tuple[str, tuple], float] = {}

    def put(name: str, value: float, **labels: str) -> None:
        expected[(name, tuple(sorted(labels.items())))] = value

    put("gapwatch_cluster_up", 1, cluster="prod")
    put("gapwatch_cluster_up", 0, cluster="stage")
    put("gapwatch_last_poll_duration_seconds", 1.5, cluster="prod")
    put("gapwatch_last_poll_timestamp_seconds", NOW.timestamp(), cluster="prod")
    put("gapwatch_polls_total", 42, cluster="prod")
    put("gapwatch_polls_total", 5, cluster="stage")
    put("gapwatch_poll_failures_total", 3, cluster="prod")
    put("gapwatch_poll_failures_total", 5, cluster="stage")
    put("gapwatch_slow_polls_total", 4, cluster="prod")
    put("gapwatch_slow_polls_total", 0, cluster="stage")
    put("gapwatch_skipped_polls_total", 2, cluster="prod")
    put("gapwatch_skipped_polls_total", 0, cluster="stage")
    put("gapwatch_poll_interval_seconds", 10)
    # PLAINTEXT clusters: no certificate, so no expiry series and nothing expiring.
    put("gapwatch_cluster_certificates_expiring", 0, cluster="prod")
    put("gapwatch_cluster_certificates_expiring", 0, cluster="stage")
    prod_open = {"pending": 1, "undecided": 0, "unowned": 0, "gap": 2, "covered": 1, "expired": 1}
    for state, count in prod_open.items():
        put("gapwatch_open_findings", count, cluster="prod", state=state)
        put("gapwatch_open_findings", 0, cluster="stage", state=state)
    put("gapwatch_missed_messages_definite", 30 + 20 + 0, cluster="prod")
    put("gapwatch_missed_messages_possible", 10 + 7 + 12, cluster="prod")
    put("gapwatch_missed_messages_definite", 0, cluster="stage")
    put("gapwatch_missed_messages_possible", 0, cluster="stage")
    # Only the assumed finding has figures under latest: conditional, never in the definite sum.
    put("gapwatch_missed_messages_if_latest", 8, cluster="prod", kind="definite")
    put("gapwatch_missed_messages_if_latest", 4, cluster="prod", kind="possible")
    put("gapwatch_missed_messages_if_latest", 0, cluster="stage", kind="definite")
    put("gapwatch_missed_messages_if_latest", 0, cluster="stage", kind="possible")
    lag = "gapwatch_finding_lag_messages"
    # Per-group series name the group's kind: billing is classic, the hostile one a share group.
    billing, hostile = {"group": "billing", "group_type": "classic"}, {"group": HOSTILE_GROUP_ID, "group_type": "share"}
    put(lag, 40 + 0, cluster="prod", **billing, topic="orders", state="gap")
    put(lag, 100, cluster="prod", **billing, topic="orders", state="pending")
    put(lag, 0, cluster="prod", **billing, topic="payments", state="covered")
    put(lag, 5, cluster="prod", **hostile, topic="orders", state="expired")
    put("gapwatch_group_topic_lag_messages", 140, cluster="prod", **billing, topic="orders")
    put("gapwatch_group_topic_lag_messages", 0, cluster="prod", **billing, topic="payments")
    put("gapwatch_group_topic_lag_messages", 5, cluster="prod", **hostile, topic="orders")
    # Outcomes (issue 12): no job ran and the one closed finding predates resolutions: all zero.
    for cluster in ("prod", "stage"):
        for resolution in ("repaired", "partial", "dismissed", "expired"):
            put("gapwatch_findings_resolved_total", 0, cluster=cluster, resolution=resolution)
        for kind in ("reset", "backfill"):
            put("gapwatch_recovered_messages_total", 0, cluster=cluster, kind=kind)
            for status in ("requested", "approved", "queued", "waiting", "running"):
                put("gapwatch_jobs_active", 0, cluster=cluster, kind=kind, status=status)
            for status in ("succeeded", "failed", "cancelled"):
                put("gapwatch_jobs_finished_total", 0, cluster=cluster, kind=kind, status=status)
        put("gapwatch_redelivered_messages_total", 0, cluster=cluster)
        for verdict in ("nothing_lost", "loss", "not_decided"):
            put("gapwatch_expansion_groups_total", 0, cluster=cluster, verdict=verdict)
        for how in ("protected", "covered", "copied", "lost", "not_decided"):
            put("gapwatch_expansion_group_outcomes_total", 0, cluster=cluster, how=how)
    return expected


def test_it_exports_exact_values_from_stored_state(client, stored_state):
    # Latest only assumed: nothing definite, the figures under latest beside it (conditional).
    billing = ConsumerGroup.objects.get(cluster__name="prod", group_id="billing")
    make_finding(billing, PartitionGeneration.objects.get(topic__cluster__name="prod", topic__name="orders", number=2),
                 1, state=Finding.State.GAP, lag=0, missed_definite=0, missed_possible=12,
                 missed_definite_if_latest=8, missed_possible_if_latest=4)
    scraped = samples(scrape(client))
    # The watch's pulse lives in Redis, shared by parallel test databases whose cluster ids repeat:
    # its samples are checked apart (tests/integration/test_monitoring.py), here only that they are there.
    ticks = {key: value for key, value in scraped.items() if key[0].startswith(("gapwatch_watch_ticks",
                                                                                 "gapwatch_last_watch_tick"))}
    assert {(dict(labels)["cluster"], dict(labels)["outcome"]) for name, labels in ticks
            if name == "gapwatch_watch_ticks_total"} == {(c, o) for c in ("prod", "stage") for o in ("ran", "skipped")}
    assert {key: value for key, value in scraped.items() if key not in ticks} == expected_samples()


def test_it_escapes_a_quote_a_backslash_and_a_newline_in_label_values(client, stored_state):
    text = scrape(client)
    escaped = 'group="we\\"ird\\\\group\\nname"'
    assert (
        'gapwatch_finding_lag_messages{cluster="prod",' + escaped + ',group_type="share",state="expired",'
        'topic="orders"} 5.0'
    ) in text.splitlines()
    assert ('gapwatch_group_topic_lag_messages{cluster="prod",' + escaped + ',group_type="share",topic="orders"} 5.0'
            in text.splitlines())
    # Every line is still one sample or one comment: the raw newline never leaks.
    assert all(line.startswith(("gapwatch_", "# HELP gapwatch_", "# TYPE gapwatch_")) for line in text.splitlines())


def billing_orders_lag(text: str) -> dict[str, float]:
    """billing's finding lag series on orders, by state."""
    return {
        dict(labels)["state"]: value for (name, labels), value in samples(text).items()
        if name == "gapwatch_finding_lag_messages" and dict(labels)["group"] == "billing"
        and dict(labels)["topic"] == "orders"
    }


def test_it_counts_a_partition_once_when_generations_overlap(client, stored_state):
    billing = Finding.objects.get(group__group_id="billing", partition=2).group
    gen4 = make_generation(billing.cluster.topics.get(name="orders"), 4, (0, 1, 2, 3))
    make_finding(billing, gen4, 2, state=Finding.State.UNOWNED, lag=77)
    # The newest generation's finding wins: partition 2 is unowned now, not also a gap.
    assert billing_orders_lag(scrape(client)) == {"unowned": 77, "pending": 100}
    # Both stay counted as open findings.
    assert samples(scrape(client))[("gapwatch_open_findings", (("cluster", "prod"), ("state", "unowned")))] == 1


def test_it_sums_lag_over_the_partitions_of_a_topic_in_one_state(client, stored_state):
    billing = Finding.objects.get(group__group_id="billing", partition=2).group
    gen3 = billing.cluster.topics.get(name="orders").generations.get(number=3)
    make_finding(billing, gen3, 0, state=Finding.State.PENDING, lag=11)
    make_finding(billing, gen3, 1, state=Finding.State.GAP, lag=2)
    # One series per group, topic and state, whatever the number of partitions (issue 24: size).
    assert billing_orders_lag(scrape(client)) == {"gap": 40 + 2, "pending": 100 + 11}


def test_it_reads_the_database_at_every_scrape_in_a_bounded_number_of_queries(
    client, stored_state, django_assert_max_num_queries
):
    with django_assert_max_num_queries(6):
        scrape(client)
    Cluster.objects.filter(name="stage").update(status=Cluster.Status.OK, polls_total=6)
    with django_assert_max_num_queries(6):
        after = samples(scrape(client))
    assert after[("gapwatch_cluster_up", (("cluster", "stage"),))] == 1
    assert after[("gapwatch_polls_total", (("cluster", "stage"),))] == 6


def test_it_shows_a_certificate_expiring_within_the_warning_days_on_the_clusters_page_and_in_metrics(
    client, db, settings
):
    settings.CERTIFICATE_EXPIRY_WARNING_DAYS = 10
    now = datetime.now(UTC)
    # A CA made 25 days ago (valid 30 days: expires in 5) and a client certificate valid 60 days more.
    ca = CertificateAuthority("Expiring CA", now=now - timedelta(days=25))
    client_certificate = ca.issue("gapwatch", client=True, not_after=now + timedelta(days=60))
    Cluster.objects.create(name="tls", bootstrap_servers="broker:9093", security_protocol="SSL",
                           ssl_ca_pem=ca.certificate_pem, ssl_certificate_pem=client_certificate.certificate_pem)
    ca_expiry = ca.issued.certificate.not_valid_after_utc

    found = samples(scrape(client))
    assert found[("gapwatch_cluster_certificates_expiring", (("cluster", "tls"),))] == 1
    expiry = "gapwatch_cluster_certificate_expiry_timestamp_seconds"
    assert found[(expiry, (("cluster", "tls"), ("role", "ca"), ("subject", "CN=Expiring CA,O=Gapwatch tests")))] == (
        ca_expiry.timestamp())
    assert found[(expiry, (("cluster", "tls"), ("role", "client"), ("subject", "CN=gapwatch")))] == (
        client_certificate.certificate.not_valid_after_utc.timestamp())

    client.force_login(user_with_role("viewer-certs", "viewer"))
    page = client.get("/clusters/").content.decode()
    # Whole days left: a little under 5 (the CA's validity is counted from a moment before the page's).
    assert f"CA certificate “CN=Expiring CA,O=Gapwatch tests” expires on {ca_expiry:%Y-%m-%d} (in 4 days)" in page
    assert "client certificate “CN=gapwatch”" not in page, "60 days away: not within the 10 warning days"


def test_it_exports_only_gapwatch_metrics(client, stored_state):
    names = {name for name, _ in samples(scrape(client))}
    assert names and all(name.startswith("gapwatch_") for name in names)


@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_it_lets_anonymous_loopback_scrape(client, db, address):
    scrape(client, REMOTE_ADDR=address)


@pytest.mark.parametrize(
    "extra",
    [
        {"REMOTE_ADDR": REMOTE},
        {"REMOTE_ADDR": "10.0.0.8"},
        {"REMOTE_ADDR": "::ffff:203.0.113.7"},
        # A proxy on the same host: the client is elsewhere.
        {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": REMOTE},
        {"REMOTE_ADDR": "127.0.0.1", "HTTP_FORWARDED": f"for={REMOTE}"},
        # Headers other proxies and CDNs use for the same thing.
        {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_CLIENT_IP": REMOTE},
        {"REMOTE_ADDR": "127.0.0.1", "HTTP_TRUE_CLIENT_IP": REMOTE},
        {"REMOTE_ADDR": "127.0.0.1", "HTTP_CF_CONNECTING_IP": REMOTE},
        {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_REAL_IP": REMOTE},
    ],
)
def test_it_refuses_anonymous_scrapes_from_elsewhere(client, db, extra, settings):
    settings.METRICS_TOKEN = ""
    assert scrape(client, status=403, **extra) == "forbidden\n"


def test_it_believes_x_forwarded_for_only_from_a_trusted_proxy(client, db, settings):
    import ipaddress

    settings.METRICS_TOKEN = ""
    settings.TRUSTED_PROXIES = (ipaddress.ip_network("127.0.0.1/32"),)
    # The trusted proxy says the client is on loopback: believed.
    scrape(client, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="127.0.0.1")
    # It says the client is elsewhere, or a forged left-most entry claims loopback: refused.
    scrape(client, status=403, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=REMOTE)
    scrape(client, status=403, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=f"127.0.0.1, {REMOTE}")
    # No header from the proxy: the client is unknown.
    scrape(client, status=403, REMOTE_ADDR="127.0.0.1")


def test_it_accepts_the_bearer_token_from_anywhere_and_only_that_token(client, db, settings):
    settings.METRICS_TOKEN = "tok-3f9a"
    scrape(client, REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION="Bearer tok-3f9a")
    scrape(client, REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION="bearer tok-3f9a")
    # A bearer token that is not METRICS_TOKEN is checked as a personal API token: unknown, a 401.
    scrape(client, status=401, REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION="Bearer tok-3f9")
    scrape(client, status=403, REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION="Basic tok-3f9a")
    scrape(client, status=403, REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION="tok-3f9a")
    scrape(client, status=403, REMOTE_ADDR=REMOTE)


@pytest.mark.parametrize("token", ["", None])
def test_it_never_matches_an_empty_token(client, db, settings, token):
    if token is None:
        del settings.METRICS_TOKEN
    else:
        settings.METRICS_TOKEN = token
    scrape(client, status=403, REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION="Bearer ")
    scrape(client, status=403, REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION="Bearer")


def test_it_lets_a_logged_in_user_scrape_from_anywhere(client, db, settings):
    settings.METRICS_TOKEN = ""
    client.force_login(user_with_role("viewer", "viewer"))
    scrape(client, REMOTE_ADDR=REMOTE)


def test_it_answers_405_to_a_post(client, db):
    assert client.post("/metrics").status_code == 405
