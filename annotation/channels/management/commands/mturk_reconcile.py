"""``manage.py mturk_reconcile [--publication ID ...]``: reconcile MTurk publications now (the same work
as the periodic Celery task), printing what was done."""

from django.core.management.base import BaseCommand, CommandError

from annotation.channels.base import ChannelError
from annotation.channels.models import Publication
from annotation.channels.selectors import publications_to_reconcile
from annotation.channels.services import mturk_reconcile


class Command(BaseCommand):
    help = "Approve, reject, refill, pay bonuses and extend or expire HITs of MTurk publications."

    def add_arguments(self, parser):
        parser.add_argument(
            "--publication",
            type=int,
            action="append",
            dest="publications",
            metavar="ID",
            help="Only this publication (repeatable). Default: every open MTurk publication.",
        )

    def handle(self, *args, publications=None, **options):
        if publications:
            found = set(
                Publication.objects.filter(pk__in=publications, kind=Publication.Kind.MTURK).values_list(
                    "pk", flat=True
                )
            )
            missing = sorted(set(publications) - found)
            if missing:
                raise CommandError(f"No MTurk publication with id {', '.join(map(str, missing))}.")
            ids = sorted(found)
        else:
            ids = list(publications_to_reconcile().values_list("pk", flat=True))
        failed = 0
        for publication_id in ids:
            try:
                report = mturk_reconcile(publication_id=publication_id)
            except ChannelError as exc:
                failed += 1
                self.stderr.write(f"publication {publication_id}: {exc.message}")
                continue
            self.stdout.write(str(report))
        if not ids:
            self.stdout.write("No open MTurk publication.")
        if failed:
            raise CommandError(f"{failed} publication(s) could not be reconciled; run again later.")
