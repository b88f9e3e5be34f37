"""Publications on every channel (``/api/v1/campaigns/<slug>/publications/``, ``/api/v1/publications/<id>/…``):
publish a campaign on Prolific (a draft study, published with ``"publish": true`` or ``…/publish/``), on
MTurk or as a link-based panel; read one with its places and its submissions counted by status; review
Prolific submissions; pay bonuses.

For the people who manage the campaign (owner, collaborators, staff; 404 for anybody else). Refusals
name the field (``fields``); nothing is written by a refusal.
"""

import uuid

from django.db.models import Count
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.channels import selectors, services
from annotation.channels.errors import PanelRefused, PublicationRefused
from annotation.channels.models import ProlificBonus, ProlificSubmission, Publication
from annotation.channels.options import mturk_options_clean
from annotation.channels.services import prolific
from annotation.permissions import campaign_for_request

CHANNELS = ("prolific", "mturk", "panel")


class CsvBodyParser(BaseParser):
    """A CSV request body, read as bytes by the view (``request.body``)."""

    media_type = "text/csv"

    def parse(self, stream, media_type=None, parser_context=None):
        return {}


class PublicationCreateInput(serializers.Serializer):
    channel = serializers.ChoiceField(
        choices=CHANNELS,
        help_text="prolific: a study through Prolific's API; mturk: HITs; panel: a link for any link-based panel.",
    )
    title = serializers.CharField(required=False, help_text="Prolific and MTurk: the public title.")
    description = serializers.CharField(required=False, help_text="Prolific and MTurk: shown to participants.")
    reward = serializers.CharField(
        required=False,
        help_text='Prolific: per submission, a decimal string in the account\'s currency (e.g. "1.50"). '
        "MTurk: US dollars per assignment.",
    )
    labels_per_participant = serializers.IntegerField(
        required=False, help_text="Prolific: labels each participant gives (1 to the campaign's prompts)."
    )
    estimated_minutes = serializers.IntegerField(required=False, help_text="Prolific: minutes a submission takes.")
    devices = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Prolific: subset of desktop, tablet, mobile."
    )
    filters = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="Prolific's filter objects, passed through."
    )
    auto_approve = serializers.BooleanField(
        required=False,
        help_text="Prolific: approve participants in good standing once the live audit covered their labels "
        "(default true).",
    )
    publish = serializers.BooleanField(
        required=False, default=False, help_text="Prolific: publish the study at once (else it stays a draft)."
    )
    options = serializers.DictField(
        required=False, help_text="mturk: the MTurk options (as the MTurk form); panel: the panel link's fields."
    )


class PublicationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    campaign = serializers.CharField(source="campaign.slug")
    channel = serializers.CharField(help_text="prolific, mturk, or the panel's name.")
    kind = serializers.CharField(help_text="prolific, mturk or panel.")
    status = serializers.CharField(
        help_text="draft (Prolific: created, waiting for publish), pending, publishing, published, failed, "
        "withdrawing, withdrawn."
    )
    external_id = serializers.SerializerMethodField(help_text="Prolific: the study id; MTurk: the HIT type id.")
    error = serializers.CharField(help_text="Why it failed, in words.")
    options = serializers.JSONField()
    created_at = serializers.DateTimeField()
    published_at = serializers.DateTimeField(allow_null=True)

    def get_external_id(self, publication) -> str | None:
        if publication.kind == Publication.Kind.PROLIFIC:
            return publication.prolific.study_id or None
        return publication.remote_group_id or None


class PublicationDetailOutput(PublicationOutput):
    study = serializers.SerializerMethodField(
        help_text="Prolific: the study's state, places, cost and what is pending."
    )
    submissions = serializers.SerializerMethodField(help_text="Prolific: submissions counted by Prolific status.")
    study_url = serializers.SerializerMethodField(help_text="Panels and Prolific: the link participants open.")

    def get_study(self, publication) -> dict | None:
        if publication.kind != Publication.Kind.PROLIFIC:
            return None
        study = publication.prolific
        return {
            "status": study.remote_status,
            "total_available_places": study.total_places,
            "places_taken": study.places_taken,
            "labels_per_participant": study.labels_per_participant,
            "reward_minor": study.reward_minor,
            "total_cost_minor": study.total_cost_minor,
            "auto_approve": study.auto_approve,
            "pending": study.pending,
            "synced_at": study.synced_at,
        }

    def get_submissions(self, publication) -> dict | None:
        if publication.kind != Publication.Kind.PROLIFIC:
            return None
        rows = ProlificSubmission.objects.filter(publication=publication).values("status").annotate(n=Count("id"))
        return {row["status"]: row["n"] for row in rows}

    def get_study_url(self, publication) -> str | None:
        return selectors.panel_study_url(publication=publication)


