from django.urls import path

from annotation.channels import views

app_name = "channels"

urlpatterns = [
    # MTurk's iframe (no cookies: a signed token travels in the form's URL)
    path("mturk/task/", views.mturk_task, name="mturk_task"),
    path("mturk/task/submit/", views.mturk_task_submit, name="mturk_task_submit"),
    path("mturk/task/heartbeat/", views.mturk_task_heartbeat, name="mturk_task_heartbeat"),
    # Link-based panels (Prolific and similar)
    path("panel/<slug:slug>/", views.panel_entry, name="panel_entry"),
    path("panel/<slug:slug>/next/", views.panel_next, name="panel_next"),
    path("panel/<slug:slug>/task/<int:lease_id>/", views.panel_task, name="panel_task"),
    path("panel/<slug:slug>/task/<int:lease_id>/heartbeat/", views.panel_heartbeat, name="panel_heartbeat"),
    path("panel/<slug:slug>/task/<int:lease_id>/skip/", views.panel_skip, name="panel_skip"),
    path("panel/<slug:slug>/done/", views.panel_done, name="panel_done"),
    # Researchers
    path("campaigns/<slug:slug>/", views.campaign_channels, name="campaign_channels"),
    path("campaigns/<slug:slug>/mturk/", views.mturk_publish, name="mturk_publish"),
    path("campaigns/<slug:slug>/panel/", views.panel_publish, name="panel_publish"),
    path("publications/<int:pk>/", views.publication_detail, name="publication_detail"),
    path("publications/<int:pk>/withdraw/", views.publication_withdraw, name="publication_withdraw"),
    path("publications/<int:pk>/bonuses/", views.publication_bonus_grant, name="publication_bonus_grant"),
]
