"""The Django admin: every model of Chorus's apps is there, what the engines write is read-only, and
every page it offers answers (no 500, no dead end) for a superuser."""

import json
import re

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import RequestFactory, override_settings
from django.urls import reverse

from annotation import services
from annotation.admin import ReadOnlyAdmin
from annotation.channels import services as channel_services
from annotation.channels.services import prolific
from annotation.models import Label, Prompt
from annotation.services.invitations import invitation_accept, invitations_create
from annotation.services.quality import worker_act
from annotation.services.rules import rule_create
from annotation.webhooks import services as webhooks
from audits.services import (
    audit_refresh,
    bootstrap_compute,
    bootstrap_request,
    clustering_propose,
    ground_truths_compute,
    ground_truths_request,
    system_save,
)
from tests.channels.conftest import locmem_channel  # noqa: F401 (a fixture: MTurk publications without a network)
from tests.channels.fake_prolific import FakeProlific
from tests.channels.prolific_stack import signed_headers
from tests.helpers import label_one, prompts_jsonl

EDITABLE = {"annotation.prompt"}  # a typo in a prompt's text, a corrected gold value


def _models():
    return [m for app in ("annotation", "channels", "audits") for m in apps.get_app_config(app).get_models()]


def test_every_model_of_chorus_is_in_the_admin():
    missing = [m._meta.label for m in _models() if m not in admin.site._registry]
    assert missing == []


@pytest.mark.parametrize("model", _models(), ids=lambda m: m._meta.label_lower)
def test_engine_rows_are_read_only_even_for_superusers(model, admin_user):
    model_admin = admin.site._registry[model]
    request = RequestFactory().get("/")
    request.user = admin_user
    # Nothing is added or deleted here: prompts come in through prompts_import (which cuts their k slots),
    # and no row that holds or guards labels ever leaves.
    assert model_admin.has_add_permission(request) is False
    assert model_admin.has_delete_permission(request) is False
    if model._meta.label_lower in EDITABLE:
        assert not isinstance(model_admin, ReadOnlyAdmin)
        assert model_admin.has_change_permission(request) is True
        return
    assert isinstance(model_admin, ReadOnlyAdmin)
    assert model_admin.has_change_permission(request) is False


@pytest.mark.parametrize("model", _models(), ids=lambda m: m._meta.label_lower)
def test_plural_names_are_spelled_right(model):
    singular, plural = str(model._meta.verbose_name), str(model._meta.verbose_name_plural)
    if re.search(r"(s|ch|sh|x|z)$", singular):  # Django's default plural appends "s": "statss", "batchs", "bonuss"
        assert plural != singular + "s"
    assert "m turk" not in singular  # Django's split of the class name MTurkHIT


