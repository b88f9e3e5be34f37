"""Every URL of Chorus (UI and API) × every role: allowed, or refused the same way everywhere.

The table below has one row per URL pattern, found by walking the URL resolver. A pattern without
a row fails ``test_every_url_pattern_has_a_row``, so no endpoint ships without a decision on who
may use it. Admin URLs share one rule: staff only.

To add a row: find the helper that states the rule (``managers``, ``owners``, ``signed_in``, ...),
give it the method and the status a permitted request gets on the standard world below, and, for
a URL kwarg the world does not know, pass it in ``kwargs``.

Refusals are consistent: a campaign or lease that is not yours answers 404 (as if it did not exist),
and so does a worker URL of a campaign not launched yet to everybody but its managers (``DRAFT`` rows);
a campaign you manage but may not share answers 403; anonymous API calls get 401, anonymous page
requests a redirect to the sign-in page.
"""

from dataclasses import dataclass, field
from urllib.parse import urlencode

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from annotation import services
from annotation.channels.services import publication_create_panel
from annotation.permissions import SAFE_METHODS
from annotation.services.accounts import researcher_set
from audits.services import audit_full
from tests.helpers import prompts_jsonl

ROLES = ("anonymous", "worker", "owner", "other", "collaborator", "viewer", "staff")
SIGNED_IN = ROLES[1:]
LOGIN = "login"  # a redirect to the sign-in page
ADMIN_LOGIN = "admin-login"  # a redirect to the admin's sign-in page


@dataclass(frozen=True)
class Probe:
    method: str
    expect: dict  # role → status code, LOGIN or ADMIN_LOGIN
    kwargs: dict = field(default_factory=dict)  # URL kwargs: a value, or W("name") for a value of the world
    data: object = None
    query: dict = field(default_factory=dict)  # a query string, for GET
    prepare: object = None  # prepare(world): extra state this probe needs (kept out of the world: cost)


@dataclass(frozen=True)
class W:
    """A value of the world, by name (see the ``world`` fixture)."""

    name: str


def everyone(method, status, **extra) -> Probe:
    return Probe(method, {role: status for role in ROLES}, **extra)


def signed_in(method, ok, *, anonymous=LOGIN, **extra) -> Probe:
    return Probe(method, {"anonymous": anonymous, **{role: ok for role in SIGNED_IN}}, **extra)


def managers(method, ok, *, anonymous=LOGIN, viewer=None, **extra) -> Probe:
    """The campaign's owner, its collaborators and staff; 404 for everybody else. A viewer reads (GET)
    and gets 403 for anything else, unless ``viewer`` says otherwise (a worker URL: viewers label too)."""
    if viewer is None:
        viewer = ok if method in SAFE_METHODS else 403
    expect = {
        "anonymous": anonymous,
        "worker": 404,
        "other": 404,
        "owner": ok,
        "collaborator": ok,
        "viewer": viewer,
        "staff": ok,
    }
    return Probe(method, expect, **extra)


def owners(method, ok, *, anonymous=LOGIN, **extra) -> Probe:
    """The campaign's owner and staff; collaborators (editors and viewers) see the campaign but get 403."""
    expect = {
        "anonymous": anonymous,
        "worker": 404,
        "other": 404,
        "owner": ok,
        "collaborator": 403,
        "viewer": 403,
        "staff": ok,
    }
    return Probe(method, expect, **extra)


def researchers(method, ok, *, anonymous=LOGIN, **extra) -> Probe:
    """Accounts that may create campaigns (annotation.add_campaign: 'owner', and staff as superuser); 403
    for every other account."""
    return Probe(
        method, {"anonymous": anonymous, **{role: 403 for role in SIGNED_IN}, "owner": ok, "staff": ok}, **extra
    )


def copiers(method, ok, *, anonymous=LOGIN, **extra) -> Probe:
    """Whoever sees the campaign and may create campaigns: its owner (a researcher) and staff; a
    collaborator or viewer without annotation.add_campaign gets 403, everybody else 404."""
    return owners(method, ok, anonymous=anonymous, **extra)


def lease_holder(method, ok, *, anonymous=LOGIN, **extra) -> Probe:
    """Only the worker holding the lease; everybody else's view of it is a 404."""
    return Probe(method, {"anonymous": anonymous, **{role: 404 for role in SIGNED_IN}, "worker": ok}, **extra)


def full_audit(world) -> None:
    """A label by somebody outside the roles, and a full audit of it."""
    campaign = world["campaign"]
    bystander = services.worker_get_or_create(channel="panel", external_id="bystander")
    lease = services.lease_acquire(campaign=campaign, worker=bystander)
    services.label_submit(lease_id=lease.pk, worker=bystander, value=1, client_token="bystander")
    assert audit_full(campaign_id=campaign.pk) is not None


def mturk_publication(world) -> None:
    """An MTurk publication of the world's campaign, as ``W("mturk_pk")``, on the locmem backend. Nothing
    is sent: the publishing task would run after commit, which a test's transaction never reaches."""
    from django.test import override_settings

    from annotation.channels.services import publication_create_mturk

    channels = {"mturk": {"BACKEND": "annotation.channels.locmem.LocMemChannel", "OPTIONS": {}}}
    with override_settings(CHORUS_CHANNELS=channels, CHORUS_PUBLIC_URL="https://chorus.test"):
        publication = publication_create_mturk(
            campaign=world["campaign"],
            user=world["users"]["owner"],
            options={"title": "Matrix", "description": "Matrix", "reward": "0.10"},
        )
    world["kwargs"]["mturk_pk"] = publication.pk


