from django.apps import AppConfig
from django.core.management import call_command
from django.db.models.signals import post_migrate


def _create_cache_tables(sender, *, using, verbosity, **kwargs):
    """The embedded default's cache lives in the database (audit debouncing and the sign-in throttle
    share it across processes). Creating its table after every ``migrate`` means each documented way
    to set Chorus up (``migrate`` alone included) gives a working sign-in; the command does nothing
    for a cache that is not a database cache, or whose table exists."""
    # Quiet at migrate's default verbosity: "Cache table already exists" after every migrate is noise.
    call_command("createcachetable", database=using, verbosity=verbosity if verbosity > 1 else 0)


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation"

    def ready(self):
        # Once per migrate run: post_migrate is sent for every app, this sender is ours alone.
        post_migrate.connect(_create_cache_tables, sender=self)
        # Imported here: services import models, which need the app registry this method runs after.
        from annotation.services.activity import analysis_receive  # noqa: PLC0415 (registry first)
        from annotation.services.rule_actions import worker_actions_receive  # noqa: PLC0415 (registry first)
        from audits.hook import analysis_recorded, worker_actions_due  # noqa: PLC0415 (registry first)

        # The live audit's quality rules decide; this app acts (audits.services.worker_rules says why).
        worker_actions_due.connect(worker_actions_receive, dispatch_uid="annotation.rule_actions")
        # The audit's stored analyses (clusterings) go in the campaign's activity log, which is this app's.
        analysis_recorded.connect(analysis_receive, dispatch_uid="annotation.activity")
