from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    """Outbound webhooks: Chorus tells a researcher's endpoint when something happens in a campaign."""

    name = "annotation.webhooks"
    label = "webhooks"
    verbose_name = "Outbound webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from annotation.webhooks import receivers  # noqa: F401, PLC0415 (ready(): connects the receivers)
