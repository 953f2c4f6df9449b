"""The Java client settings the share-group reader gives Kafka's Admin: the
Spark job's mapping of a cluster's settings, without its ``kafka.`` prefix."""

from __future__ import annotations

from groups.domain.cluster_config import ClusterConfig
from adapters.kafka.java_client import java_client_properties
from adapters.kafka.java_admin import JavaAdmin


def test_it_maps_sasl_scram_over_tls_with_a_pem_trust_store():
    properties = java_client_properties(ClusterConfig(
        "b:9093", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="gap",
        sasl_password='p"w', ssl_ca_pem="-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n"))
    assert properties["bootstrap.servers"] == "b:9093"
    assert properties["security.protocol"] == "SASL_SSL"
    assert properties["ssl.truststore.type"] == "PEM"
    assert properties["ssl.endpoint.identification.algorithm"] == "https"
    assert properties["sasl.mechanism"] == "SCRAM-SHA-512"
    assert properties["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="gap" password="p\\"w";')
    assert not any(name.startswith("kafka.") for name in properties)


def test_it_maps_oauthbearer_to_the_java_clients_oidc_login():
    properties = java_client_properties(ClusterConfig(
        "b:9093", security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER", ssl_endpoint_identification=False,
        oauth_token_endpoint="https://idp/token", oauth_client_id="gapwatch", oauth_client_secret="s3cret"))
    assert properties["sasl.login.callback.handler.class"].endswith("OAuthBearerLoginCallbackHandler")
    assert properties["sasl.oauthbearer.token.endpoint.url"] == "https://idp/token"
    assert 'clientSecret="s3cret"' in properties["sasl.jaas.config"]
    assert properties["ssl.endpoint.identification.algorithm"] == ""


def test_it_starts_no_jvm_and_opens_no_connection_when_created():
    reader = JavaAdmin(ClusterConfig("127.0.0.1:1"))
    assert reader._gateway is None and reader._admin is None
    reader.close()


def test_the_java_topic_listing_parses_to_ids_and_internal_flags():
    from adapters.kafka.java_reads import parse_topic_listings

    text = ("[(name=orders.v2, topicId=qQR4L8AlSOCTLtFTFSHsIg, internal=false), "
            "(name=__consumer_offsets, topicId=WTbtdD3MSi6now2nM19Msw, internal=true), "
            "(name=a-b_c, topicId=ptEyLR_ZT42iamob0nny3w, internal=false), "
            "(name=d, topicId=8VVh28NtSCqLTAK59Xq-UA, internal=false)]")
    assert parse_topic_listings(text) == {
        "orders.v2": ("qQR4L8AlSOCTLtFTFSHsIg", False),
        "__consumer_offsets": ("WTbtdD3MSi6now2nM19Msw", True),
        # Java's URL-safe base64 in librdkafka's standard spelling, as stored ("-" "+", "_" "/").
        "a-b_c": ("ptEyLR/ZT42iamob0nny3w", False),
        "d": ("8VVh28NtSCqLTAK59Xq+UA", False),
    }
    assert parse_topic_listings("[]") == {}


def test_a_topic_listing_printed_otherwise_is_refused_not_half_read():
    import pytest

    from adapters.kafka.java_reads import parse_topic_listings

    for text in ("[(name=a, topicId=qQR4L8AlSOCTLtFTFSHsIg, internal=false), (name=b, id=x, internal=false)]",
                 "{a=(name=a, topicId=qQR4L8AlSOCTLtFTFSHsIg, internal=false)}"):
        with pytest.raises(ValueError):
            parse_topic_listings(text)


def test_the_java_helpers_partition_counts_parse_by_the_last_space():
    from adapters.kafka.java_reads import parse_partition_counts

    assert parse_partition_counts("orders 4\n__consumer_offsets 50\na.b-c_d 1\n") == {
        "orders": 4, "__consumer_offsets": 50, "a.b-c_d": 1}
    assert parse_partition_counts("") == {}


def test_the_java_helpers_group_ids_parse_by_their_lengths_whatever_they_hold():
    from adapters.kafka.java_reads import parse_group_ids

    # Why: a group id may hold any character, colons, digits and line ends included; lengths are in characters.
    ids = {"orders", "<script>alert(1)</script>", "12:34", "a\nb", "ümlaut-😀", ":", "9"}
    text = "".join(f"{len(group_id)}:{group_id}" for group_id in sorted(ids))
    assert parse_group_ids(text) == ids
    assert parse_group_ids("") == set()


def test_group_ids_printed_otherwise_are_refused_not_half_read():
    import pytest

    from adapters.kafka.java_reads import parse_group_ids

    for text in ("6:orders7:", "x:abc", ":abc", "3abc", "6:orders3:ab"):
        with pytest.raises(ValueError):
            parse_group_ids(text)


def test_the_java_helpers_group_reads_parse_as_librdkafka_reads_groups():
    import json

    from groups.domain.snapshot import MemberSnapshot
    from adapters.kafka.client import DescribedGroup
    from adapters.kafka.java_reads import encode_group_ids, parse_group_reads

    text = json.dumps({"groups": [
        {"id": "<g>\n1", "state": "Stable", "type": "consumer", "assignor": "uniform", "members": [
            ["m2", "c2", "/127.0.0.1", [["t", 1]], [["t", 1], ["t", 2]]],
            ["m1", "c1", "/127.0.0.1", [["t", 0]], []]],
         "committed": [["t", 0, 5], ["t", 1, 0]]},
        # Why: Java's KIP-848 states that librdkafka does not know read as librdkafka reads them.
        {"id": "r", "state": "Reconciling", "type": "consumer", "assignor": "", "members": [], "committed": []},
        {"id": "e", "state": "Empty", "type": "classic", "assignor": "range", "members": [], "committed": []},
    ], "others": ["refused"]})
    read = parse_group_reads(text)
    assert read.groups == (
        DescribedGroup("<g>\n1", "Stable", "consumer", "uniform", (
            MemberSnapshot("m1", "c1", "/127.0.0.1", frozenset({("t", 0)})),
            MemberSnapshot("m2", "c2", "/127.0.0.1", frozenset({("t", 1)}), frozenset({("t", 1), ("t", 2)})))),
        DescribedGroup("r", "Unknown", "consumer", "", ()),
        DescribedGroup("e", "Empty", "classic", "range", ()),
    )
    assert read.committed == {"<g>\n1": {("t", 0): 5, ("t", 1): 0}, "r": {}, "e": {}}
    assert read.others == ("refused",)
    assert encode_group_ids(["a", "😀:1", ""]) == "1:a3:😀:10:"


def test_group_reads_printed_otherwise_are_refused_not_half_read():
    import pytest

    from adapters.kafka.java_reads import parse_group_reads

    for text in ("", "{}", '{"groups": [{"id": "g"}], "others": []}', '{"groups": [], "others": 5}', "[1]"):
        with pytest.raises(ValueError):
            parse_group_reads(text)
