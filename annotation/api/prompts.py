"""A campaign's prompts for researchers: the list (search, filters, sorting, pages), one prompt with its
labels and who gave them, and retiring prompts (``prompts_retired_set``) or bringing them back.

The list's query parameters (``PromptFilters``) are the prompts page's too (annotation.views.prompts), so
the page and the API filter alike. Importing prompts is ``POST`` on the list's path (campaigns.py).
"""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.permissions import campaign_for_request
from annotation.services import prompts_retired_set
from annotation.services.controls import MAX_IDS_AT_ONCE


def _tri_state(help_text: str) -> serializers.BooleanField:
    return serializers.BooleanField(required=False, allow_null=True, default=None, help_text=help_text)


class PromptFilters(serializers.Serializer):
    """The prompts list's filters and order; an absent or empty parameter leaves its filter off."""

    search = serializers.CharField(
        required=False, allow_blank=True, max_length=200, default="", help_text="In the text or the id, any case."
    )
    group = serializers.CharField(
        required=False, allow_blank=True, max_length=200, default="", help_text="Only this group (exactly)."
    )
    complete = _tri_state("true: only the prompts with all their labels (adaptive k: stopped); false: the others.")
    contested = _tri_state("true: only the prompts whose counted labels disagree; false: the others.")
    retired = _tri_state("true: only the retired prompts; false: only those in the campaign.")
    order = serializers.ChoiceField(
        choices=list(selectors.PROMPT_ORDERS),
        default="id",
        help_text="id; labels or agreement, ascending, or descending with a leading '-' (no labels: last).",
    )


class PromptPagination(PageNumberPagination):
    # Pages by number, not a cursor: the list sorts on values that change while labels come in.
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class CampaignPromptOutput(serializers.Serializer):
    id = serializers.IntegerField(help_text="The prompt's id in Chorus (the paths' prompt_id).")
    external_id = serializers.CharField(help_text="Its id in the imported file.")
    text = serializers.CharField()
    group = serializers.CharField(allow_blank=True, help_text="The import's group (theme, context) column.")
    gold = serializers.JSONField(allow_null=True, help_text="The gold label imported with it, if any.")
    control = serializers.BooleanField(source="is_control", help_text="A control prompt: outside every k.")
    retired = serializers.SerializerMethodField(help_text="Retired: never served again, owed no labels.")
    retired_at = serializers.DateTimeField(allow_null=True, help_text="When it was retired; null if it is not.")
    status = serializers.SerializerMethodField(help_text="retired, control, complete or open.")
    n_labels = serializers.IntegerField(help_text="Its counted labels (void ones left out).")
    labels_wanted = serializers.IntegerField(
        allow_null=True, help_text="Its k (adaptive k: its own number as decided so far); null for a control."
    )
    agreement = serializers.FloatField(
        allow_null=True,
        help_text="The share of its counted labels equal to the most frequent value (compared whole and "
        "exactly); null without labels.",
    )
    contested = serializers.SerializerMethodField(help_text="Its counted labels disagree (agreement below 1).")
    entropy_bits = serializers.FloatField(
        allow_null=True,
        help_text="Shannon entropy (base 2) of its counted labels' values: 0 when unanimous, 1 for an even split "
        "of two values; null without labels, and on per-option and free-text schemas.",
    )

    def get_retired(self, prompt) -> bool:
        return prompt.retired_at is not None

    def get_status(self, prompt) -> str:
        return selectors.prompt_status(prompt)

    def get_contested(self, prompt) -> bool:
        return prompt.mode_labels < prompt.n_labels


class PromptLabelOutput(serializers.Serializer):
    label_id = serializers.IntegerField(source="pk")
    worker = serializers.CharField(source="worker.public_id", help_text="channel:id, as in the labels export.")
    channel = serializers.CharField(source="worker.channel")
    worker_external_id = serializers.CharField(source="worker.external_id", help_text="The worker's id on its channel.")
    value = serializers.JSONField(help_text="The raw value given.")
    created_at = serializers.DateTimeField()
    voided_at = serializers.DateTimeField(allow_null=True, help_text="Set on a void label: it does not count.")
    void_reason = serializers.CharField(allow_blank=True)


class CampaignPromptDetailOutput(CampaignPromptOutput):
    options = serializers.JSONField(help_text="Per-option schemas: the prompt's answer options.")
    labels = PromptLabelOutput(
        many=True, source="labels_given", help_text="Every label given, void ones included, oldest first."
    )


class PromptListMixin:
    """``GET`` on the prompts' path; ``PromptImportApi`` (campaigns.py) adds the import (``POST``)."""

    pagination_class = PromptPagination

    @extend_schema(parameters=[PromptFilters], responses={200: CampaignPromptOutput(many=True)})
    def get(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        filters = PromptFilters(data=request.query_params)
        filters.is_valid(raise_exception=True)
        prompts = selectors.campaign_prompts(campaign=campaign, **filters.validated_data)
        paginator = self.pagination_class()
        page = selectors.prompts_entropy(
            campaign=campaign, prompts=paginator.paginate_queryset(prompts, request, view=self)
        )
        return paginator.get_paginated_response(CampaignPromptOutput(page, many=True).data)


class PromptDetailApi(APIView):
    @extend_schema(responses={200: CampaignPromptDetailOutput})
    def get(self, request, slug: str, prompt_id: int):
        campaign = campaign_for_request(request, slug)
        prompt = selectors.campaign_prompt(campaign=campaign, prompt_id=prompt_id)
        prompt.labels_given = selectors.prompt_labels(prompt=prompt)
        selectors.prompts_entropy(campaign=campaign, prompts=[prompt])
        return Response(CampaignPromptDetailOutput(prompt).data)


class PromptRetireApi(APIView):
    """Retire prompts (``retired`` true, bound in urls.py), or bring them back, all or none: only prompts
    without counted labels, in a launched campaign that is not closed; 400 names each id at fault."""

    retired: bool = True

    class InputSerializer(serializers.Serializer):
        prompts = serializers.ListField(
            # The largest id a row can have (BigAutoField): a larger number is a 400, not the database's error.
            child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
            min_length=1,
            max_length=MAX_IDS_AT_ONCE,
            help_text="The prompts' ids in Chorus (the list's id).",
        )

    class OutputSerializer(serializers.Serializer):
        changed = serializers.ListField(child=serializers.IntegerField())
        unchanged = serializers.ListField(child=serializers.IntegerField(), help_text="Already as asked.")

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer})
    def post(self, request, slug: str):
        campaign = campaign_for_request(request, slug)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = prompts_retired_set(campaign=campaign, prompt_ids=data.validated_data["prompts"], retired=self.retired)
        return Response(self.OutputSerializer(result).data)
