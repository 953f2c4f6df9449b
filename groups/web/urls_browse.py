"""The browse pages: topic, group, clusters, audit (included by groups.web.urls)."""

from django.urls import path

from groups.web import browse as views
from groups.web import exports

app_name = "browse"

urlpatterns = [
    path("topics/", views.topic_list, name="topics"),
    path("groups/", views.group_list, name="groups"),
    path("topics/<int:topic_id>/", views.topic_detail, name="topic"),
    path("topics/<int:topic_id>/broker", views.topic_broker, name="topic_broker"),
    path("groups/<int:group_pk>/", views.group_detail, name="group"),
    path("groups/<int:group_pk>/settings", views.group_settings, name="group_settings"),
    path("clusters/", views.cluster_list, name="clusters"),
    path("clusters/add", views.cluster_add, name="cluster_add"),
    path("clusters/<int:pk>/edit", views.cluster_edit, name="cluster_edit"),
    path("clusters/<int:pk>/toggle", views.cluster_toggle, name="cluster_toggle"),
    path("clusters/<int:pk>/test", views.cluster_test, name="cluster_test"),
    path("audit/", views.audit_list, name="audit"),
    path("audit/export.csv", exports.audit_export, name="audit_export"),
]
