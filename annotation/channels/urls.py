from django.urls import path

from annotation.channels.views import mturk, panel, prolific, prolific_hooks, researcher

app_name = "channels"

urlpatterns = [
    # MTurk's iframe (no cookies: a signed token travels in the form's URL)
    path("mturk/task/", mturk.mturk_task, name="mturk_task"),
    path("mturk/task/submit/", mturk.mturk_task_submit, name="mturk_task_submit"),
    path("mturk/task/heartbeat/", mturk.mturk_task_heartbeat, name="mturk_task_heartbeat"),
    # Link-based panels (Prolific and similar)
    path("panel/<slug:slug>/", panel.panel_entry, name="panel_entry"),
    path("panel/<slug:slug>/next/", panel.panel_next, name="panel_next"),
    path("panel/<slug:slug>/task/<int:lease_id>/", panel.panel_task, name="panel_task"),
    path("panel/<slug:slug>/task/<int:lease_id>/heartbeat/", panel.panel_heartbeat, name="panel_heartbeat"),
    path("panel/<slug:slug>/task/<int:lease_id>/skip/", panel.panel_skip, name="panel_skip"),
    path("panel/<slug:slug>/done/", panel.panel_done, name="panel_done"),
    # Prolific's hook deliveries
    path("prolific/hooks/<int:account_id>/", prolific_hooks.prolific_hook, name="prolific_hook"),
    # Researchers
    path("campaigns/<slug:slug>/", researcher.campaign_channels, name="campaign_channels"),
    path("campaigns/<slug:slug>/mturk/", researcher.mturk_publish, name="mturk_publish"),
    path("campaigns/<slug:slug>/panel/", researcher.panel_publish, name="panel_publish"),
    path("campaigns/<slug:slug>/prolific/", prolific.prolific_publish, name="prolific_publish"),
    path("campaigns/<slug:slug>/prolific/token/", prolific.prolific_token, name="prolific_token"),
    path("publications/<int:pk>/publish/", prolific.prolific_publication_publish, name="prolific_publication_publish"),
    path(
        "publications/<int:pk>/submissions/<str:submission_id>/review/",
        prolific.prolific_submission_review,
        name="prolific_submission_review",
    ),
    path("publications/<int:pk>/prolific-bonuses/", prolific.prolific_bonus, name="prolific_bonus"),
    path("publications/<int:pk>/prolific-bonuses/many/", prolific.prolific_bonus_many, name="prolific_bonus_many"),
    path("publications/<int:pk>/", researcher.publication_detail, name="publication_detail"),
    path("publications/<int:pk>/try/", researcher.panel_try, name="panel_try"),
    path("publications/<int:pk>/withdraw/", researcher.publication_withdraw, name="publication_withdraw"),
    path("publications/<int:pk>/bonuses/", researcher.publication_bonus_grant, name="publication_bonus_grant"),
]
