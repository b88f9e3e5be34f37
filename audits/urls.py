from django.urls import path

from audits.views import card, clustering, compare, dashboard, figures, systems

urlpatterns = [
    # Before the campaign pattern, which "guide" and "compare" would match too.
    path("guide/", dashboard.guide, name="audit_guide"),
    path("compare/", compare.compare, name="audit_compare"),
    path("<slug:slug>/", dashboard.dashboard, name="audit_dashboard"),
    path("<slug:slug>/data.json", dashboard.dashboard_data, name="audit_dashboard_data"),
    path("<slug:slug>/report.<str:fmt>", dashboard.report_download, name="audit_report"),
    path("<slug:slug>/agreement.csv", dashboard.agreement_csv, name="audit_agreement_csv"),
    path("<slug:slug>/recompute/", dashboard.recompute, name="audit_recompute"),
    path("<slug:slug>/ground-truths/", dashboard.ground_truths_request, name="audit_ground_truths"),
    path("<slug:slug>/card/", card.card, name="audit_card"),
    path("<slug:slug>/card.<str:fmt>", card.card_export, name="audit_card_export"),
    path("<slug:slug>/card/bootstrap/", card.card_bootstrap, name="audit_card_bootstrap"),
    path("<slug:slug>/card/bootstrap.json", card.card_bootstrap_data, name="audit_card_bootstrap_data"),
    path("<slug:slug>/answers/", clustering.answers, name="audit_answers"),
    path("<slug:slug>/answers.jsonl", clustering.answers_export, name="audit_answers_export"),
    path("<slug:slug>/answers/<str:external_id>/", clustering.workspace, name="audit_answer_workspace"),
    path("<slug:slug>/answers/<str:external_id>/save/", clustering.save, name="audit_answer_save"),
    path("<slug:slug>/answers/<str:external_id>/revert/", clustering.revert, name="audit_answer_revert"),
    path("<slug:slug>/answers/<str:external_id>/propose/", clustering.propose, name="audit_answer_propose"),
    path("<slug:slug>/systems/", systems.systems, name="audit_systems"),
    path("<slug:slug>/systems/<str:name>/delete/", systems.system_delete, name="audit_system_delete"),
    path("<slug:slug>/groups/", figures.groups, name="audit_groups"),
    path("<slug:slug>/figures/", figures.figures_page, name="audit_figures"),
]
