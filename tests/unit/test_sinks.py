"""The sink names and the replay topic's default: one home, groups.domain.sinks."""

from __future__ import annotations

from groups.domain.sinks import DEFAULT_SINK, GROUP_SINKS, HANDLER, JOB_SINKS, replay_topic_for


def test_a_replay_topic_defaults_to_the_topic_dot_replay():
    assert replay_topic_for("orders") == "orders.replay"
    assert replay_topic_for("orders", "") == "orders.replay"


def test_a_configured_replay_topic_wins():
    assert replay_topic_for("orders", "orders.recovered") == "orders.recovered"


def test_a_handler_is_a_job_sink_but_never_a_group_default():
    assert HANDLER in JOB_SINKS and HANDLER not in GROUP_SINKS
    assert DEFAULT_SINK in GROUP_SINKS
    assert set(GROUP_SINKS) < set(JOB_SINKS)
