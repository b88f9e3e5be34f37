"""Answer clustering pages (free-text campaigns): the campaign's answers page, one prompt's workspace,
its saves (JSON, from ``static/js/clustering.js``), reverts and proposals, and the export in
ProtoQA's JSONL format. Managers of the campaign only (``campaign_for_user``: 404 for anyone else).
Views parse, call one selector or service, render."""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.models import Campaign, Prompt
from annotation.permissions import campaign_for_request
from audits.models import AnswerClustering
from audits.selectors import clustering as selectors
from audits.services import clustering as services

Role = AnswerClustering.Role
NAMES = {
    "n_clusters": "clusters",
    "top_share": "top share",
    "entropy_bits": "entropy (bits)",
    "invalid_share": "invalid share",
}


def _prompt(campaign, external_id) -> Prompt:
    return get_object_or_404(Prompt, campaign=campaign, external_id=external_id, is_control=False)


@login_required
def answers(request, slug):
    """GET: every prompt with its clustering status and numbers. POST: propose clusters for every
    prompt whose proposal does not cover its answers yet."""
    campaign = campaign_for_request(request, slug)
    if request.method == "POST":
        n_proposed = services.clustering_propose_all(campaign=campaign)
        messages.success(request, f"Clusters proposed for {n_proposed} prompts.")
        return redirect("audit_answers", slug=campaign.slug)
    overview = selectors.answers_overview(campaign=campaign, user=request.user)
    summary = overview["summary"]
    context = {
        "campaign": campaign,
        "free_text": campaign.schema == Campaign.Schema.FREE_TEXT,
        "single": campaign.clustering_protocol == Campaign.ClusteringProtocol.SINGLE,
        "distribution": [(NAMES[k], d) for k, d in summary.distribution.items()] if summary else [],
        **overview,
    }
    return render(request, "audits/answers.html", context)


@login_required
def answers_export(request, slug):
    """The final clusterings in ProtoQA's crowdsourced JSONL format (its offline scorer reads it)."""
    return answers_document(campaign_for_request(request, slug))


def answers_document(campaign) -> HttpResponse:
    """The ProtoQA JSONL download, for the page's link and the API's (``audits.api.clustering``)."""
    rows = selectors.clusters_export(campaign=campaign)
    body = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    response = HttpResponse(body, content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{campaign.slug}-clusters.jsonl"'
    return response


def _start(*, role, visible, start_id, clusterings) -> AnswerClustering | None:
    """The clustering the workspace opens with: the user's current version (single protocol: the final
    one); for an adjudicator without one, or who asked (``?start=<id>``), a clustering they may see;
    else the proposal."""
    current = visible["mine"] if role == Role.INDEPENDENT else visible["adjudicated"]
    if clusterings.single:  # the final one, even an independent one saved before the switch to single
        current = clusterings.final
    choices = [visible["proposal"], visible["adjudicated"], *visible["others"]] if role == Role.ADJUDICATED else []
    chosen = next((c for c in choices if c is not None and str(c.pk) == start_id), None)
    return chosen or current or visible["proposal"] or (visible["others"][0] if visible["others"] else None)


@login_required
def workspace(request, slug, external_id):
    campaign = campaign_for_request(request, slug)
    prompt = _prompt(campaign, external_id)
    clusterings = selectors.prompt_clusterings(prompt=prompt)
    role = selectors.workspace_role(clusterings=clusterings, user=request.user)
    visible = selectors.visible_clusterings(clusterings=clusterings, user=request.user)
    answers_ = selectors.prompt_answers(prompt=prompt)
    lane = clusterings.lane(role=role, author_id=request.user.pk)
    start = _start(role=role, visible=visible, start_id=request.GET.get("start", ""), clusterings=clusterings)
    others = [c for c in (visible["proposal"], visible["adjudicated"], *visible["others"]) if c is not None]
    data = {
        "role": role,
        "baseVersion": lane.version if lane else 0,
        "basedOn": start.pk if start is not None else None,
        "answers": answers_,
        # Without any saved clustering, the page opens on the engine's proposal, unsaved.
        "assignment": start.assignment if start is not None else selectors.proposed_assignment(answers=answers_),
        "invalid": start.invalid if start is not None else [],
        "saveUrl": reverse("audit_answer_save", args=[campaign.slug, prompt.external_id]),
    }
    context = {
        "campaign": campaign,
        "prompt": prompt,
        "role": role,
        "single": clusterings.single,
        "lane": lane,
        "start": start,
        "data": data,
        "n_answers": len(answers_),
        "agreement": selectors.agreement(clusterings=clusterings, label_ids=[pk for pk, _ in answers_]),
        "independent_authors": [c.author.get_username() for c in clusterings.independent.values()],
        "shown": [(c, selectors.clusters_of(c, answers_)) for c in others],
        # Newest first, each with whether it is in the user's lane (so may be reverted to).
        "history": [
            (c, c.role == role and (role != Role.INDEPENDENT or c.author_id == request.user.pk))
            for c in reversed(visible["history"])
        ],
    }
    return render(request, "audits/answers_workspace.html", context)


@login_required
@require_POST
def save(request, slug, external_id):
    """A new version from the workspace's JSON ``{role, baseVersion, basedOn, assignment, invalid}``:
    200 with the version, or 400 with ``errors`` (nothing saved)."""
    campaign = campaign_for_request(request, slug)
    prompt = _prompt(campaign, external_id)
    try:
        body = json.loads(request.body or b"null")
        if not isinstance(body, dict):
            raise ValidationError("Send a JSON object: {role, baseVersion, basedOn, assignment, invalid}.")
        based_on = body.get("basedOn")
        clustering = services.clustering_save(
            prompt=prompt,
            by=request.user,
            role=body.get("role"),
            assignment=body.get("assignment") or {},
            invalid=body.get("invalid") or [],
            base_version=body.get("baseVersion"),
            based_on=AnswerClustering.objects.filter(pk=based_on, prompt=prompt).first() if based_on else None,
        )
    except ValueError:
        return JsonResponse({"errors": ["The request is not valid JSON."]}, status=400)
    except ValidationError as error:
        return JsonResponse({"errors": error.messages}, status=400)
    # The page reloads after a save (history and agreement are the server's): the flash says it worked.
    final = " It is this prompt's final clustering." if clustering.role == Role.ADJUDICATED else ""
    messages.success(request, f"Saved as version {clustering.version} ({clustering.n_clusters} clusters).{final}")
    return JsonResponse({"version": clustering.version, "clusters": clustering.n_clusters})


@login_required
@require_POST
def revert(request, slug, external_id):
    campaign = campaign_for_request(request, slug)
    prompt = _prompt(campaign, external_id)
    try:
        target = AnswerClustering.objects.filter(prompt=prompt, pk=int(request.POST.get("clustering", ""))).first()
        if target is None:
            raise ValidationError("There is no such version of this prompt's clustering.")
        base = int(request.POST.get("base_version", ""))
        reverted = services.clustering_revert(clustering=target, by=request.user, base_version=base)
    except ValueError:
        messages.error(request, "The revert form lacks a version number: reload the page.")
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, f"Version {target.version} is current again, as version {reverted.version}.")
    return redirect("audit_answer_workspace", slug=campaign.slug, external_id=prompt.external_id)


@login_required
@require_POST
def propose(request, slug, external_id):
    campaign = campaign_for_request(request, slug)
    prompt = _prompt(campaign, external_id)
    if services.clustering_propose(prompt=prompt) is None:
        messages.info(request, "This prompt has no answers yet: nothing to propose.")
    return redirect("audit_answer_workspace", slug=campaign.slug, external_id=prompt.external_id)
