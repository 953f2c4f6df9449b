"""The kind of a group, from the broker's type and the group id: each case
says why its answer is right."""

from __future__ import annotations

import pytest

from groups.domain.group_kinds import GROUP_KINDS, KIND_LABELS, group_kind

CASES = [
    # (type, group_id, kind, why)
    ("classic", "billing", "classic", "a classic group with an ordinary id is classic"),
    ("consumer", "billing", "consumer", "a KIP-848 group with an ordinary id is consumer"),
    ("share", "billing", "share", "a KIP-932 share group is share"),
    ("streams", "billing", "streams", "a KIP-1071 streams group is streams"),
    ("classic", "connect-s3-sink", "connect", "Connect names a sink connector's classic group connect-<name>"),
    ("consumer", "connect-s3-sink", "connect", "a sink connector's consumer may use the KIP-848 protocol"),
    ("classic", "connect-", "connect", "the prefix alone is a connector with an empty name: still Connect's"),
    ("share", "connect-s3-sink", "share", "Connect's sinks run plain consumers, never share consumers"),
    ("streams", "connect-s3-sink", "streams", "nor Streams applications: the type wins over the id"),
    ("classic", "connectors", "classic", "without the dash the id is not Connect's pattern"),
    ("classic", "Connect-s3-sink", "classic", "Connect writes the prefix in lower case; ids are case-sensitive"),
    ("classic", "my-connect-sink", "classic", "the prefix must start the id"),
    ("", "billing", "unknown", "an empty type: no poll has described the group yet"),
    ("", "connect-s3-sink", "unknown", "an undescribed group is not known to be a plain consumer's"),
    ("unknown", "billing", "unknown", "the Kafka client's own word for a type it could not read"),
    ("Classic", "billing", "unknown", "the adapter stores the broker's word in lower case; anything else is not it"),
    ("quantum", "billing", "unknown", "a type a later Kafka adds is not guessed at"),
]


@pytest.mark.parametrize(("type", "group_id", "kind", "why"), CASES, ids=[case[3] for case in CASES])
def test_it_names_the_kind(type, group_id, kind, why):
    assert group_kind(type, group_id) == kind


def test_it_offers_every_kind_in_a_fixed_order():
    # Filters list them in this order, and the API documents the same choices.
    assert GROUP_KINDS == ("classic", "consumer", "share", "streams", "connect", "unknown")


def test_it_labels_every_kind_with_its_kip():
    assert KIND_LABELS == {
        "classic": "classic",
        "consumer": "consumer (KIP-848)",
        "share": "share (KIP-932)",
        "streams": "streams (KIP-1071)",
        "connect": "Kafka Connect sink",
        "unknown": "not yet described",
    }
