"""The JSON API, mounted at /api/v1/ by controlplane/urls.py."""

from django.urls import path

from groups.api import read as api
from groups.api import write as api_write

app_name = "api"

urlpatterns = [
    path("findings", api.findings, name="findings"),
    path("clusters", api.clusters, name="clusters"),
    path("topics", api.topics, name="topics"),
    path("groups", api.groups, name="groups"),
    path("schema", api.schema, name="schema"),
    path("jobs", api_write.jobs, name="jobs"),
    path("findings/<int:finding_id>/approve", api_write.approve, name="finding_approve"),
    path("findings/<int:finding_id>/dismiss", api_write.dismiss, name="finding_dismiss"),
]
