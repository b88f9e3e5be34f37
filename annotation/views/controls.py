"""Control prompts on the campaign page: how they are served, which prompts are controls, and a form
to mark prompts as controls or unmark them (``services.controls.prompts_control_set``).

The campaign page (``researcher.campaign_detail``) shows them through :func:`controls_context`; the
view here takes the form's POST. Like every page about a campaign it goes through
``campaign_for_request`` (404 for anyone who neither owns nor shares it). A refused marking shows the
form again with what is wrong, on a page of its own (status 400), and changes nothing.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation import services
from annotation.forms import ControlMarkForm
from annotation.models import Campaign
from annotation.permissions import campaign_for_request
from annotation.services.controls import prompts_control_set

#: The campaign page names at most this many controls; it counts them all.
CONTROLS_LISTED = 50


def controls_context(*, campaign: Campaign, form: ControlMarkForm | None = None) -> dict:
    """What ``templates/annotation/_controls.html`` shows: the campaign's controls (the first
    ``CONTROLS_LISTED``, with their label counts), how many there are, and the marking form."""
    controls = campaign.prompts.filter(is_control=True).order_by("pk")
    return {
        "controls": list(controls.values("external_id", "n_labels", "gold")[:CONTROLS_LISTED]),
        "n_controls": controls.count(),
        "control_form": form or ControlMarkForm(),
    }


@login_required
@require_POST
def controls_mark(request, slug):
    campaign = campaign_for_request(request, slug)
    form = ControlMarkForm(request.POST)
    if form.is_valid():
        control = form.cleaned_data["control"]
        try:
            marking = prompts_control_set(
                campaign=campaign, external_ids=form.cleaned_data["external_ids"], control=control
            )
        except ValidationError as exc:
            form.add_error(None, exc)  # the service names the field: external_ids
        except services.ServiceError as exc:
            form.add_error(None, exc.message)
        else:
            kind = "controls" if control else "normal prompts"
            said = f"{len(marking.changed)} prompt{'s' if len(marking.changed) != 1 else ''} made {kind}."
            if marking.unchanged:
                said += f" {len(marking.unchanged)} already were: {', '.join(marking.unchanged[:10])}"
                said += "…" if len(marking.unchanged) > 10 else "."
            messages.success(request, said)
            return redirect(reverse("campaign_detail", args=[slug]) + "#controls")
    context = {"campaign": campaign, **controls_context(campaign=campaign, form=form)}
    return render(request, "annotation/controls.html", context, status=400)
