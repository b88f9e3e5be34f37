"""Answer clusterings of a free-text campaign's prompts, for a token client: what the workspace page
(``audits.views.clustering``) shows and saves, and the ProtoQA JSONL export.

The versions listed are those the user may see (double-blind, ``visible_clusterings``). A save goes
through ``clustering_save`` with its rules: ProtoQA's roles (under the campaign's single clustering
protocol, every save takes the role adjudicated and is final), and a save based on anything but the
lane's current version is refused with 409 ``stale_version`` (nothing saved; reload and redo). Other
refusals are 400s. Managers only (``campaign_for_request``: 404 for anyone else; 403 for a viewer's
POST).
"""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Campaign, Prompt
from annotation.permissions import campaign_for_request
from audits.models import AnswerClustering
from audits.selectors import clustering as selectors
from audits.services import clustering as services
from audits.views.clustering import answers_document

Role = AnswerClustering.Role


class StaleVersion(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = services.STALE


class VersionOutput(serializers.ModelSerializer):
    author = serializers.CharField(source="author.username", default=None)
    n_clusters = serializers.IntegerField()

    class Meta:
        model = AnswerClustering
        fields = [
            "id",
            "role",
            "version",
            "author",
            "created_at",
            "based_on",
            "note",
            "n_clusters",
            "assignment",
            "invalid",
        ]
        read_only_fields = fields


class Answer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The label's id: the key of an assignment.")
    answer = serializers.CharField()


class ClusteringsOutput(serializers.Serializer):
    role = serializers.ChoiceField(
        choices=Role.choices,
        help_text="The role your saves take on this prompt (always adjudicated under the single clustering protocol).",
    )
    base_version = serializers.IntegerField(help_text="Your lane's current version (0: none): send it with a save.")
    answers = Answer(many=True)
    versions = VersionOutput(many=True, help_text="Every version you may see, oldest first.")


class SaveInput(serializers.Serializer):
    role = serializers.ChoiceField(choices=[Role.INDEPENDENT, Role.ADJUDICATED])
    base_version = serializers.IntegerField(min_value=0, help_text="The version of your lane you edited (0: none).")
    based_on = serializers.IntegerField(
        required=False, allow_null=True, help_text="The id of the version your edit started from, when another."
    )
    assignment = serializers.DictField(child=serializers.CharField(allow_blank=True), help_text="{label id: cluster}.")
    invalid = serializers.ListField(
        child=serializers.IntegerField(), default=list, help_text="Label ids judged invalid."
    )


class AdjudicateInput(SaveInput):
    role = None  # the route says it


def _saved(save, **kwargs) -> AnswerClustering:
    """``save(**kwargs)`` (a clustering service); its stale-version refusal becomes a 409, the other
    refusals stay 400s (the API's handler)."""
    try:
        return save(**kwargs)
    except DjangoValidationError as error:
        if any(e.code == services.STALE for e in getattr(error, "error_list", ())):
            raise StaleVersion(" ".join(error.messages)) from error
        raise


def _prompt(request, slug: str, external_id: str) -> Prompt:
    campaign = campaign_for_request(request, slug)
    return get_object_or_404(Prompt, campaign=campaign, external_id=external_id, is_control=False)


class ClusteringListApi(APIView):
    """A prompt's clustering versions as the workspace shows them, and saving a new version."""

    role = None  # fixed by the adjudicate route; else the body's

    @extend_schema(responses={200: ClusteringsOutput})
    def get(self, request, slug: str, external_id: str):
        prompt = _prompt(request, slug, external_id)
        clusterings = selectors.prompt_clusterings(prompt=prompt)
        role = selectors.workspace_role(clusterings=clusterings, user=request.user)
        lane = clusterings.lane(role=role, author_id=request.user.pk)
        out = {
            "role": role,
            "base_version": lane.version if lane else 0,
            "answers": [{"id": pk, "answer": value} for pk, value in selectors.prompt_answers(prompt=prompt)],
            "versions": selectors.visible_clusterings(clusterings=clusterings, user=request.user)["history"],
        }
        return Response(ClusteringsOutput(out).data)

    @extend_schema(request=SaveInput, responses={201: VersionOutput})
    def post(self, request, slug: str, external_id: str):
        prompt = _prompt(request, slug, external_id)
        data = (AdjudicateInput if self.role else SaveInput)(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        based_on = fields.get("based_on")
        if based_on is not None:
            based_on = get_object_or_404(AnswerClustering, prompt=prompt, pk=based_on)
        clustering = _saved(
            services.clustering_save,
            prompt=prompt,
            by=request.user,
            role=self.role or fields["role"],
            assignment=fields["assignment"],
            invalid=fields["invalid"],
            base_version=fields["base_version"],
            based_on=based_on,
        )
        return Response(VersionOutput(clustering).data, status=status.HTTP_201_CREATED)


class ClusteringAdjudicateApi(ClusteringListApi):
    """Save the prompt's final (adjudicated) clustering: a save with the role adjudicated."""

    role = Role.ADJUDICATED
    http_method_names = ["post", "options"]

    @extend_schema(request=AdjudicateInput, responses={201: VersionOutput})
    def post(self, request, slug: str, external_id: str):
        return super().post(request, slug, external_id)


class RevertInput(serializers.Serializer):
    base_version = serializers.IntegerField(min_value=0, help_text="Your lane's current version, as listed.")


class ClusteringRevertApi(APIView):
    """Make an earlier version of your lane current again, as a new version (the workspace's revert)."""

    @extend_schema(request=RevertInput, responses={201: VersionOutput})
    def post(self, request, slug: str, external_id: str, clustering_id: int):
        prompt = _prompt(request, slug, external_id)
        target = get_object_or_404(AnswerClustering, prompt=prompt, pk=clustering_id)
        data = RevertInput(data=request.data)
        data.is_valid(raise_exception=True)
        reverted = _saved(services.clustering_revert, clustering=target, by=request.user, **data.validated_data)
        return Response(VersionOutput(reverted).data, status=status.HTTP_201_CREATED)


class ProposalOutput(serializers.Serializer):
    proposal = VersionOutput(allow_null=True, help_text="The current proposal; null for a prompt without answers.")


class ClusteringProposeApi(APIView):
    """The engine's proposal for the prompt, made unless the current one covers its answers already
    (the workspace's "Propose")."""

    @extend_schema(request=None, responses={200: ProposalOutput})
    def post(self, request, slug: str, external_id: str):
        proposal = services.clustering_propose(prompt=_prompt(request, slug, external_id))
        return Response(ProposalOutput({"proposal": proposal}).data)


class AnswersExportApi(APIView):
    """The final clusterings in ProtoQA's crowdsourced JSONL format (the answers page's export)."""

    @extend_schema(responses={(200, "application/jsonl"): OpenApiResponse(OpenApiTypes.STR)})
    def get(self, request, slug: str):
        return answers_document(campaign_for_request(request, slug))


class NoiseOutput(serializers.Serializer):
    n_answers = serializers.IntegerField()
    n_invalid = serializers.IntegerField()
    n_clusters = serializers.IntegerField()
    top_share = serializers.FloatField(allow_null=True, help_text="The largest cluster's share of valid answers.")
    entropy_bits = serializers.FloatField(allow_null=True, help_text="Shannon entropy of the clusters, in bits.")
    invalid_share = serializers.FloatField(allow_null=True)
    reason = serializers.CharField(allow_null=True, help_text="Why a number is null.")


class OverviewRowOutput(serializers.Serializer):
    prompt = serializers.CharField(source="prompt.external_id")
    n_answers = serializers.IntegerField()
    n_distinct = serializers.IntegerField(help_text="Distinct answers as typed.")
    adjudicated = serializers.SerializerMethodField(help_text="Whether an adjudicated clustering exists.")
    final = serializers.SerializerMethodField(
        help_text="Whether the prompt's clustering is final, so its systems are scored: adjudicated, or under the "
        "single clustering protocol saved by a researcher."
    )
    agreement = serializers.JSONField(
        allow_null=True, help_text="The two independent clusterings' BLANC and adjusted Rand index, once both exist."
    )
    noise = NoiseOutput(
        allow_null=True, help_text="From the final clustering, else your own independent one, else Chorus's proposal."
    )
    noise_source = serializers.CharField(
        help_text='"final", "yours" (your independent clustering, not final yet), "proposal", '
        'or "" (no clustering yet).'
    )
    passes_filter = serializers.BooleanField(
        allow_null=True, help_text="ProtoQA's quality filter: the top 8 clusters hold at least 85 % of the answers."
    )

    def get_adjudicated(self, row) -> bool:
        return row.clusterings.adjudicated is not None

    def get_final(self, row) -> bool:
        return row.clusterings.final is not None


class OverviewOutput(serializers.Serializer):
    rows = OverviewRowOutput(many=True)
    clustering_protocol = serializers.ChoiceField(
        choices=Campaign.ClusteringProtocol.choices,
        help_text="The campaign's: double_blind (two independent clusterings, then adjudication) or single (a "
        "researcher's save is final; no agreement is measured).",
    )
    n_adjudicated = serializers.IntegerField()
    n_final = serializers.IntegerField(help_text="Prompts whose clustering is final (see a row's final).")
    mean_blanc = serializers.FloatField(allow_null=True)
    mean_adjusted_rand = serializers.FloatField(allow_null=True)
    summary = serializers.SerializerMethodField(
        help_text="The campaign's answer noise: per number its mean, median and quartiles, the most divided "
        "prompts and those failing ProtoQA's filter; null before any clustering."
    )

    def get_summary(self, overview) -> dict | None:
        summary = overview["summary"]
        if summary is None:
            return None
        return {
            "n_prompts": summary.n_prompts,
            "distribution": summary.distribution,
            "most_divided": [
                {"prompt": prompt, "entropy_bits": entropy, "top_share": top}
                for prompt, entropy, top in summary.most_divided
            ],
            "failing_filter": list(summary.failing_filter),
        }


class ProposedOutput(serializers.Serializer):
    proposed = serializers.IntegerField(
        help_text="Prompts with answers, each now with a proposal covering them (new or already current)."
    )


class AnswersOverviewApi(APIView):
    @extend_schema(
        responses={200: OverviewOutput}, summary="The answers page: every prompt's clustering status and noise"
    )
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        return Response(OverviewOutput(selectors.answers_overview(campaign=campaign, user=request.user)).data)

    @extend_schema(request=None, responses={200: ProposedOutput}, summary="Propose clusters for every prompt")
    def post(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        return Response({"proposed": services.clustering_propose_all(campaign=campaign)})