def draft_campaign(world) -> None:
    """Gamma, a draft of 'owner' shared with 'collaborator' (an editor) and 'viewer', with an invitation
    (``W("draft_token")``), a panel link (``W("draft_panel")``) and its import (``W("draft_import")``), as
    ``W("draft")``. Until launch its
    worker URLs answer its managers only: 404 for everybody else, anonymous visitors included, as for a
    slug that does not exist."""
    users = world["users"]
    gamma = services.campaign_create(owner=users["owner"], title="Gamma", k=2)
    batch = services.prompts_import(campaign=gamma, data=prompts_jsonl(2), filename="g.jsonl")
    gamma.collaborators.add(users["collaborator"])
    gamma.collaborators.add(users["viewer"], through_defaults={"role": "viewer"})
    invitation = services.invitations_create(campaign=gamma, created_by=users["owner"], notes=["someone"])[0]
    panel = publication_create_panel(campaign=gamma, user=users["owner"], completion_code="DONE").panel
    world["kwargs"].update(
        draft=gamma.slug, draft_token=invitation.token, draft_panel=panel.slug, draft_import=batch.pk
    )


def unseen_prompt(world) -> None:
    """A prompt with gold that no worker was shown yet ('fresh'), which may become a control."""
    rows = b'{"id": "fresh", "text": "Fresh", "gold": 1}\n'
    services.prompts_import(campaign=world["campaign"], data=rows, filename="fresh.jsonl")


def a_prompt(world) -> None:
    """The world's prompt p0, as ``W("prompt_id")``."""
    world["kwargs"]["prompt_id"] = world["campaign"].prompts.get(external_id="p0").pk


PROMPT = {"kwargs": {"prompt_id": W("prompt_id")}, "prepare": a_prompt}


def worker_action(world) -> None:
    """A flag on the world's worker in its campaign, as ``W("action_id")``."""
    from annotation.services.quality import worker_act

    worker = services.worker_for_user(user=world["users"]["worker"])
    world["kwargs"]["action_id"] = worker_act(
        kind="flag", campaign=world["campaign"], worker=worker, reason="matrix"
    ).pk


def a_worker(world) -> None:
    """The world's worker's id, as ``W("worker_id")``: they take part in its campaign."""
    world["kwargs"]["worker_id"] = services.worker_for_user(user=world["users"]["worker"]).pk


WORKER_ID = {"kwargs": {"worker_id": W("worker_id")}, "prepare": a_worker}


def quality_rule(world) -> None:
    """A quality rule of the world's campaign, as ``W("rule_id")``."""
    from annotation.services.rules import rule_create

    rule = rule_create(campaign=world["campaign"], by=world["users"]["owner"], **RULE)
    world["kwargs"]["rule_id"] = rule.pk


def a_system(world) -> None:
    """A system named "matrix" with one prediction for the world's campaign (``SYSTEM`` names it)."""
    from audits.services.systems import system_save

    system_save(campaign=world["campaign"], name="matrix", predictions={"p0": 1}, by=None)


def prolific_publication(world) -> None:
    """A published Prolific publication of the world's campaign with one submission awaiting review, as
    ``W("prolific_pk")`` and ``W("submission_id")``: rows only, as the sync would have left them (no
    remote call is reached: every probe is refused or answered before one)."""
    from annotation.channels.models import PanelConfig, ProlificAccount, ProlificStudy, ProlificSubmission, Publication

    campaign = world["campaign"]
    # One active publication per channel name: the world's manual "prolific" panel link makes way.
    Publication.objects.filter(campaign=campaign, kind="panel").update(status="withdrawn")
    publication = Publication.objects.create(
        campaign=campaign,
        kind="prolific",
        channel="prolific",
        worker_channel="prolific",
        status="published",
        token_prefix="cmatrixprolif",
        options={"title": "Matrix", "description": "Matrix", "reward": "1.00", "labels_per_participant": 1},
    )
    PanelConfig.objects.create(publication=publication, slug="matrix-prolific", completion_code="C")
    account = ProlificAccount.objects.create(token="matrix-token")
    ProlificStudy.objects.create(
        publication=publication,
        account=account,
        study_id="s" * 24,
        reward_minor=100,
        labels_per_participant=1,
        estimated_minutes=1,
    )
    worker = services.worker_get_or_create(channel="prolific", external_id="p" * 24)
    ProlificSubmission.objects.create(
        publication=publication,
        submission_id="x" * 24,
        participant_id="p" * 24,
        worker=worker,
        status="AWAITING REVIEW",
    )
    world["kwargs"].update(prolific_pk=publication.pk, submission_id="x" * 24, account_id=account.pk)


PROLIFIC = {"kwargs": {"pk": W("prolific_pk")}, "prepare": prolific_publication}


def webhook_endpoint(world) -> None:
    """An outbound webhook endpoint of 'owner', as ``W("endpoint_pk")``."""
    from django.test import override_settings

    from annotation.webhooks.services import endpoint_create

    with override_settings(CHORUS_WEBHOOKS_ALLOW_PRIVATE=True):
        endpoint = endpoint_create(
            user=world["users"]["owner"], url="http://127.0.0.1:9/hook", events=["prompt.completed"]
        )
    world["kwargs"]["endpoint_pk"] = endpoint.pk


