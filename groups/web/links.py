"""The address of a cluster's, a topic's and a group's page: by names, as
``groups.web.urls_browse`` routes them (templates use ``{% url %}`` with the
same names)."""

from __future__ import annotations

from django.urls import reverse

from groups.models import Cluster, ConsumerGroup, Topic


def cluster_url(cluster: Cluster) -> str:
    return reverse("browse:cluster", args=[cluster.name])


def topic_url(topic: Topic) -> str:
    return reverse("browse:topic", args=[topic.cluster.name, topic.name])


def group_url(group: ConsumerGroup) -> str:
    return reverse("browse:group", args=[group.cluster.name, group.group_id])
