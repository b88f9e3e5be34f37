"""Adaptive k on the campaign page: the rule in words and its planner (``templates/annotation/_adaptive_k.html``).

The campaign page (``researcher.campaign_detail``) shows them through :func:`adaptive_k_context`. The
planner's one question, a reward per label to price the plan with, comes as a GET parameter of the
campaign page itself (``StopPlanForm``), so asking it changes nothing.
"""

from annotation import selectors
from annotation.forms import StopPlanForm
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