def endpoint_owner(method, ok, *, anonymous=LOGIN, **extra) -> Probe:
    """Only the endpoint's owner; everybody else's view of it is a 404 (staff included: it is private)."""
    expect = {"anonymous": anonymous, **{role: 404 for role in SIGNED_IN}, "owner": ok}
    kwargs = {"pk": W("endpoint_pk"), **extra.pop("kwargs", {})}
    return Probe(method, expect, kwargs=kwargs, prepare=webhook_endpoint, **extra)


def an_invitation(world) -> None:
    """An unused invitation to the world's campaign, as ``W("invitation_pk")``."""
    invitation = services.invitations_create(campaign=world["campaign"], created_by=None, notes=["matrix"])[0]
    world["kwargs"]["invitation_pk"] = invitation.pk


def ground_truth_run(world) -> None:
    """A waiting ground-truth run of the world's campaign, as ``W("run_id")`` (never enqueued: the
    test's transaction does not commit)."""
    from audits.services import ground_truths_request

    world["kwargs"]["run_id"] = ground_truths_request(campaign=world["campaign"], methods=["majority"])[0].pk


def bootstrap_run(world) -> None:
    """A waiting bootstrap run of the world's campaign, as ``W("run_id")``."""
    from audits.services import bootstrap_request

    world["kwargs"]["run_id"] = bootstrap_request(campaign=world["campaign"])[0].pk


def a_proposal(world) -> None:
    """An (empty) proposed clustering of the world's prompt p0, as ``W("clustering_id")``."""
    from audits.models import AnswerClustering

    prompt = world["campaign"].prompts.get(external_id="p0")
    proposal = AnswerClustering.objects.create(
        campaign=world["campaign"], prompt=prompt, role="proposal", version=1, assignment={}
    )
    world["kwargs"]["clustering_id"] = proposal.pk


REVIEW = {"kwargs": {"pk": W("prolific_pk"), "submission_id": W("submission_id")}, "prepare": prolific_publication}
SYSTEM = {"kwargs": {"name": "matrix"}, "prepare": a_system}
RULE = {"metric": "straight_lining", "threshold": 0.9, "min_labels": 20, "action": "flag"}
RULE_ID = {"kwargs": {"rule_id": W("rule_id")}, "prepare": quality_rule}
DRAFT = {"kwargs": {"slug": W("draft")}, "prepare": draft_campaign}
DRAFT_IMPORT = {"kwargs": {"slug": W("draft"), "import_id": W("draft_import")}, "prepare": draft_campaign}
API = {"anonymous": 401}
ROWS = {"value": 1, "client_token": "matrix"}

