"""gapwatch-guard: start partitions added to a topic at their beginning.

    from gapwatch_guard import PartitionGuard

    guard = PartitionGuard(redis_url="redis://redis:6379/0", cluster="prod", group_id="billing",
                           kafka_config=config)  # the consumer's own settings
    consumer.subscribe(["orders"], on_assign=guard.on_assign)

See README.md for the rule, the Redis keys and the failure behaviour.
"""

from gapwatch_guard.guard import GuardError, GuardUnavailableError, PartitionGuard
from gapwatch_guard.keys import guard_starts_key, known_partitions_key
from gapwatch_guard.plan import TopicAssignment, TopicPlan, plan_topic

__version__ = "0.1.0"

__all__ = [
    "GuardError",
    "GuardUnavailableError",
    "PartitionGuard",
    "TopicAssignment",
    "TopicPlan",
    "guard_starts_key",
    "known_partitions_key",
    "plan_topic",
]
