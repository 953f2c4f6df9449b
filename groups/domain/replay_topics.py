"""The replay topic of a backfill: its default name, and which topics may be
one. Records written there reach every consumer of that topic, so it must be
a replay topic meant for it: a new name, the source's default
``<topic>.replay``, or the group's configured one, never an internal topic, a
name Kafka refuses, or another application's topic."""

from __future__ import annotations

import re
from collections.abc import Collection

# Kafka's own rule for topic names (length and characters); "." and ".." are refused on top.
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
REPLAY_SUFFIX = ".replay"


def replay_topic_for(topic: str, configured: str = "") -> str:
    """The replay topic chosen for the job or the group if any, else ``<topic>.replay``."""
    return configured or f"{topic}{REPLAY_SUFFIX}"


def replay_topic_problem(
    target: str, *, sources: Collection[str], existing: Collection[str], configured: str
) -> str | None:
    """Why ``target`` may not receive replayed records of ``sources``, or None.

    ``existing``: topics the cluster has; ``configured``: the group's own
    replay topic (empty when none)."""
    if not TOPIC_NAME.match(target) or target in (".", ".."):
        return "A replay topic name has 1–249 letters, digits, dots, underscores or dashes (not . or ..)."
    if target.startswith("__"):
        return f"{target} is an internal topic name: Kafka's own topics are never a replay target."
    if target in sources:
        return "The replay topic must not be the topic the records come from."
    defaults = {replay_topic_for(source) for source in sources}
    if target in existing and target not in defaults and target != configured:
        return (f"{target} already exists and is not a replay topic of this group: choose a new name, "
                "or set it as the group's replay topic first.")
    return None