class SubmissionOutput(serializers.ModelSerializer):
    worker = serializers.CharField(
        source="worker.public_id", help_text="The worker's public id, prolific:<participant id>."
    )
    verdict = serializers.CharField(
        help_text="Chorus's verdict: waiting (for the live audit), approve, held (blocked or excluded: the "
        "researcher decides), approved, rejected; empty before review."
    )
    reviewed_by = serializers.CharField(source="reviewed_by.username", default=None)
    evidence = serializers.SerializerMethodField(help_text="Held submissions: the standing, actions and numbers.")

    class Meta:
        model = ProlificSubmission
        fields = [
            "submission_id",
            "participant_id",
            "worker",
            "status",
            "verdict",
            "rejection_category",
            "reviewed_by",
            "reviewed_at",
            "evidence",
        ]
        read_only_fields = fields

    def get_evidence(self, submission) -> dict | None:
        if submission.verdict != ProlificSubmission.Verdict.HELD:
            return None
        return prolific.prolific_evidence(publication=submission.publication, worker=submission.worker)


class ReviewInput(serializers.Serializer):
    decision = serializers.CharField(help_text="approve or reject.")
    category = serializers.CharField(required=False, default="", help_text="Reject: one of Prolific's categories.")
    message = serializers.CharField(required=False, default="", help_text="Reject: at least 100 characters.")


class BonusInput(serializers.Serializer):
    worker = serializers.CharField(help_text="prolific:<participant id> (or the participant id).")
    amount = serializers.CharField(help_text="Decimal string in the account's currency, at most CHORUS_MAX_BONUS.")
    reason = serializers.CharField(help_text="Why: kept with the bonus.")


class BonusRuleInput(serializers.Serializer):
    min_control_accuracy = serializers.FloatField(min_value=0, max_value=1)
    amount = serializers.CharField()
    reason = serializers.CharField()


class BonusOutput(serializers.ModelSerializer):
    worker = serializers.CharField(source="worker.public_id")
    amount = serializers.DecimalField(max_digits=8, decimal_places=2, coerce_to_string=True)

    class Meta:
        model = ProlificBonus
        fields = [
            "id",
            "worker",
            "submission_id",
            "amount",
            "reason",
            "key",
            "status",
            "error",
            "created_at",
            "paid_at",
        ]
        read_only_fields = fields


def _publication(request, pk) -> Publication:
    return selectors.publication_for_request(request, pk)


def _prolific(request, pk) -> Publication:
    publication = _publication(request, pk)
    if publication.kind != Publication.Kind.PROLIFIC:
        raise PublicationRefused("Only Prolific publications have this.", code="not_prolific", status=404)
    return publication


class PublicationListApi(APIView):
    @extend_schema(responses=PublicationOutput(many=True), summary="The campaign's publications, newest first")
    def get(self, request, slug):
        campaign = campaign_for_request(request, slug)
        return Response(PublicationOutput(selectors.publications_of(campaign=campaign), many=True).data)

    @extend_schema(
        request=PublicationCreateInput,
        responses={201: PublicationDetailOutput, 400: OpenApiResponse(description="A field is wrong: it is named.")},
        summary="Publish the campaign on a channel",
    )
    def post(self, request, slug):
        campaign = campaign_for_request(request, slug)
        data = PublicationCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        body = dict(data.validated_data)
        channel = body.pop("channel")
        if channel == "prolific":
            publish = body.pop("publish")
            publication = prolific.prolific_publication_create(
                campaign=campaign, user=request.user, options=request.data, publish=publish
            )
        elif channel == "mturk":
            clean = mturk_options_clean(campaign=campaign, options=body.get("options") or {})
            publication = services.publication_create_mturk(campaign=campaign, user=request.user, options=clean)
        else:
            try:
                publication = services.publication_create_panel(
                    campaign=campaign, user=request.user, **(body.get("options") or {})
                )
            except TypeError as exc:
                raise PanelRefused(f"Unknown panel option: {exc}", code="invalid") from None
        return Response(PublicationDetailOutput(publication).data, status=status.HTTP_201_CREATED)