TABLE: dict[str, list[Probe]] = {
    # --- Accounts (django.contrib.auth) and sign-up -------------------------------------------
    "accounts/signup/": [everyone("GET", 200)],
    "accounts/login/": [everyone("GET", 200)],
    "accounts/logout/": [everyone("POST", 302)],
    "accounts/password_change/": [signed_in("GET", 200)],
    "accounts/password_change/done/": [signed_in("GET", 200)],
    "accounts/password_reset/": [everyone("GET", 200)],
    "accounts/password_reset/done/": [everyone("GET", 200)],
    "accounts/reset/<uidb64>/<token>/": [everyone("GET", 200, kwargs={"uidb64": "MQ", "token": "bad-token"})],
    "accounts/reset/done/": [everyone("GET", 200)],
    # --- API: schema, sign-in ---------------------------------------------------------------------
    "api/schema/": [everyone("GET", 200)],
    "api/docs/": [everyone("GET", 200)],
    "api/v1/auth/token/": [everyone("POST", 400, data={"username": "nobody", "password": "wrong-password"})],
    # --- API: workers -----------------------------------------------------------------------------
    "api/v1/campaigns/<slug:slug>/next-task/": [
        signed_in("POST", 200, **API),
        managers("POST", 200, viewer=200, **DRAFT, **API),
    ],
    "api/v1/campaigns/<slug:slug>/my-labels/": [signed_in("GET", 200, **API), managers("GET", 200, **DRAFT, **API)],
    "api/v1/leases/<int:lease_id>/heartbeat/": [lease_holder("POST", 200, **API)],
    "api/v1/leases/<int:lease_id>/submit/": [lease_holder("POST", 201, data=ROWS, **API)],
    "api/v1/leases/<int:lease_id>/release/": [lease_holder("POST", 204, **API)],
    # --- API: researchers -------------------------------------------------------------------------
    "api/v1/campaigns/": [signed_in("GET", 200, **API), researchers("POST", 201, data={"title": "New"}, **API)],
    # Multipart only: the matrix's JSON body is refused (415) once the account may create campaigns.
    "api/v1/studies/": [researchers("POST", 415, data={"title": "New"}, **API)],
    "api/v1/campaigns/<slug:slug>/": [
        managers("GET", 200, **API),
        managers("PATCH", 200, data={"title": "Renamed"}, **API),
    ],
    # The world's campaign is live: launch and resume are refused by the life cycle (409), which
    # only happens after the permission check passed.
    "api/v1/campaigns/<slug:slug>/launch/": [managers("POST", 409, **API)],
    "api/v1/campaigns/<slug:slug>/pause/": [managers("POST", 200, **API)],
    "api/v1/campaigns/<slug:slug>/resume/": [managers("POST", 409, **API)],
    "api/v1/campaigns/<slug:slug>/close/": [managers("POST", 200, **API)],
    "api/v1/campaigns/<slug:slug>/progress/": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/activity/": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/prompts/": [
        managers("GET", 200, **API),
        managers("POST", 201, data=[{"id": "new", "text": "New"}], **API),
    ],
    "api/v1/campaigns/<slug:slug>/prompts/<int:prompt_id>/": [managers("GET", 200, **PROMPT, **API)],
    # No such prompt: refused (400) once the permission check passed.
    "api/v1/campaigns/<slug:slug>/prompts/retire/": [managers("POST", 400, data={"prompts": [999999]}, **API)],
    "api/v1/campaigns/<slug:slug>/prompts/unretire/": [managers("POST", 400, data={"prompts": [999999]}, **API)],
    # Alpha is live, so its import stays (409); the draft's goes (204).
    "api/v1/campaigns/<slug:slug>/imports/": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/imports/<int:import_id>/": [
        managers("DELETE", 409, **API),
        managers("DELETE", 204, **DRAFT_IMPORT, **API),
    ],
    "api/v1/campaigns/<slug:slug>/copy/": [copiers("POST", 201, **API)],
    "api/v1/campaigns/<slug:slug>/controls/": [
        managers("GET", 200, **API),
        managers("POST", 200, data={"external_ids": ["fresh"]}, prepare=unseen_prompt, **API),
    ],
    "api/v1/campaigns/<slug:slug>/collaborators/": [
        managers("GET", 200, **API),
        owners("POST", 201, data={"username": "other"}, **API),
    ],
    "api/v1/campaigns/<slug:slug>/collaborators/<str:username>/": [owners("DELETE", 204, **API)],
    "api/v1/campaigns/<slug:slug>/labels/": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/labels.csv": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/labels.jsonl": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/labels.parquet": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/audit/": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/audit/snapshots/": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/audit/report.json": [managers("GET", 200, prepare=full_audit, **API)],
    "api/v1/campaigns/<slug:slug>/audit/report.md": [managers("GET", 200, prepare=full_audit, **API)],
    "api/v1/campaigns/<slug:slug>/audit/report.parquet": [managers("GET", 200, prepare=full_audit, **API)],
    "api/v1/campaigns/<slug:slug>/audit/recompute/": [managers("POST", 202, **API)],
    # the research API: what the audit pages offer, for a token client. A run's result answers 409
    # until the run is done, which only happens after the permission check passed.
    "api/v1/campaigns/<slug:slug>/audit/ground-truths/": [
        managers("POST", 202, data={"methods": ["majority"]}, **API),
        managers("POST", 400, **API),  # no methods: 400 naming the field
    ],
    "api/v1/campaigns/<slug:slug>/audit/ground-truths/<int:run_id>/": [
        managers("GET", 200, prepare=ground_truth_run, **API)
    ],
    "api/v1/campaigns/<slug:slug>/audit/ground-truths/<int:run_id>/result/": [
        managers("GET", 409, prepare=ground_truth_run, **API)
    ],
    "api/v1/campaigns/<slug:slug>/audit/groups/": [managers("GET", 200, **API)],
    # agreement per prompt and pair of workers, on the current labels (none yet, or one audited label)
    "api/v1/campaigns/<slug:slug>/audit/agreement/": [
        managers("GET", 200, **API),
        managers("GET", 200, prepare=full_audit, **API),
    ],
    "api/v1/campaigns/<slug:slug>/audit/agreement.csv": [managers("GET", 200, prepare=full_audit, **API)],
    "api/v1/campaigns/<slug:slug>/audit/figures/": [
        managers("GET", 404, **API),  # no full audit yet
        managers("GET", 200, prepare=full_audit, **API),
    ],
    "api/v1/campaigns/<slug:slug>/card/": [
        managers("GET", 200, **API),
        managers("GET", 200, prepare=full_audit, **API),
    ],
    "api/v1/campaigns/<slug:slug>/card.md": [managers("GET", 200, prepare=full_audit, **API)],
    "api/v1/campaigns/<slug:slug>/card.json": [managers("GET", 200, prepare=full_audit, **API)],
    "api/v1/campaigns/<slug:slug>/card.html": [managers("GET", 200, prepare=full_audit, **API)],
    "api/v1/campaigns/<slug:slug>/card/bootstrap/": [managers("POST", 202, **API)],
    "api/v1/campaigns/<slug:slug>/card/bootstrap/<int:run_id>/": [managers("GET", 200, prepare=bootstrap_run, **API)],
    "api/v1/campaigns/<slug:slug>/card/bootstrap/<int:run_id>/result/": [
        managers("GET", 409, prepare=bootstrap_run, **API)
    ],
    # as the compare page: every campaign named must be the user's ("alpha" is Alpha's slug); none named: 400
    "api/v1/compare/": [
        managers("GET", 200, query={"campaigns": "alpha"}, prepare=full_audit, **API),
        signed_in("GET", 400, **API),
    ],
    "api/v1/compare.csv": [managers("GET", 200, query={"campaigns": "alpha"}, **API), signed_in("GET", 400, **API)],
    "api/v1/campaigns/<slug:slug>/answers.jsonl": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/answers/<str:external_id>/clusterings/": [
        managers("GET", 200, kwargs={"external_id": "p0"}, **API),
        managers("POST", 400, kwargs={"external_id": "p0"}, **API),  # no body: 400 naming the fields
    ],
    "api/v1/campaigns/<slug:slug>/answers/<str:external_id>/clusterings/adjudicate/": [
        managers("POST", 400, kwargs={"external_id": "p0"}, **API)
    ],
    "api/v1/campaigns/<slug:slug>/answers/<str:external_id>/clusterings/<int:clustering_id>/revert/": [
        # the proposal is nobody's to revert: 400, after the permission check
        managers(
            "POST",
            400,
            kwargs={"external_id": "p0", "clustering_id": W("clustering_id")},
            data={"base_version": 0},
            prepare=a_proposal,
            **API,
        )
    ],
    "api/v1/campaigns/<slug:slug>/answers/": [managers("GET", 200, **API), managers("POST", 200, **API)],
    "api/v1/campaigns/<slug:slug>/answers/<str:external_id>/propose/": [
        managers("POST", 200, kwargs={"external_id": "p0"}, **API)  # no answers yet: no proposal
    ],
    "api/v1/campaigns/<slug:slug>/invitations/": [
        managers("GET", 200, viewer=403, **API),  # a link is a worker's own key: not a viewer's to read
        managers("POST", 201, data={"notes": ["matrix"]}, **API),
    ],
    "api/v1/campaigns/<slug:slug>/invitations/<int:pk>/": [
        managers("DELETE", 204, kwargs={"pk": W("invitation_pk")}, prepare=an_invitation, **API)
    ],
    "api/v1/campaigns/<slug:slug>/systems/": [
        managers("GET", 200, **API),
        managers("POST", 201, data={"name": "new", "predictions": {"p0": 1}}, **API),
    ],
    "api/v1/campaigns/<slug:slug>/systems/leaderboard/": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/systems/<str:name>/": [
        managers("GET", 200, **SYSTEM, **API),
        managers("PUT", 200, data={"predictions": {"p1": 0}}, **SYSTEM, **API),
        managers("DELETE", 204, **SYSTEM, **API),
    ],
    "api/v1/campaigns/<slug:slug>/quality-rules/": [
        managers("GET", 200, **API),
        managers("POST", 201, data=RULE, **API),
    ],
    "api/v1/campaigns/<slug:slug>/quality-rules/<int:rule_id>/deactivate/": [managers("POST", 200, **RULE_ID, **API)],
    "api/v1/campaigns/<slug:slug>/workers/": [managers("GET", 200, **API)],
    "api/v1/campaigns/<slug:slug>/workers/<int:worker_id>/labels/": [managers("GET", 200, **WORKER_ID, **API)],
    "api/v1/campaigns/<slug:slug>/worker-actions/": [managers("GET", 200, **API), managers("POST", 400, **API)],
    "api/v1/campaigns/<slug:slug>/worker-actions/<int:action_id>/undo/": [
        managers("POST", 200, kwargs={"action_id": W("action_id")}, prepare=worker_action, **API)
    ],
    # Publications on every channel. No body: 400 naming the field, after the permission check.
    "api/v1/campaigns/<slug:slug>/publications/": [managers("GET", 200, **API), managers("POST", 400, **API)],
    "api/v1/publications/<int:pk>/": [managers("GET", 200, **API), managers("GET", 200, **PROLIFIC, **API)],
    "api/v1/publications/<int:pk>/publish/": [managers("POST", 400, **PROLIFIC, **API)],  # published already
    "api/v1/publications/<int:pk>/withdraw/": [managers("POST", 200, **API)],
    "api/v1/publications/<int:pk>/submissions/": [managers("GET", 200, **PROLIFIC, **API)],
    "api/v1/publications/<int:pk>/submissions/<str:submission_id>/review/": [managers("POST", 400, **REVIEW, **API)],
    "api/v1/publications/<int:pk>/bonuses/": [
        managers("GET", 200, **PROLIFIC, **API),
        managers("POST", 400, **PROLIFIC, **API),
    ],
    "api/v1/publications/<int:pk>/bonuses/rule/": [managers("POST", 400, **PROLIFIC, **API)],
    "api/v1/publications/<int:pk>/bonuses/csv/": [managers("POST", 400, **PROLIFIC, **API)],
    # Outbound webhooks: anyone signed in registers their own; an endpoint answers its owner only
    "api/v1/webhooks/": [signed_in("GET", 200, **API), signed_in("POST", 400, **API)],
    "api/v1/webhooks/<int:pk>/": [
        endpoint_owner("GET", 200, **API),
        endpoint_owner("PATCH", 200, data={"enabled": False}, **API),
        endpoint_owner("DELETE", 204, **API),
    ],
    "api/v1/webhooks/<int:pk>/rotate-secret/": [endpoint_owner("POST", 200, **API)],
    "api/v1/webhooks/<int:pk>/test/": [endpoint_owner("POST", 202, **API)],
    "api/v1/webhooks/<int:pk>/deliveries/": [endpoint_owner("GET", 200, **API)],
    "webhooks/": [signed_in("GET", 200), signed_in("POST", 302)],  # POST: refused (no URL), a message
    "webhooks/<int:pk>/<str:action>/": [endpoint_owner("POST", 302, kwargs={"pk": W("endpoint_pk"), "action": "test"})],
    # --- Pages: researchers -----------------------------------------------------------------------
    "": [everyone("GET", 200)],
    "campaigns/new/": [researchers("GET", 200), researchers("POST", 200)],
    "campaigns/new/study/": [researchers("GET", 200), researchers("POST", 200)],  # POST: no file, the form again
    # adaptive k's consequences for the campaign form's script: arithmetic, no campaign involved
    "campaigns/new/stop-rule/": [signed_in("GET", 200, query={"k": "3", "k_max": "5"})],
    "campaigns/<slug:slug>/activity.csv": [managers("GET", 200)],  # POST: no form data, the form again
    "campaigns/<slug:slug>/": [managers("GET", 200)],
    "campaigns/<slug:slug>/edit/": [managers("GET", 200), managers("POST", 200)],  # POST: the form again
    "campaigns/<slug:slug>/import/": [managers("POST", 400)],  # no file: the form's error page
    # an unknown preview (none was uploaded): back to the campaign page, which says so
    "campaigns/<slug:slug>/import/<str:preview_id>/": [managers("GET", 302, kwargs={"preview_id": "none"})],
    "campaigns/<slug:slug>/controls/": [managers("POST", 400)],  # no ids: the form's error page
    "campaigns/<slug:slug>/prompts/": [managers("GET", 200)],
    "campaigns/<slug:slug>/prompts.csv": [managers("GET", 200)],
    "campaigns/<slug:slug>/prompts/<int:prompt_id>/": [managers("GET", 200, **PROMPT)],
    "campaigns/<slug:slug>/prompts/retire/": [managers("POST", 302)],  # no ids ticked: back to the list, said so
    # Removing an import asks first: a POST without confirm=remove (the matrix posts JSON) is the page again.
    "campaigns/<slug:slug>/imports/<int:import_id>/remove/": [
        managers("GET", 200),
        managers("POST", 400),
        managers("GET", 200, **DRAFT_IMPORT),
    ],
    "campaigns/<slug:slug>/copy/": [copiers("POST", 302)],
    "campaigns/<slug:slug>/invitation/": [
        managers("GET", 200, viewer=403),
        managers("POST", 400),
    ],  # POST: no lines, the form again
    "campaigns/<slug:slug>/export.<str:fmt>": [managers("GET", 200)],
    # Sharing follows the API's rule (owner and staff; 403 for collaborators). The matrix posts JSON,
    # which a page's form does not read: no username, so the form's error page.
    "campaigns/<slug:slug>/collaborators/": [owners("POST", 400)],
    "campaigns/<slug:slug>/collaborators/<str:username>/remove/": [owners("POST", 302)],
    r"^campaigns/(?P<slug>[-\w]+)/(?P<action>launch|pause|resume)/$": [
        managers("POST", 302, kwargs={"action": "pause"})
    ],
    "campaigns/<slug:slug>/close/": [managers("GET", 200), managers("POST", 400)],
    "campaigns/<slug:slug>/rules/": [managers("POST", 400)],  # JSON, which the form does not read: its error page
    "campaigns/<slug:slug>/rules/<int:rule_id>/deactivate/": [managers("POST", 302, **RULE_ID)],
    "campaigns/<slug:slug>/workers/": [managers("GET", 200)],
    "campaigns/<slug:slug>/workers/act/": [managers("POST", 400)],
    "campaigns/<slug:slug>/workers/bulk/": [managers("POST", 400)],  # JSON, which the form does not read
    "campaigns/<slug:slug>/workers/<int:worker_id>/": [managers("GET", 200, **WORKER_ID)],
    "campaigns/<slug:slug>/workers/actions/<int:action_id>/undo/": [
        managers("POST", 302, kwargs={"action_id": W("action_id")}, prepare=worker_action)
    ],  # POST: unconfirmed, the page again
    # --- Pages: workers ---------------------------------------------------------------------------
    "w/<slug:slug>/": [everyone("GET", 200), managers("GET", 200, anonymous=404, **DRAFT)],
    "w/<slug:slug>/join/<str:token>/": [
        signed_in("GET", 302, anonymous=200),
        managers(
            "GET", 302, anonymous=404, kwargs={"slug": W("draft"), "token": W("draft_token")}, prepare=draft_campaign
        ),
    ],
    "w/<slug:slug>/next/": [signed_in("GET", 302), managers("GET", 200, **DRAFT)],  # 200: "not launched yet"
    "w/<slug:slug>/task/<int:lease_id>/": [lease_holder("GET", 200), lease_holder("POST", 302)],
    "w/<slug:slug>/task/<int:lease_id>/heartbeat/": [lease_holder("POST", 200)],
    "w/<slug:slug>/task/<int:lease_id>/skip/": [lease_holder("POST", 302)],
    "w/<slug:slug>/task/<int:lease_id>/stop/": [lease_holder("POST", 302)],
    # --- Pages: audits ----------------------------------------------------------------------------
    "audits/guide/": [everyone("GET", 200)],  # the reading guide shows no campaign's data
    "audits/<slug:slug>/": [managers("GET", 200)],
    "audits/<slug:slug>/data.json": [managers("GET", 200, anonymous=404)],  # polled by the page: no redirect
    "audits/<slug:slug>/report.<str:fmt>": [managers("GET", 200, kwargs={"fmt": "json"}, prepare=full_audit)],
    "audits/<slug:slug>/agreement.csv": [managers("GET", 200), managers("GET", 200, prepare=full_audit)],
    "audits/<slug:slug>/recompute/": [managers("POST", 302)],
    "audits/<slug:slug>/ground-truths/": [managers("POST", 302)],  # no methods ticked: refused, back to the page
    # the instrument card: with and without audited labels; its exports; its bootstrap button and polled feed
    "audits/<slug:slug>/card/": [managers("GET", 200), managers("GET", 200, prepare=full_audit)],
    "audits/<slug:slug>/card.<str:fmt>": [
        managers("GET", 200, kwargs={"fmt": fmt}, prepare=full_audit) for fmt in ("md", "json", "html")
    ],
    "audits/<slug:slug>/card/bootstrap/": [managers("POST", 302)],
    "audits/<slug:slug>/card/bootstrap.json": [managers("GET", 200, anonymous=404)],
    # the form lists what each may see; a campaign asked for that is not theirs answers 404 ("alpha" is Alpha's slug)
    "audits/compare/": [signed_in("GET", 200), managers("GET", 200, query={"campaigns": "alpha"}, prepare=full_audit)],
    "audits/<slug:slug>/groups/": [managers("GET", 200)],
    "audits/<slug:slug>/figures/": [managers("GET", 200), managers("GET", 200, prepare=full_audit)],
    "audits/<slug:slug>/systems/": [managers("GET", 200)],
    "audits/<slug:slug>/systems/<str:name>/delete/": [managers("POST", 302, **SYSTEM)],
    "audits/<slug:slug>/answers/": [managers("GET", 200), managers("POST", 302)],  # POST: propose clusters
    "audits/<slug:slug>/answers.jsonl": [managers("GET", 200)],
    "audits/<slug:slug>/answers/<str:external_id>/": [managers("GET", 200, kwargs={"external_id": "p0"})],
    "audits/<slug:slug>/answers/<str:external_id>/save/": [managers("POST", 400, kwargs={"external_id": "p0"})],
    "audits/<slug:slug>/answers/<str:external_id>/revert/": [managers("POST", 302, kwargs={"external_id": "p0"})],
    "audits/<slug:slug>/answers/<str:external_id>/propose/": [managers("POST", 302, kwargs={"external_id": "p0"})],
    # --- Channels: MTurk's frame and panel links authenticate by signed token or panel session, not
    # by role, so every role gets the same answer without them ------------------------------------
    "channels/mturk/task/": [everyone("GET", 404)],  # no publication parameter
    "channels/mturk/task/submit/": [everyone("POST", 400)],  # no signed token
    "channels/mturk/task/heartbeat/": [everyone("POST", 400)],
    "channels/panel/<slug:slug>/": [
        everyone("GET", 400, kwargs={"slug": W("panel_slug")}),  # no participant id
        everyone("GET", 302, kwargs={"slug": W("panel_slug")}, query={"PROLIFIC_PID": "p1", "STUDY_ID": "s1"}),
        managers(
            "GET",
            302,
            anonymous=404,
            kwargs={"slug": W("draft_panel")},
            query={"PROLIFIC_PID": "p1"},
            prepare=draft_campaign,
        ),
    ],
    "channels/panel/<slug:slug>/next/": [everyone("GET", 403, kwargs={"slug": W("panel_slug")})],  # no session
    "channels/panel/<slug:slug>/task/<int:lease_id>/": [everyone("GET", 403, kwargs={"slug": W("panel_slug")})],
    "channels/panel/<slug:slug>/task/<int:lease_id>/heartbeat/": [
        everyone("POST", 403, kwargs={"slug": W("panel_slug")})
    ],
    "channels/panel/<slug:slug>/task/<int:lease_id>/skip/": [everyone("POST", 403, kwargs={"slug": W("panel_slug")})],
    "channels/panel/<slug:slug>/done/": [everyone("GET", 403, kwargs={"slug": W("panel_slug")})],
    # --- Channels: researchers --------------------------------------------------------------------
    "channels/campaigns/<slug:slug>/": [managers("GET", 200)],
    # POST without form data: the form's error page, after the permission check
    "channels/campaigns/<slug:slug>/mturk/": [managers("GET", 200), managers("POST", 400)],
    "channels/campaigns/<slug:slug>/panel/": [managers("GET", 200), managers("POST", 400)],
    "channels/publications/<int:pk>/": [managers("GET", 200)],
    # trying the task stores nothing, so a viewer may post an answer too (acknowledged, then the next prompt)
    "channels/publications/<int:pk>/try/": [managers("GET", 200), managers("POST", 302, viewer=302)],
    "channels/publications/<int:pk>/withdraw/": [managers("POST", 302)],
    # Prolific: no token configured, so the publishing page sends back to the channels page (which says
    # what to set); the forms' refusals come back as a message on the page they were posted from.
    "channels/campaigns/<slug:slug>/prolific/": [managers("GET", 302)],
    "channels/campaigns/<slug:slug>/prolific/token/": [managers("POST", 302)],
    "channels/publications/<int:pk>/publish/": [managers("POST", 302, **PROLIFIC)],
    "channels/publications/<int:pk>/submissions/<str:submission_id>/review/": [managers("POST", 302, **REVIEW)],
    "channels/publications/<int:pk>/prolific-bonuses/": [managers("POST", 302, **PROLIFIC)],
    "channels/publications/<int:pk>/prolific-bonuses/many/": [managers("POST", 302, **PROLIFIC)],
    # Prolific's hook deliveries are signed, not signed in: unsigned, everyone gets 403
    "channels/prolific/hooks/<int:account_id>/": [everyone("POST", 403, kwargs={"account_id": 999})],
    # --- Channels: MTurk bonuses spend the owner's money: owner and staff; collaborators see the
    # publication page but get 403. No form data: the page's form errors (400) ----------------------
    "channels/publications/<int:pk>/bonuses/": [
        owners("POST", 400, kwargs={"pk": W("mturk_pk")}, prepare=mturk_publication)
    ],
}

