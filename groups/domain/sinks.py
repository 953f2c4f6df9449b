"""Where a backfill delivers: the one list of sink names, and the one
decision of a job's sink (``backfill_sink_for``), made when the job is
planned and kept in its params, so that nothing downstream decides again.
Services, forms, API, the executor, the command line and the Spark job's
spec read them from here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from groups.domain.planning import PlanError
from groups.domain.replay_topics import replay_topic_for, replay_topic_problem

PARQUET = "parquet"
KAFKA = "kafka"
HANDLER = "handler"
DEFAULT_SINK = PARQUET
# A group's default sink (group settings) is one of these.
GROUP_SINKS = (PARQUET, KAFKA)
# A job may also use a Python handler, one of the dotted paths an
# administrator lists in BACKFILL_HANDLERS; never a group's default.
JOB_SINKS = (*GROUP_SINKS, HANDLER)


@dataclass(frozen=True)
class BackfillSink:
    """The sink one backfill was approved with. ``replay_topic`` (kafka): the
    name chosen for the job or configured for its group then, empty for each
    source's ``<topic>.replay``; ``handler`` (handler): its dotted path. The
    job's params hold it (``as_params``); the executor reads it back
    (``from_params``), never the group's settings of the day."""

    kind: str
    replay_topic: str = ""
    handler: str = ""

    def __post_init__(self) -> None:
        if self.kind not in JOB_SINKS:
            raise PlanError(f"unknown sink {self.kind!r}: use {', '.join(JOB_SINKS[:-1])} or {JOB_SINKS[-1]}")
        if self.kind == HANDLER and not self.handler:
            raise PlanError("a handler sink needs a handler (a dotted path)")

    def replay_topics(self, sources: Collection[str]) -> dict[str, str]:
        """Source topic -> the replay topic its records go to (kafka; empty otherwise)."""
        if self.kind != KAFKA:
            return {}
        return {source: replay_topic_for(source, self.replay_topic) for source in sorted(sources)}

    def as_params(self) -> dict:
        """The job's params for this sink: the kind, and the replay topic or handler when there is one."""
        params = {"sink": self.kind}
        if self.kind == KAFKA and self.replay_topic:
            params["replay_topic"] = self.replay_topic
        if self.kind == HANDLER:
            params["handler"] = self.handler
        return params

    @classmethod
    def from_params(cls, params: Mapping) -> BackfillSink:
        kind = params.get("sink", "")
        return cls(kind, replay_topic=params.get("replay_topic", "") if kind == KAFKA else "",
                   handler=params.get("handler", "") if kind == HANDLER else "")


def backfill_sink_for(
    *, sink: str, replay_topic: str, handler: str, default_sink: str, configured_replay_topic: str,
    handlers: Collection[str], sources: Collection[str], existing_topics: Collection[str],
) -> BackfillSink:
    """Where a backfill of ``sources`` delivers, decided once, when it is planned:

    1. ``sink`` as chosen, else ``default_sink`` (the group's), else parquet;
    2. kafka: ``replay_topic`` as chosen, else ``configured_replay_topic`` (the
       group's); each source's target (that name, or ``<source>.replay``) must
       be a replay topic (``replay_topic_problem``; ``existing_topics``: the
       cluster's);
    3. handler: one of ``handlers`` (BACKFILL_HANDLERS).
    Raises PlanError saying what to change."""
    kind = sink or default_sink or DEFAULT_SINK
    if kind == HANDLER and handler not in handlers:
        allowed = ", ".join(handlers) or "none is configured"
        raise PlanError(f"Choose a handler listed in BACKFILL_HANDLERS ({allowed}).")
    if kind == KAFKA:
        chosen = BackfillSink(kind, replay_topic=replay_topic.strip() or configured_replay_topic)
    else:
        chosen = BackfillSink(kind, handler=handler if kind == HANDLER else "")
    for target in sorted(set(chosen.replay_topics(sources).values())):
        problem = replay_topic_problem(target, sources=sources, existing=existing_topics,
                                       configured=configured_replay_topic)
        if problem:
            raise PlanError(problem)
    return chosen
