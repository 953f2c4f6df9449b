"""The browse pages: topic, group, clusters, audit (included by groups.web.urls).

A topic's and a group's page is named by its cluster and its name there
(``/clusters/<cluster>/topics/<topic>/``, ``/clusters/<cluster>/groups/<group id>/``,
the names escaped by ``groups.web.converters``); the id URLs they had before
answer a permanent redirect to it. Forms that POST keep ids: they are made by
a page, never bookmarked.
"""

from django.urls import path, register_converter

from groups.web import browse as views
from groups.web import exports
from groups.web.converters import NameConverter

register_converter(NameConverter, "name")

app_name = "browse"

urlpatterns = [
    path("topics/", views.topic_list, name="topics"),
    path("groups/", views.group_list, name="groups"),
    path("clusters/<slug:cluster_name>/", views.cluster_detail, name="cluster"),
    path("clusters/<slug:cluster_name>/topics/<name:topic_name>/", views.topic_detail, name="topic"),
    path("clusters/<slug:cluster_name>/topics/<name:topic_name>/broker", views.topic_broker, name="topic_broker"),
    path("clusters/<slug:cluster_name>/groups/<name:group_id>/", views.group_detail, name="group"),
    path("topics/<int:topic_id>/", views.topic_by_id, name="topic_by_id"),
    path("topics/<int:topic_id>/broker", views.topic_broker_by_id, name="topic_broker_by_id"),
    path("groups/<int:group_pk>/", views.group_by_id, name="group_by_id"),
    path("groups/<int:group_pk>/settings", views.group_settings, name="group_settings"),
    path("clusters/", views.cluster_list, name="clusters"),
    path("clusters/add", views.cluster_add, name="cluster_add"),
    path("clusters/<int:pk>/edit", views.cluster_edit, name="cluster_edit"),
    path("clusters/<int:pk>/toggle", views.cluster_toggle, name="cluster_toggle"),
    path("clusters/<int:pk>/test", views.cluster_test, name="cluster_test"),
    path("audit/", views.audit_list, name="audit"),
    path("audit/export.csv", exports.audit_export, name="audit_export"),
]