class PublicationDetailApi(APIView):
    @extend_schema(responses=PublicationDetailOutput, summary="One publication, its places and its submissions")
    def get(self, request, pk):
        return Response(PublicationDetailOutput(_publication(request, pk)).data)


class PublicationPublishApi(APIView):
    @extend_schema(request=None, responses=PublicationDetailOutput, summary="Publish a Prolific draft study")
    def post(self, request, pk):
        publication = prolific.prolific_publish(publication=_prolific(request, pk))
        return Response(PublicationDetailOutput(publication).data)


class PublicationWithdrawApi(APIView):
    @extend_schema(request=None, responses=PublicationDetailOutput, summary="Stop recruiting on this publication")
    def post(self, request, pk):
        publication = services.publication_withdraw(publication=_publication(request, pk))
        return Response(PublicationDetailOutput(publication).data)


class SubmissionListApi(APIView):
    @extend_schema(responses=SubmissionOutput(many=True), summary="Prolific submissions with Chorus's verdict")
    def get(self, request, pk):
        publication = _prolific(request, pk)
        rows = ProlificSubmission.objects.filter(publication=publication).select_related(
            "worker", "reviewed_by", "publication"
        )
        return Response(SubmissionOutput(rows.order_by("pk"), many=True).data)


class SubmissionReviewApi(APIView):
    @extend_schema(request=ReviewInput, responses=SubmissionOutput, summary="Approve or reject a submission")
    def post(self, request, pk, submission_id):
        publication = _prolific(request, pk)
        data = ReviewInput(data=request.data)
        data.is_valid(raise_exception=True)
        submission = prolific.prolific_review(
            publication=publication, submission_id=submission_id, user=request.user, **data.validated_data
        )
        return Response(SubmissionOutput(submission).data)


class BonusListApi(APIView):
    @extend_schema(responses=BonusOutput(many=True), summary="The publication's bonuses")
    def get(self, request, pk):
        publication = _prolific(request, pk)
        rows = ProlificBonus.objects.filter(publication=publication).select_related("worker").order_by("pk")
        return Response(BonusOutput(rows, many=True).data)

    @extend_schema(
        request=BonusInput,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                location=OpenApiParameter.HEADER,
                required=False,
                description="The same key again returns the same bonus (200) and pays nothing more.",
            )
        ],
        responses={201: BonusOutput, 200: BonusOutput},
        summary="Pay one participant a bonus",
    )
    def post(self, request, pk):
        publication = _prolific(request, pk)
        data = BonusInput(data=request.data)
        data.is_valid(raise_exception=True)
        key = request.headers.get("Idempotency-Key") or f"api:{uuid.uuid4()}"
        bonus, created = prolific.prolific_bonus_grant(
            publication=publication,
            user=request.user,
            key=key,
            worker_ref=data.validated_data["worker"],
            amount=data.validated_data["amount"],
            reason=data.validated_data["reason"],
        )
        return Response(BonusOutput(bonus).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class BonusRuleApi(APIView):
    @extend_schema(
        request=BonusRuleInput, responses=BonusOutput(many=True), summary="Bonus every participant a rule picks"
    )
    def post(self, request, pk):
        publication = _prolific(request, pk)
        data = BonusRuleInput(data=request.data)
        data.is_valid(raise_exception=True)
        bonuses = prolific.prolific_bonus_rule(publication=publication, user=request.user, **data.validated_data)
        return Response(BonusOutput(bonuses, many=True).data)


class BonusCsvApi(APIView):
    parser_classes = [CsvBodyParser, MultiPartParser]

    @extend_schema(
        request={
            "text/csv": {"type": "string"},
            "multipart/form-data": {"type": "object", "properties": {"file": {"type": "string", "format": "binary"}}},
        },
        responses=BonusOutput(many=True),
        summary="Bonuses from a CSV file (worker,amount,reason): all or nothing; the same file again pays nobody twice",
    )
    def post(self, request, pk):
        publication = _prolific(request, pk)
        upload = request.FILES.get("file")
        data = upload.read() if upload is not None else request.body
        bonuses = prolific.prolific_bonus_csv(publication=publication, data=data, user=request.user)
        return Response(BonusOutput(bonuses, many=True).data)
