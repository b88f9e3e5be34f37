"""The instrument card for a token client: the same document as the page's ``card.json``
(``audits.selectors.card.instrument_card``), with reproducibility against ``?compare=<slug>``, and
the page's exports (``card.md``, ``card.json``, ``card.html``, rendered by ``audits.views.card``).

Managers only (``campaign_for_user``: 404 for anyone else). ``compare`` must be one of the
campaigns the page's picker offers (``comparable_campaigns``); anything else is a 400 naming it.
"""

from csp.decorators import csp
from django.utils.decorators import method_decorator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.permissions import campaign_for_request
from audits.selectors.card import comparable_campaigns, instrument_card
from audits.views.card import EXPORT_FORMATS, EXPORT_POLICY, card_document


class CardQuery(serializers.Serializer):
    compare = serializers.CharField(
        required=False,
        help_text="The slug of another campaign of yours sharing prompts with this one: adds reproducibility.",
    )


def _card(request, slug: str):
    """The campaign and its card, with ``?compare`` checked against the picker's choices."""
    campaign = campaign_for_request(request, slug)
    query = CardQuery(data=request.query_params)
    query.is_valid(raise_exception=True)
    compare = None
    if wanted := query.validated_data.get("compare"):
        choices = {c.slug: c for c in comparable_campaigns(campaign=campaign, user=request.user)}
        if wanted not in choices:
            raise serializers.ValidationError(
                {"compare": ["No campaign of yours with that slug shares prompts with this one."]}
            )
        compare = choices[wanted]
    return campaign, instrument_card(campaign=campaign, compare=compare)


class CardApi(APIView):
    """The instrument card as JSON: the page's ``card.json`` document."""

    @extend_schema(parameters=[CardQuery], responses={200: OpenApiTypes.OBJECT})
    def get(self, request, slug: str):
        _, card = _card(request, slug)
        return Response(card)


class CardExportApi(APIView):
    """The card as the page exports it: Markdown, JSON or one self-contained HTML file (a download)."""

    fmt: str = ""  # bound in urls.py: one of EXPORT_FORMATS

    # The page's policy for its exports: a downloaded card opened in a browser loads nothing.
    @method_decorator(csp(EXPORT_POLICY))
    @extend_schema(
        parameters=[CardQuery],
        responses={(200, media.split(";")[0]): OpenApiResponse(OpenApiTypes.STR) for media in EXPORT_FORMATS.values()},
    )
    def get(self, request, slug: str):
        campaign, card = _card(request, slug)
        return card_document(campaign, card, self.fmt)