@pytest.fixture
def everything(make_campaign, make_worker, researcher, locmem_channel):  # noqa: F811
    """At least one row of every model, each written by the service that writes it in production."""
    campaign = make_campaign(4, k=2)
    worker = make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token="admin-walk")
    services.lease_acquire(campaign=campaign, worker=worker)  # a second lease, still active
    audit_refresh(campaign_id=campaign.pk)

    publication = channel_services.publication_create_mturk(
        campaign=campaign,
        user=researcher,
        options={"title": "Label statements", "description": "Is it true?", "reward": "0.10", "n_assignments": 2},
    )
    channel_services.publication_publish(publication_id=publication.pk)
    hit = publication.hits.get()
    mturk_worker = services.worker_get_or_create(channel=publication.worker_channel, external_id="AWORKER1")
    assignment = channel_services.mturk_assignment_open(hit=hit, assignment_id="ASSIGNMENT1", worker=mturk_worker)
    lease = services.lease_acquire(campaign=campaign, worker=mturk_worker)
    ack = services.label_submit(lease_id=lease.pk, worker=mturk_worker, value=0, client_token="mturk-walk")
    channel_services.mturk_assignment_labeled(assignment=assignment, label_id=ack.label_id)
    locmem_channel.submit(hit.hit_id, "AWORKER1", "ASSIGNMENT1")
    assert channel_services.mturk_reconcile(publication_id=publication.pk).approved == 1
    assignment.refresh_from_db()
    channel_services.mturk_bonus_grant(assignment=assignment, amount="0.50", reason="Careful work")
    channel_services.mturk_nothing_left(assignment=assignment)

    panel = channel_services.publication_create_panel(campaign=campaign, user=researcher, completion_code="C0DE").panel
    channel_services.panel_session_start(panel=panel, participant_id="5f1a2b3c4d5e6f7a8b9c0d1e")

    [invitation] = invitations_create(campaign=campaign, created_by=researcher, notes=["For Ann"])
    invitation_accept(invitation=invitation)
    services.api_token_get_or_create(user=researcher)
    rule = rule_create(
        campaign=campaign, by=researcher, metric="straight_lining", threshold=0.9, min_labels=20, action="flag"
    )
    worker_act(
        kind="flag",
        campaign=campaign,
        worker=worker,
        rule=rule,
        reason="answers 1 to 100 % of 1 label",
        numbers={"top_share": 1.0, "rule_count": 1},
    )
    worker_act(kind="exclude", campaign=campaign, worker=mturk_worker, by=researcher, reason="Checking their answers.")
    adaptive = make_campaign(1, k=1, k_max=2, title="Adaptive")  # its first label is decided: a StopDecision
    lease = services.lease_acquire(campaign=adaptive, worker=worker)
    services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token="adaptive-walk")
    run, _ = ground_truths_request(campaign=campaign, methods=["majority"], by=researcher)
    ground_truths_compute(run_id=run.pk)
    bootstrap_compute(run_id=bootstrap_request(campaign=campaign, by=researcher)[0].pk)
    system_save(campaign=campaign, name="walk", predictions={campaign.prompts.first().external_id: 1}, by=researcher)
    free = services.campaign_create(owner=researcher, title="Free text", schema="free_text", k=1)
    services.prompts_import(campaign=free, data=prompts_jsonl(1, gold=False), filename="questions.jsonl")
    free = services.campaign_transition(campaign=free, action="launch")
    lease = services.lease_acquire(campaign=free, worker=worker)
    services.label_submit(lease_id=lease.pk, worker=worker, value="Coffee", client_token="free-walk")
    clustering_propose(prompt=free.prompts.get())
    services.campaign_share(campaign=campaign, username=make_worker().user.username, role="viewer")
    # The bias statistics: a second label on a prompt writes deltas, the quick run folds them, a third
    # label writes new ones.
    bias = make_campaign(1, k=3, title="Bias")
    for n in range(3):
        label_one(bias, make_worker(), value=n % 2)
        if n == 1:
            audit_refresh(campaign_id=bias.pk)
    _prolific_rows(campaign, researcher)
    _webhook_rows(campaign, researcher)
    Group.objects.create(name="Researchers")  # Django's own model: no Chorus service writes groups
    for model in admin.site._registry:
        assert model._default_manager.exists(), f"give the admin walk a {model._meta.label} row"
    return campaign


def _prolific_rows(campaign, researcher) -> None:
    """A study on the Prolific stand-in with a submission, a bonus and a received hook delivery."""
    fake = FakeProlific().start()
    fake.hold_deliveries()
    try:
        with override_settings(
            CHORUS_PROLIFIC_API_URL=fake.url,
            CHORUS_PROLIFIC_TOKEN="test-token",
            CHORUS_PUBLIC_URL="https://chorus.test",
        ):
            channel_services.publication_withdraw(publication=campaign.publications.get(kind="panel"))
            publication = prolific.prolific_publication_create(
                campaign=campaign,
                user=researcher,
                options={
                    "title": "Walk",
                    "description": "Walk",
                    "reward": "1.00",
                    "labels_per_participant": 1,
                    "estimated_minutes": 1,
                },
                publish=True,
            )
            assert publication.prolific.study_id, (publication.status, publication.error, publication.prolific.pending)
            submission_id, _ = fake.arrive(publication.prolific.study_id, "a" * 24)
            prolific.prolific_sync(publication_id=publication.pk)
            bonus, _ = prolific.prolific_bonus_grant(
                publication=publication,
                worker_ref="prolific:" + "a" * 24,
                amount="0.10",
                reason="walk",
                key="walk",
                user=researcher,
            )
            prolific.prolific_bonus_pay(bonus_id=bonus.pk)
            account = publication.prolific.account
            account.refresh_from_db()
            body = json.dumps({"resource_id": submission_id, "event_type": "submission.status.change"})
            headers = signed_headers(account.hook_secret, body, event_id="walk")
            assert (
                prolific.prolific_event_receive(account_id=account.pk, headers=headers, raw_body=body.encode())[0]
                == 202
            )
    finally:
        fake.stop()


def _webhook_rows(campaign, researcher) -> None:
    """An endpoint, a scan's cursor and a delivery (to a port nobody listens on: a failed attempt)."""
    with override_settings(CHORUS_WEBHOOKS_ALLOW_PRIVATE=True):
        endpoint = webhooks.endpoint_create(user=researcher, url="http://127.0.0.1:9/hook", events=["prompt.completed"])
        webhooks.campaign_scan(campaign=campaign)
        delivery = webhooks.endpoint_test(endpoint=endpoint)
        webhooks.delivery_send(delivery_id=delivery.pk)


