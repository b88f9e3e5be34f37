"""Quality rules on the campaign page: the list, a form to add one, a button to deactivate each.

The campaign page (``researcher.campaign_detail``) shows them through :func:`rules_context`; the views
here take the form's POSTs. Like every page about a campaign they go through ``campaign_for_request``
(404 for anyone who neither owns nor shares it). A refused rule shows the form again with the field
named, on a page of its own (status 400), and changes nothing.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.forms import QualityRuleForm
from annotation.models import Campaign, QualityRule
from annotation.permissions import campaign_for_request
from annotation.services import rules as rule_services


def rules_context(*, campaign: Campaign, form: QualityRuleForm | None = None) -> dict:
    """What ``templates/annotation/_quality_rules.html`` shows: the campaign's rules, newest first, and the form."""
    return {
        "quality_rules": campaign.quality_rules.select_related("created_by").order_by("-created_at", "-id"),
        "rule_form": form or QualityRuleForm(),
    }


@login_required
@require_POST
def rule_add(request, slug):
    campaign = campaign_for_request(request, slug)
    form = QualityRuleForm(request.POST)
    if form.is_valid():
        try:
            rule = rule_services.rule_create(campaign=campaign, by=request.user, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Rule added: {rule}. The live audit applies it from its next run.")
            return redirect(reverse("campaign_detail", args=[slug]) + "#quality-rules")
    context = {"campaign": campaign, **rules_context(campaign=campaign, form=form)}
    return render(request, "annotation/quality_rules.html", context, status=400)


@login_required
@require_POST
def rule_deactivate(request, slug, rule_id):
    campaign = campaign_for_request(request, slug)
    rule = rule_services.rule_deactivate(rule=get_object_or_404(QualityRule, campaign=campaign, pk=rule_id))
    messages.success(request, f"Rule deactivated: {rule}. The actions it took stay in the log.")
    return redirect(reverse("campaign_detail", args=[slug]) + "#quality-rules")
