"""Outbound webhook endpoints (``/api/v1/webhooks/…``): register, list, change, delete, rotate the
secret, send a test event, read the delivery log. Each researcher sees only their own endpoints (404
for anybody else's); an endpoint for one campaign needs the right to manage it."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.selectors import campaign_for_user
from annotation.webhooks import selectors, services
from annotation.webhooks.models import Delivery, Endpoint

EVENTS_HELP = "Events to receive: " + ", ".join(Endpoint.Event.values) + "."
THRESHOLDS_HELP = (
    "audit.threshold_crossed: {metric: value}, metric one of "
    + ", ".join(services.METRICS)
    + " (noise numbers 0 to 1, "
    "alpha -1 to 1); an event each time the newest value crosses it, in either direction."
)


class EndpointInput(serializers.Serializer):
    url = serializers.CharField(help_text="http(s) URL; loopback, private and link-local addresses are refused.")
    events = serializers.ListField(child=serializers.CharField(), help_text=EVENTS_HELP)
    campaign = serializers.CharField(required=False, allow_null=True, help_text="A campaign's slug; absent: all yours.")
    thresholds = serializers.DictField(child=serializers.FloatField(), required=False, help_text=THRESHOLDS_HELP)


class EndpointPatch(serializers.Serializer):
    url = serializers.CharField(required=False)
    events = serializers.ListField(child=serializers.CharField(), required=False, help_text=EVENTS_HELP)
    thresholds = serializers.DictField(child=serializers.FloatField(), required=False, help_text=THRESHOLDS_HELP)
    enabled = serializers.BooleanField(required=False, help_text="true enables a disabled endpoint again.")


class EndpointOutput(serializers.ModelSerializer):
    campaign = serializers.CharField(source="campaign.slug", default=None)
    disabled_reason = serializers.CharField(help_text="Why Chorus disabled it (deliveries kept failing).")

    class Meta:
        model = Endpoint
        fields = [
            "id",
            "url",
            "campaign",
            "events",
            "thresholds",
            "enabled",
            "disabled_reason",
            "consecutive_failures",
            "created_at",
        ]
        read_only_fields = fields


class EndpointWithSecret(EndpointOutput):
    secret = serializers.CharField(help_text="Signs every delivery (X-Chorus-Signature); shown only now.")

    class Meta(EndpointOutput.Meta):
        fields = [*EndpointOutput.Meta.fields, "secret"]
        read_only_fields = fields


class DeliveryOutput(serializers.ModelSerializer):
    class Meta:
        model = Delivery
        fields = [
            "event_id",
            "event_type",
            "status",
            "attempts",
            "last_status_code",
            "last_error",
            "created_at",
            "delivered_at",
            "payload",
        ]
        read_only_fields = fields


class DeliveryPagination(CursorPagination):
    ordering = "-created_at"
    page_size = 100


class EndpointListApi(APIView):
    @extend_schema(responses=EndpointOutput(many=True), summary="Your webhook endpoints")
    def get(self, request):
        return Response(EndpointOutput(selectors.endpoints_of(user=request.user), many=True).data)

    @extend_schema(request=EndpointInput, responses={201: EndpointWithSecret}, summary="Register an endpoint")
    def post(self, request):
        data = EndpointInput(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        slug = fields.pop("campaign", None)
        campaign = campaign_for_user(user=request.user, slug=slug) if slug else None
        endpoint = services.endpoint_create(user=request.user, campaign=campaign, **fields)
        return Response(EndpointWithSecret(endpoint).data, status=status.HTTP_201_CREATED)


class EndpointDetailApi(APIView):
    @extend_schema(responses=EndpointOutput, summary="One endpoint")
    def get(self, request, pk):
        return Response(EndpointOutput(selectors.endpoint_for_owner(user=request.user, pk=pk)).data)

    @extend_schema(request=EndpointPatch, responses=EndpointOutput, summary="Change an endpoint")
    def patch(self, request, pk):
        endpoint = selectors.endpoint_for_owner(user=request.user, pk=pk)
        data = EndpointPatch(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(EndpointOutput(services.endpoint_update(endpoint=endpoint, **data.validated_data)).data)

    @extend_schema(responses={204: None}, summary="Delete an endpoint and its log")
    def delete(self, request, pk):
        services.endpoint_delete(endpoint=selectors.endpoint_for_owner(user=request.user, pk=pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class EndpointRotateApi(APIView):
    @extend_schema(request=None, responses=EndpointWithSecret, summary="A new secret (the old one stops signing)")
    def post(self, request, pk):
        endpoint = services.endpoint_rotate_secret(endpoint=selectors.endpoint_for_owner(user=request.user, pk=pk))
        return Response(EndpointWithSecret(endpoint).data)


class EndpointTestApi(APIView):
    @extend_schema(request=None, responses={202: DeliveryOutput}, summary="Send a test (ping) event now")
    def post(self, request, pk):
        delivery = services.endpoint_test(endpoint=selectors.endpoint_for_owner(user=request.user, pk=pk))
        return Response(DeliveryOutput(delivery).data, status=status.HTTP_202_ACCEPTED)


class DeliveryListApi(APIView):
    @extend_schema(responses=DeliveryOutput(many=True), summary="The endpoint's delivery log, newest first")
    def get(self, request, pk):
        endpoint = selectors.endpoint_for_owner(user=request.user, pk=pk)
        paginator = DeliveryPagination()
        page = paginator.paginate_queryset(selectors.deliveries_of(endpoint=endpoint), request, view=self)
        return paginator.get_paginated_response(DeliveryOutput(page, many=True).data)
