"""How the adapter words the client's errors: a refusal by the authorizer or
of the login says which permission or credential is missing."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from tasks.kafka.errors import describe_error


@pytest.mark.parametrize(("code", "words"), [
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, "lacks an ACL on this topic (Describe to watch it, Read to read"),
    (KafkaError.GROUP_AUTHORIZATION_FAILED, "lacks an ACL on this consumer group (Describe to watch it, Read "
                                            "to fetch or reset its offsets)"),
    (KafkaError.CLUSTER_AUTHORIZATION_FAILED, "lacks Describe on the cluster"),
    (KafkaError.SASL_AUTHENTICATION_FAILED, "refused Gapwatch's SASL login"),
])
def test_a_refused_permission_or_login_is_said_in_words(code, words):
    error = KafkaError(code, "refused")
    described = describe_error(error)
    assert described.startswith(f"{error.name()}: refused (the ") and described.endswith(")")
    assert words in described
    assert describe_error(KafkaException(error)) == describe_error(error)


def test_other_errors_keep_their_name_and_text_only():
    assert describe_error(KafkaError(KafkaError._TRANSPORT, "down")) == "_TRANSPORT: down"
    assert describe_error(ValueError("bad")) == "ValueError: bad"
