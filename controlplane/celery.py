"""The Celery application. Configured from Django settings (``CELERY_*``)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("gapwatch")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Task modules live in the `tasks` package, not in per-app tasks.py files;
# tasks.celery_tasks imports every one of them.
app.autodiscover_tasks(["tasks"], related_name="celery_tasks")
