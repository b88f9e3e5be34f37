from django.apps import AppConfig


class ChannelsConfig(AppConfig):
    """Publishing channels (MTurk, link-based panels) on top of the one assignment engine."""

    name = "annotation.channels"
    label = "channels"
    verbose_name = "Publishing channels"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from annotation.channels import receivers, registry  # noqa: F401, PLC0415 (ready(): connects the receivers)
