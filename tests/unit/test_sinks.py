"""The sink names, the replay topic's default and the one decision of a
job's sink: groups.domain.sinks and groups.domain.replay_topics, each case
with why."""

from __future__ import annotations

import pytest

from groups.domain.planning import PlanError
from groups.domain.replay_topics import replay_topic_for
from groups.domain.sinks import DEFAULT_SINK, GROUP_SINKS, HANDLER, JOB_SINKS, BackfillSink, backfill_sink_for


def test_a_replay_topic_defaults_to_the_topic_dot_replay():
    assert replay_topic_for("orders") == "orders.replay"
    assert replay_topic_for("orders", "") == "orders.replay"


def test_a_configured_replay_topic_wins():
    assert replay_topic_for("orders", "orders.recovered") == "orders.recovered"


def test_a_handler_is_a_job_sink_but_never_a_group_default():
    assert HANDLER in JOB_SINKS and HANDLER not in GROUP_SINKS
    assert DEFAULT_SINK in GROUP_SINKS
    assert set(GROUP_SINKS) < set(JOB_SINKS)


def decided(**chosen) -> BackfillSink:
    values = {"sink": "", "replay_topic": "", "handler": "", "default_sink": "parquet", "configured_replay_topic": "",
              "handlers": ("pkg.handle",), "sources": ["orders"], "existing_topics": {"orders", "payments"}}
    return backfill_sink_for(**{**values, **chosen})


@pytest.mark.parametrize(("chosen", "params", "replay_topics", "why"), [
    ({}, {"sink": "parquet"}, {}, "nothing chosen: the group's default sink"),
    ({"default_sink": ""}, {"sink": "parquet"}, {}, "no group default either (the command line): parquet"),
    ({"default_sink": "kafka"}, {"sink": "kafka"}, {"orders": "orders.replay"},
     "the group's kafka default without a replay topic: <topic>.replay, and the params say no more"),
    ({"default_sink": "kafka", "configured_replay_topic": "orders.group"},
     {"sink": "kafka", "replay_topic": "orders.group"}, {"orders": "orders.group"},
     "the group's replay topic is recorded, so a later change of the group's does not move the job"),
    ({"sink": "kafka", "replay_topic": " orders.mine ", "configured_replay_topic": "orders.group"},
     {"sink": "kafka", "replay_topic": "orders.mine"}, {"orders": "orders.mine"}, "the job's own choice wins, trimmed"),
    ({"sink": "kafka", "configured_replay_topic": "payments"}, {"sink": "kafka", "replay_topic": "payments"},
     {"orders": "payments"}, "an existing topic is fine when it is the configured one"),
    ({"sink": "handler", "handler": "pkg.handle"}, {"sink": "handler", "handler": "pkg.handle"}, {},
     "a listed handler"),
    ({"sink": "parquet", "replay_topic": "orders.mine", "handler": "pkg.handle"}, {"sink": "parquet"}, {},
     "what another sink would use is not recorded"),
])
def test_it_decides_the_sink_once_and_the_params_keep_the_decision(chosen, params, replay_topics, why):
    sink = decided(**chosen)
    assert (sink.as_params(), sink.replay_topics(["orders"])) == (params, replay_topics), why
    assert BackfillSink.from_params(sink.as_params()) == sink, "the executor reads back what was approved"


@pytest.mark.parametrize(("chosen", "message", "why"), [
    ({"sink": "s3"}, "unknown sink 's3': use parquet, kafka or handler", "not a sink name"),
    ({"sink": "handler", "handler": "os.system"}, "Choose a handler listed in BACKFILL_HANDLERS (pkg.handle).",
     "only what an administrator listed runs in Spark's workers"),
    ({"sink": "handler", "handler": "os.system", "handlers": ("pkg.a", "pkg.b")},
     "Choose a handler listed in BACKFILL_HANDLERS (pkg.a, pkg.b).", "every listed handler is offered"),
    ({"sink": "handler", "handler": "pkg.handle", "handlers": ()},
     "Choose a handler listed in BACKFILL_HANDLERS (none is configured).", "no handler is listed at all"),
    ({"sink": "kafka", "replay_topic": "orders"}, "The replay topic must not be the topic the records come from.",
     "replaying into the source would deliver every record twice to its consumers"),
    ({"sink": "kafka", "replay_topic": "payments"},
     "payments already exists and is not a replay topic of this group: choose a new name, or set it as the group's "
     "replay topic first.", "another application's topic"),
])
def test_it_refuses_a_sink_that_cannot_be(chosen, message, why):
    with pytest.raises(PlanError) as refused:
        decided(**chosen)
    assert str(refused.value) == message, why


@pytest.mark.parametrize(("params", "message", "why"), [
    ({}, "unknown sink '': use parquet, kafka or handler", "a job row records its sink"),
    ({"sink": "handler"}, "a handler sink needs a handler (a dotted path)", "nothing to call"),
])
def test_a_job_row_without_a_whole_sink_is_refused_not_completed_from_the_group(params, message, why):
    with pytest.raises(PlanError) as refused:
        BackfillSink.from_params(params)
    assert str(refused.value) == message, why


def test_a_job_row_keeps_only_what_its_sink_uses():
    # A row's params may carry a replay topic or a handler left from an edit: a parquet job ignores them.
    params = {"sink": "parquet", "replay_topic": "orders.mine", "handler": "pkg.handle"}
    assert BackfillSink.from_params(params) == BackfillSink("parquet")
