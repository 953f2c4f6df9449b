"""Which replay topics a backfill may write to, each case with why."""

from __future__ import annotations

import pytest

from groups.domain.replay_topics import replay_topic_problem

EXISTING = {"orders", "orders.replay", "payments", "__consumer_offsets", "billing.replay-in"}


@pytest.mark.parametrize(
    ("target", "configured", "message"),
    [
        (".", "", "not . or .."),  # Kafka refuses these names
        ("..", "", "not . or .."),
        ("a b", "", "letters, digits"),
        ("x" * 250, "", "letters, digits"),
        ("__consumer_offsets", "", "internal topic"),  # the group coordinator's own log
        ("__new_internal", "", "internal topic"),
        ("orders", "", "must not be the topic the records come from"),
        ("payments", "", "already exists and is not a replay topic"),  # another application's topic
        ("billing.replay-in", "", "already exists"),
    ],
)
def test_it_refuses(target, configured, message):
    assert message in replay_topic_problem(target, sources={"orders"}, existing=EXISTING, configured=configured)


@pytest.mark.parametrize(
    ("target", "configured"),
    [
        ("orders.replay", ""),  # the source's default replay topic, existing already
        ("orders.recovered", ""),  # a new topic: created for the replay
        ("billing.replay-in", "billing.replay-in"),  # the group's configured replay topic
    ],
)
def test_it_accepts(target, configured):
    assert replay_topic_problem(target, sources={"orders"}, existing=EXISTING, configured=configured) is None
