"""Clusters, and their topics and groups, by id or by name: the rows a task,
a management command or a page starts from."""

from __future__ import annotations

from django.db.models import QuerySet

from groups.models import Cluster, ConsumerGroup, Topic


def cluster_get(*, cluster_id: int) -> Cluster:
    """The cluster (Cluster.DoesNotExist when it is gone)."""
    return Cluster.objects.get(id=cluster_id)


def cluster_find(*, cluster_id: int) -> Cluster | None:
    """The cluster, or None when it is gone (a task queued before it was deleted)."""
    return Cluster.objects.filter(id=cluster_id).first()


def cluster_named(*, name: str) -> Cluster | None:
    return Cluster.objects.filter(name=name).first()


def cluster_ids_enabled() -> list[int]:
    return list(Cluster.objects.filter(enabled=True).values_list("id", flat=True))


def cluster_to_warm_up_with(*, name: str = "") -> Cluster | None:
    """The cluster named, or else the first enabled one by name: where the
    Spark server's warm-up reads (``manage.py warm_spark_connect``)."""
    if name:
        return cluster_named(name=name)
    return Cluster.objects.filter(enabled=True).order_by("name").first()


def clusters_for_health() -> QuerySet[Cluster]:
    """The enabled clusters by name (``/healthz``)."""
    return Cluster.objects.filter(enabled=True).order_by("name")


def cluster_choices() -> QuerySet[Cluster]:
    """Every cluster by name, as a form's choices."""
    return Cluster.objects.only("id", "name").order_by("name")


def topic_named(*, cluster: Cluster, name: str) -> Topic | None:
    """The live topic of that name (a deleted one is not found)."""
    return Topic.objects.filter(cluster=cluster, name=name, deleted=False).first()


def topic_names(*, cluster: Cluster) -> list[str]:
    """Every live topic's name."""
    return list(Topic.objects.filter(cluster=cluster, deleted=False).values_list("name", flat=True))


def topic_with_cluster(*, topic_id: int) -> Topic:
    """The live topic with its cluster (Topic.DoesNotExist when it is gone or deleted)."""
    return Topic.objects.select_related("cluster").get(pk=topic_id, deleted=False)


def group_named(*, cluster: Cluster, group_id: str) -> ConsumerGroup | None:
    return ConsumerGroup.objects.filter(cluster=cluster, group_id=group_id).first()
