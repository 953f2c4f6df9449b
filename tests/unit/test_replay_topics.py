"""Which replay topics a backfill may write to, each case with why."""

from __future__ import annotations

import pytest

from groups.domain.replay_topics import replay_topic_problem

EXISTING = {"orders", "orders.replay", "payments", "__consumer_offsets", "billing.replay-in"}


BAD_NAME = "A replay topic name has 1–249 letters, digits, dots, underscores or dashes (not . or ..)."
SOURCE = "The replay topic must not be the topic the records come from."


def taken(name: str) -> str:
    return (f"{name} already exists and is not a replay topic of this group: choose a new name, "
            "or set it as the group's replay topic first.")


@pytest.mark.parametrize(
    ("target", "configured", "message"),
    [
        (".", "", BAD_NAME),  # Kafka refuses these names
        ("..", "", BAD_NAME),
        ("a b", "", BAD_NAME),
        ("x" * 250, "", BAD_NAME),
        ("__consumer_offsets", "", "__consumer_offsets is an internal topic name: Kafka's own topics are never a "
                                   "replay target."),  # the group coordinator's own log
        ("__new_internal", "", "__new_internal is an internal topic name: Kafka's own topics are never a "
                               "replay target."),
        ("orders", "", SOURCE),
        ("payments", "", taken("payments")),  # another application's topic
        ("billing.replay-in", "", taken("billing.replay-in")),
    ],
)
def test_it_refuses(target, configured, message):
    assert replay_topic_problem(target, sources={"orders"}, existing=EXISTING, configured=configured) == message


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