ADMIN_PREFIX = "admin/"


def _admin_probe() -> Probe:
    expect = {role: ADMIN_LOGIN for role in ROLES}
    expect["staff"] = 200
    return Probe("GET", expect)


def url_patterns():
    """(route, kwarg names, URL name) for every pattern the resolver knows, includes flattened."""

    def walk(resolver, prefix, namespace):
        for pattern in resolver.url_patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern, route, namespace + (f"{pattern.namespace}:" if pattern.namespace else ""))
            else:
                names = tuple(pattern.pattern.regex.groupindex)
                yield route, names, (namespace + pattern.name) if pattern.name else None

    return list(walk(get_resolver(), "", ""))


def test_every_url_pattern_has_a_row():
    routes = {route for route, _, _ in url_patterns()}
    missing = sorted(r for r in routes if r not in TABLE and not r.startswith(ADMIN_PREFIX))
    stale = sorted(set(TABLE) - routes)
    assert not missing, f"URL patterns without a row in the permission table: {missing}"
    assert not stale, f"rows for URL patterns that no longer exist: {stale}"


def _cases():
    for route, probes in TABLE.items():
        for probe in probes:
            for role in ROLES:
                yield pytest.param(route, probe, role, id=f"{probe.method} /{route} as {role}")


@pytest.fixture
def world(db):
    """Alpha (live, owned by 'owner', shared with 'collaborator' (an editor) and 'viewer', with a panel
    publication), in which 'worker' holds a lease; Beta, owned by 'other'; 'staff' is staff and
    superuser. No passwords: sign-in is forced."""
    User = get_user_model()
    users = {role: User.objects.create(username=role) for role in SIGNED_IN}
    users["staff"].is_staff = users["staff"].is_superuser = True
    users["staff"].save()
    researcher_set(user=users["owner"])
    alpha = services.campaign_create(owner=users["owner"], title="Alpha", k=2)
    services.prompts_import(campaign=alpha, data=prompts_jsonl(3), filename="a.jsonl")
    alpha = services.campaign_transition(campaign=alpha, action="launch")
    alpha.collaborators.add(users["collaborator"])
    alpha.collaborators.add(users["viewer"], through_defaults={"role": "viewer"})
    services.campaign_create(owner=users["other"], title="Beta")
    lease = services.lease_acquire(campaign=alpha, worker=services.worker_for_user(user=users["worker"]))
    panel = publication_create_panel(campaign=alpha, user=users["owner"], completion_code="DONE")
    kwargs = {
        "slug": alpha.slug,
        "lease_id": lease.pk,
        "username": "collaborator",
        "fmt": "csv",
        "token": services.invitations_create(campaign=alpha, created_by=users["owner"], notes=["someone"])[0].token,
        "pk": panel.pk,
        "panel_slug": panel.panel.slug,
        "import_id": alpha.imports.get().pk,
    }
    return {"users": users, "kwargs": kwargs, "campaign": alpha}


