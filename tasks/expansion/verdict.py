"""The broker's verdict for an expansion's plan (issue 33, item 1): a worker
asks CreatePartitions with validate_only, with the cluster's stored
credentials, for the page, the API or the command that shows the plan
(``groups.services.expansion.plan``). Nothing on the cluster changes."""

from __future__ import annotations

from dataclasses import asdict

from celery import shared_task

from groups.domain.expansion.plan import BrokerVerdict
from groups.models import Cluster
from groups.selectors.clusters import cluster_find
from tasks.cluster_client import ClusterUnreachable, cluster_client


def partitions_verdict(*, cluster: Cluster | None, topic: str, count: int) -> BrokerVerdict:
    """The broker's verdict on ``count`` partitions for ``topic``; a cluster
    that is gone or does not answer is a verdict not asked, saying why."""
    try:
        with cluster_client(cluster) as adapter:
            return adapter.validate_partitions(topic, count)
    except ClusterUnreachable as error:
        return BrokerVerdict(accepted=False, asked=False, reason=f"the broker could not be asked: {error}")


@shared_task(name="gapwatch.validate_partitions")
def validate_partitions(cluster_id: int, topic: str, count: int) -> dict:
    """``{"accepted", "reason", "asked"}``: the broker's verdict, as plain data for the result backend."""
    return asdict(partitions_verdict(cluster=cluster_find(cluster_id=cluster_id), topic=topic,
                                     count=count))