def _every_registered_model():
    return sorted(admin.site._registry, key=lambda m: m._meta.label)


def _url(model, page: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{page}", args=args)


def _dead_end(response) -> bool:
    """Django's page for a deletion that related rows forbid: it can only be left with the back button."""
    return b"Cannot delete" in response.content


@pytest.mark.django_db
def test_every_admin_page_answers_for_a_superuser(client, admin_user, everything):
    """Each page the admin links to answers 200; what it does not offer (adding, deleting) is a 403;
    none is a 500 or a dead end. Delete pages are tried for every row, since related rows decide."""
    client.force_login(admin_user)
    assert client.get("/admin/").status_code == 200
    request = RequestFactory().get("/")
    request.user = admin_user
    answers = []
    for model in _every_registered_model():
        model_admin = admin.site._registry[model]
        obj = model._default_manager.order_by("pk").first()
        pages = [
            ("changelist", _url(model, "changelist"), 200),
            ("add", _url(model, "add"), 200 if model_admin.has_add_permission(request) else 403),
            ("change", _url(model, "change", obj.pk), 200),
            ("history", _url(model, "history", obj.pk), 200),
        ]
        pages += [
            (
                f"delete {row.pk}",
                _url(model, "delete", row.pk),
                200 if model_admin.has_delete_permission(request, row) else 403,
            )
            for row in model._default_manager.all()
        ]
        for page, url, expected in pages:
            response = client.get(url)
            if response.status_code != expected or _dead_end(response):
                answers.append((model._meta.label, page, response.status_code, expected))
    assert answers == []


@pytest.mark.django_db
def test_every_bulk_action_answers_for_a_superuser(client, admin_user, everything):
    """Every action a changelist offers, on all its rows: a confirmation or a done, never a 500 or a
    dead end. Where the admin forbids deleting, the bulk delete is not offered at all."""
    client.force_login(admin_user)
    request = RequestFactory().get("/")
    request.user = admin_user
    answers = []
    for model in _every_registered_model():
        model_admin = admin.site._registry[model]
        actions = model_admin.get_actions(request)
        if "delete_selected" in actions and not model_admin.has_delete_permission(request):
            answers.append((model._meta.label, "delete_selected offered without the permission"))
        for action in actions:
            selected = list(model._default_manager.values_list("pk", flat=True))
            response = client.post(_url(model, "changelist"), {"action": action, "_selected_action": selected})
            if response.status_code not in (200, 302) or _dead_end(response):
                answers.append((model._meta.label, action, response.status_code))
    assert answers == []


@pytest.mark.django_db
def test_an_account_chorus_keeps_cannot_be_deleted_and_a_spare_one_can(client, admin_user, everything, make_user):
    """A worker's, a campaign owner's or an invitation's account would take labels or the invitation's
    binding with it; an account with nothing of Chorus's can go."""
    client.force_login(admin_user)
    kept = get_user_model().objects.filter(username__in=["researcher"]).get()
    worker = Label.objects.filter(worker__user__isnull=False).first().worker.user
    assert client.get(_url(get_user_model(), "delete", kept.pk)).status_code == 403
    assert client.get(_url(get_user_model(), "delete", worker.pk)).status_code == 403
    spare = make_user("spare")
    response = client.post(_url(get_user_model(), "delete", spare.pk), {"post": "yes"})
    assert response.status_code == 302
    assert not get_user_model().objects.filter(pk=spare.pk).exists()


@pytest.mark.django_db
def test_adding_a_prompt_is_refused_not_a_500(client, admin_user, everything):
    """The add form had no batch, so saving one was an IntegrityError; and a prompt without its k slots
    could never be labeled. Prompts come in through prompts_import."""
    client.force_login(admin_user)
    before = Prompt.objects.count()
    response = client.post(_url(Prompt, "add"), {"external_id": "new", "text": "Added by hand.", "group": ""})
    assert response.status_code == 403
    assert Prompt.objects.count() == before


@pytest.mark.django_db
def test_a_prompts_text_and_gold_can_be_fixed_and_gold_follows_the_schema(client, admin_user, everything):
    client.force_login(admin_user)
    prompt = Prompt.objects.order_by("pk").first()
    url = _url(Prompt, "change", prompt.pk)
    fields = {"text": "Fixed typo.", "group": "g", "gold": "true"}
    response = client.post(url, {**fields, "gold": "7"})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["gold"] == ["The label must be one of 0, 1; got 7."]
    assert client.post(url, fields).status_code == 302
    prompt.refresh_from_db()
    assert (prompt.text, prompt.group, prompt.gold) == ("Fixed typo.", "g", 1)
