"""Adaptive k on the campaign page: the rule in words and its planner (``templates/annotation/_adaptive_k.html``).

The campaign page (``researcher.campaign_detail``) shows them through :func:`adaptive_k_context`. The
planner's one question, a reward per label to price the plan with, comes as a GET parameter of the
campaign page itself (``StopPlanForm``), so asking it changes nothing.
"""

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from annotation import selectors
from annotation.forms import StopPlanForm, StopRuleForm
from annotation.models import Campaign


def adaptive_k_context(*, request, campaign: Campaign) -> dict:
    """What ``_adaptive_k.html`` shows: nothing for a fixed k; else the plan (``campaign_stop_plan``),
    priced at the reward asked for, and the form that asks it."""
    if campaign.k_max is None:
        return {"stop_plan": None}
    form = StopPlanForm(request.GET or None)
    return {
        "stop_plan": selectors.campaign_stop_plan(campaign=campaign, reward=form.reward_or_none()),
        "stop_plan_form": form,
    }


@login_required
@require_GET
def stop_rule_consequences(request):
    """What adaptive k's settings would mean, for the campaign form's script (static/js/campaign_form.js):
    ``lines`` (one per number of labels from k to k_max) and ``warning`` (empty unless no prompt could stop
    before k_max), worded as the form words them; both empty for settings that are not adaptive k or that
    the form would refuse."""
    consequences = StopRuleForm(request.GET).consequences()
    if consequences is None:
        return JsonResponse({"lines": [], "warning": ""})
    return JsonResponse({"lines": consequences.lines, "warning": consequences.warning})
