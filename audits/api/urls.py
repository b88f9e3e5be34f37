"""The live audit's REST API, version 1: a campaign's audit and its systems.

Routed from ``config/urls.py`` under ``/api/`` beside annotation's API (``annotation/api/urls.py``), in
the same URL namespace ``api``: a client sees one API, and ``reverse("api:audit", ...)`` names these
routes as it always did. Paths and names are a public contract.
"""

from django.urls import path

from audits.api import audit, card, clustering, runs, studies, systems
from audits.views.card import EXPORT_FORMATS

campaign = "v1/campaigns/<slug:slug>"

urlpatterns = [
    path(f"{campaign}/audit/", audit.AuditApi.as_view(), name="audit"),
    path(f"{campaign}/audit/snapshots/", audit.AuditSnapshotListApi.as_view(), name="audit-snapshots"),
    *(
        path(f"{campaign}/audit/report.{fmt}", audit.AuditReportApi.as_view(fmt=fmt), name=f"audit-report-{fmt}")
        for fmt in audit.AuditReportApi.MEDIA_TYPES
    ),
    path(f"{campaign}/audit/agreement/", audit.AgreementApi.as_view(), name="audit-agreement"),
    path(f"{campaign}/audit/agreement.csv", audit.AgreementCsvApi.as_view(), name="audit-agreement-csv"),
    path(f"{campaign}/audit/recompute/", audit.AuditRecomputeApi.as_view(), name="audit-recompute"),
    path(f"{campaign}/audit/ground-truths/", runs.GroundTruthRunStartApi.as_view(), name="ground-truths"),
    path(f"{campaign}/audit/ground-truths/<int:run_id>/", runs.GroundTruthRunApi.as_view(), name="ground-truth-run"),
    path(
        f"{campaign}/audit/ground-truths/<int:run_id>/result/",
        runs.GroundTruthResultApi.as_view(),
        name="ground-truth-result",
    ),
    path(f"{campaign}/audit/groups/", studies.GroupsApi.as_view(), name="audit-groups"),
    path(f"{campaign}/audit/figures/", studies.FiguresApi.as_view(), name="audit-figures"),
    path(f"{campaign}/card/", card.CardApi.as_view(), name="card"),
    *(
        path(f"{campaign}/card.{fmt}", card.CardExportApi.as_view(fmt=fmt), name=f"card-{fmt}")
        for fmt in EXPORT_FORMATS
    ),
    path(f"{campaign}/card/bootstrap/", runs.BootstrapRunStartApi.as_view(), name="bootstrap"),
    path(f"{campaign}/card/bootstrap/<int:run_id>/", runs.BootstrapRunApi.as_view(), name="bootstrap-run"),
    path(f"{campaign}/card/bootstrap/<int:run_id>/result/", runs.BootstrapResultApi.as_view(), name="bootstrap-result"),
    path("v1/compare/", studies.CompareApi.as_view(), name="compare"),
    path("v1/compare.csv", studies.CompareCsvApi.as_view(), name="compare-csv"),
    path(f"{campaign}/answers.jsonl", clustering.AnswersExportApi.as_view(), name="answers-export"),
    path(f"{campaign}/answers/", clustering.AnswersOverviewApi.as_view(), name="answers"),
    path(
        f"{campaign}/answers/<str:external_id>/clusterings/",
        clustering.ClusteringListApi.as_view(),
        name="clusterings",
    ),
    path(
        f"{campaign}/answers/<str:external_id>/clusterings/adjudicate/",
        clustering.ClusteringAdjudicateApi.as_view(),
        name="clustering-adjudicate",
    ),
    path(
        f"{campaign}/answers/<str:external_id>/clusterings/<int:clustering_id>/revert/",
        clustering.ClusteringRevertApi.as_view(),
        name="clustering-revert",
    ),
    path(
        f"{campaign}/answers/<str:external_id>/propose/",
        clustering.ClusteringProposeApi.as_view(),
        name="answer-propose",
    ),
    # Before the system pattern, which "leaderboard" would match too.
    path(f"{campaign}/systems/leaderboard/", systems.SystemLeaderboardApi.as_view(), name="systems-leaderboard"),
    path(f"{campaign}/systems/", systems.SystemListApi.as_view(), name="systems"),
    path(f"{campaign}/systems/<str:name>/", systems.SystemDetailApi.as_view(), name="system"),
]
