"""Where a backfill delivers: the one list of sink names and the one rule for
a replay topic's default name. Services, forms, API, the runner, the command
line and the Spark job's spec all read them from here.
"""

from __future__ import annotations

PARQUET = "parquet"
KAFKA = "kafka"
HANDLER = "handler"
DEFAULT_SINK = PARQUET
# A group's default sink (group settings) is one of these.
GROUP_SINKS = (PARQUET, KAFKA)
# A job may also use a Python handler, one of the dotted paths an
# administrator lists in BACKFILL_HANDLERS; never a group's default.
JOB_SINKS = (*GROUP_SINKS, HANDLER)
REPLAY_SUFFIX = ".replay"


def replay_topic_for(topic: str, configured: str = "") -> str:
    """The replay topic chosen for the job or the group if any, else ``<topic>.replay``."""
    return configured or f"{topic}{REPLAY_SUFFIX}"
