"""What the topic page shows of the topic on the broker now: read on demand
by a worker (``gapwatch.describe_topic_state``) within a short wait, never
stored; a broker, queue or worker that does not answer is a sentence on the
page, never an error page."""

from __future__ import annotations

import re

from groups.models import Topic
from groups.services.dispatch import DESCRIBE_TOPIC_STATE, QueueUnavailable, TaskTimedOut, task_answer

# How long the page waits for the worker (its Kafka requests time out on their own).
TOPIC_STATE_WAIT_SECONDS = 10.0
# Topic configs hold no secrets, but a value whose name looks like one is never shown.
_SECRET_LOOKING = re.compile(r"password|secret|token|jaas|credential|\.key$", re.IGNORECASE)
# Where a config's value comes from, in the broker's words (DescribeConfigs' ConfigSource) and ours.
SOURCE_WORDS = {
    "DYNAMIC_TOPIC_CONFIG": "set on the topic",
    "DYNAMIC_BROKER_CONFIG": "set on its broker",
    "DYNAMIC_DEFAULT_BROKER_CONFIG": "set for every broker",
    "STATIC_BROKER_CONFIG": "the broker's configuration file",
    "DEFAULT_CONFIG": "default",
}


def topic_broker_state(*, topic: Topic) -> dict:
    """``{"partitions", "configs", "error"}``: the partitions by id, each
    with ``size`` (bytes summed over the replicas the broker reported, None
    if none); the configs set on the topic or its broker first, then the
    defaults, each by name; ``error`` why nothing could be read ("" when read)."""
    try:
        answer = task_answer(name=DESCRIBE_TOPIC_STATE, args=(topic.cluster_id, topic.name),
                             timeout=TOPIC_STATE_WAIT_SECONDS)
    except (QueueUnavailable, TaskTimedOut) as error:
        return {"partitions": [], "configs": [], "error": str(error)}
    if "error" in answer:
        return {"partitions": [], "configs": [], "error": answer["error"]}
    partitions = [{**p, "size": sum(size for _, size in p["sizes"]) if p["sizes"] else None}
                  for p in answer["partitions"]]
    configs = sorted(
        ({**c, "value": None if c["sensitive"] or _SECRET_LOOKING.search(c["name"]) else c["value"],
          "hidden": bool(c["sensitive"] or _SECRET_LOOKING.search(c["name"])),
          "source_words": SOURCE_WORDS.get(c["source"], c["source"].lower().replace("_", " "))}
         for c in answer["configs"]),
        key=lambda c: (c["is_default"], c["name"]))
    return {"partitions": partitions, "configs": configs, "error": ""}
