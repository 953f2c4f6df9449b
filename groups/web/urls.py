from django.urls import include, path

from groups.web import exports, views

urlpatterns = [
    path("", views.home, name="home"),
    path("findings/table", views.findings_table, name="findings_table"),
    path("findings/triage", views.findings_triage_fragment, name="findings_triage"),
    path("findings/<int:finding_id>/", views.finding_detail, name="finding_detail"),
    path("findings/<int:finding_id>/live", views.finding_live, name="finding_live"),
    path("findings/<int:finding_id>/records", views.finding_records, name="finding_records"),
    path("findings/reset", views.preview_reset, name="preview_reset"),
    path("findings/reset/approve", views.approve_reset, name="approve_reset"),
    path("findings/backfill", views.preview_backfill, name="preview_backfill"),
    path("findings/backfill/approve", views.approve_backfill, name="approve_backfill"),
    path("findings/dismiss", views.dismiss_many_form, name="dismiss_many_form"),
    path("findings/dismiss/confirm", views.dismiss_many, name="dismiss_many"),
    path("findings/approve", views.approve_many_form, name="approve_many_form"),
    path("findings/approve/confirm", views.approve_many, name="approve_many"),
    path("findings/export.csv", exports.findings_export_csv, name="findings_export_csv"),
    path("findings/export.json", exports.findings_export_json, name="findings_export_json"),
    path("findings/<int:finding_id>/dismiss", views.dismiss_form, name="dismiss_form"),
    path("findings/<int:finding_id>/dismiss/confirm", views.dismiss, name="dismiss"),
    path("jobs/", views.jobs, name="jobs"),
    path("jobs/live", views.jobs_live, name="jobs_live"),
    path("jobs/<int:job_id>/", views.job_detail, name="job_detail"),
    path("jobs/<int:job_id>/live", views.job_live, name="job_live"),
    path("freshness", views.freshness, name="freshness"),
    path("jobs/<int:job_id>/cancel", views.job_cancel, name="job_cancel"),
    path("jobs/<int:job_id>/retry", views.job_retry, name="job_retry"),
    path("jobs/<int:job_id>/approve", views.job_approve, name="job_approve"),
    path("jobs/<int:job_id>/export.csv", exports.job_export_csv, name="job_export_csv"),
    path("", include("groups.web.urls_browse")),
]
