"""The JSON API, mounted at /api/v1/ by controlplane/urls.py."""

from django.urls import path

from groups import api

app_name = "api"

urlpatterns = [
    path("findings", api.findings, name="findings"),
    path("clusters", api.clusters, name="clusters"),
    path("topics", api.topics, name="topics"),
    path("groups", api.groups, name="groups"),
    path("schema", api.schema, name="schema"),
]
