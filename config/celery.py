"""The Celery app. The broker comes from settings (CELERY_BROKER_URL); see README "Configuration"."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("chorus")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
