"""The live audit's REST API, version 1: a campaign's audit and its systems.

Routed from ``config/urls.py`` under ``/api/`` beside annotation's API (``annotation/api/urls.py``), in
the same URL namespace ``api``: a client sees one API, and ``reverse("api:audit", ...)`` names these
routes as it always did. Paths and names are a public contract.
"""

from django.urls import path

from audits.api import audit, systems

campaign = "v1/campaigns/<slug:slug>"

urlpatterns = [
    path(f"{campaign}/audit/", audit.AuditApi.as_view(), name="audit"),
    path(f"{campaign}/audit/snapshots/", audit.AuditSnapshotListApi.as_view(), name="audit-snapshots"),
    *(
        path(f"{campaign}/audit/report.{fmt}", audit.AuditReportApi.as_view(fmt=fmt), name=f"audit-report-{fmt}")
        for fmt in audit.AuditReportApi.MEDIA_TYPES
    ),
    path(f"{campaign}/audit/recompute/", audit.AuditRecomputeApi.as_view(), name="audit-recompute"),
    # Before the system pattern, which "leaderboard" would match too.
    path(f"{campaign}/systems/leaderboard/", systems.SystemLeaderboardApi.as_view(), name="systems-leaderboard"),
    path(f"{campaign}/systems/", systems.SystemListApi.as_view(), name="systems"),
    path(f"{campaign}/systems/<str:name>/", systems.SystemDetailApi.as_view(), name="system"),
]