def _request(world, role, names, url_name, probe):
    client = APIClient()
    if role != "anonymous":
        client.force_login(world["users"][role])
    values = {**world["kwargs"], **probe.kwargs}
    url = reverse(
        url_name,
        kwargs={
            name: world["kwargs"][values[name].name] if isinstance(values[name], W) else values[name] for name in names
        },
    )
    if probe.query:
        url += "?" + urlencode(probe.query)
    return getattr(client, probe.method.lower())(url, probe.data, format="json")


@pytest.mark.parametrize("route, probe, role", list(_cases()))
def test_permission(world, route, probe, role):
    names, url_name = next((n, u) for r, n, u in url_patterns() if r == route)
    if probe.prepare:
        probe.prepare(world)
    response = _request(world, role, names, url_name, probe)
    _check(response, probe.expect[role])


def _check(response, expected):
    if expected == LOGIN:
        assert response.status_code == 302 and response["Location"].startswith(reverse("login")), response
    elif expected == ADMIN_LOGIN:
        assert response.status_code == 302 and response["Location"].startswith(reverse("admin:login")), response
    else:
        assert response.status_code == expected, (response.status_code, getattr(response, "content", b"")[:300])


def _admin_urls():
    return ["admin:index"] + [
        f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist" for model in admin.site._registry
    ]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("url_name", _admin_urls())
def test_admin_is_for_staff_only(world, url_name, role):
    client = APIClient()
    if role != "anonymous":
        client.force_login(world["users"][role])
    _check(client.get(reverse(url_name)), _admin_probe().expect[role])
