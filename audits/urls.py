from django.urls import path

from audits.views import dashboard as views

urlpatterns = [
    # Before the campaign pattern, which "guide" would match too.
    path("guide/", views.guide, name="audit_guide"),
    path("<slug:slug>/", views.dashboard, name="audit_dashboard"),
    path("<slug:slug>/data.json", views.dashboard_data, name="audit_dashboard_data"),
    path("<slug:slug>/report.<str:fmt>", views.report_download, name="audit_report"),
    path("<slug:slug>/recompute/", views.recompute, name="audit_recompute"),
    path("<slug:slug>/ground-truths/", views.ground_truths_request, name="audit_ground_truths"),
]
