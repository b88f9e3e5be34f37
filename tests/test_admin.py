"""The Django admin: every model of Chorus's apps is there, and what the engines write is read-only."""
import pytest
from django.apps import apps
from django.contrib import admin
from django.test import RequestFactory

from annotation.admin import ReadOnlyAdmin

EDITABLE = {"annotation.prompt", "annotation.worker"}  # a typo in a prompt, a worker's account link


def _models():
    return [m for app in ("annotation", "channels", "audits") for m in apps.get_app_config(app).get_models()]


def test_every_model_of_chorus_is_in_the_admin():
    missing = [m._meta.label for m in _models() if m not in admin.site._registry]
    assert missing == []


@pytest.mark.parametrize("model", _models(), ids=lambda m: m._meta.label_lower)
def test_engine_rows_are_read_only_even_for_superusers(model, admin_user):
    model_admin = admin.site._registry[model]
    request = RequestFactory().get("/")
    request.user = admin_user
    if model._meta.label_lower in EDITABLE:
        assert not isinstance(model_admin, ReadOnlyAdmin)
        return
    assert isinstance(model_admin, ReadOnlyAdmin)
    assert model_admin.has_add_permission(request) is False
    assert model_admin.has_change_permission(request) is False
    assert model_admin.has_delete_permission(request) is False

