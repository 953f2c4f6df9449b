"""How the adapter words the client's errors: a refusal by the authorizer or
of the login says which permission or credential is missing."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from adapters.kafka.errors import describe_error


@pytest.mark.parametrize(("code", "words"), [
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, "(the principal Gapwatch connects as lacks an ACL on a topic "
                                            "(Describe to watch it, Read to reset offsets on it"),
    (KafkaError.GROUP_AUTHORIZATION_FAILED, "(the principal Gapwatch connects as lacks an ACL on this consumer "
                                            "group (Describe to watch it, Read to reset its offsets))"),
    (KafkaError.CLUSTER_AUTHORIZATION_FAILED, "(missing ACL: Describe on the cluster for the principal"),
    (KafkaError.SASL_AUTHENTICATION_FAILED, "(the cluster refused Gapwatch's SASL login"),
    (KafkaError._AUTHENTICATION, "(authentication failed: the cluster or the OAuth token endpoint refused"),
])
def test_a_refused_permission_or_login_is_said_in_words(code, words):
    error = KafkaError(code, "refused")
    described = describe_error(error)
    assert described.startswith(f"{error.name()}: refused (") and described.endswith(")")
    assert words in described
    assert describe_error(KafkaException(error)) == describe_error(error)


@pytest.mark.parametrize(("code", "request_names", "words"), [
    # Why: the caller knows what its request needed; the ACL is named, not guessed.
    (KafkaError.GROUP_AUTHORIZATION_FAILED, {"operation": "Read", "group": "g<1>", "topic": "t"},
     "missing ACL: Read on group 'g<1>'"),
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, {"operation": "Read", "group": "g", "topic": "orders"},
     "missing ACL: Read on topic 'orders'"),
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, {"topic": "orders"}, "missing ACL: Describe on topic 'orders'"),
    # Why: an expansion's plan asks CreatePartitions (validate_only), which needs Alter on the topic.
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, {"operation": "Alter", "topic": "orders"},
     "missing ACL: Alter on topic 'orders'"),
    # Why: a group refusal on a request that names only a topic cannot name the group: the generic words.
    (KafkaError.GROUP_AUTHORIZATION_FAILED, {"topic": "orders"}, "lacks an ACL on this consumer group"),
])
def test_a_refusal_names_the_missing_acl_when_the_request_says_what_it_needed(code, request_names, words):
    assert words in describe_error(KafkaError(code, "refused"), **request_names)


def test_other_errors_keep_their_name_and_text_only():
    assert describe_error(KafkaError(KafkaError._TRANSPORT, "down")) == "_TRANSPORT: down"
    assert describe_error(KafkaError(KafkaError._TRANSPORT, "down"), topic="t") == "_TRANSPORT: down"
    assert describe_error(ValueError("bad")) == "ValueError: bad"
