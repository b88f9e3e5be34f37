from django.contrib import admin

from annotation.admin import ReadOnlyAdmin
from annotation.webhooks.models import Delivery, Endpoint, WebhookCursor


@admin.register(Endpoint)
class EndpointAdmin(ReadOnlyAdmin):
    list_display = ["url", "owner", "campaign", "enabled", "consecutive_failures", "created_at"]
    list_filter = ["enabled"]
    exclude = ["secret"]  # shown once, to its owner


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = ["event_type", "endpoint", "status", "attempts", "last_status_code", "created_at", "delivered_at"]
    list_filter = ["status", "event_type"]


@admin.register(WebhookCursor)
class WebhookCursorAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "label_id", "action_id", "completed_sent", "scanned_at"]
