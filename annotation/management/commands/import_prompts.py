from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation import services
from annotation.importing import PromptFileError
from annotation.models import Campaign


class Command(BaseCommand):
    help = "Import prompts (CSV or JSONL) into a campaign: all of the file, or nothing."

    def add_arguments(self, parser):
        parser.add_argument("campaign", help="the campaign's slug")
        parser.add_argument("file", type=Path, help="a .csv or .jsonl file")

    def handle(self, *args, campaign: str, file: Path, **options):
        try:
            target = Campaign.objects.get(slug=campaign)
        except Campaign.DoesNotExist as exc:
            raise CommandError(f"No campaign with slug {campaign!r}.") from exc
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from exc
        try:
            batch = services.prompts_import(campaign=target, data=data, filename=file.name)
        except PromptFileError as exc:
            lines = "\n".join(f"  line {line}: {problem}" if line else f"  {problem}" for line, problem in exc.errors)
            raise CommandError(f"Nothing was imported from {file}:\n{lines}") from exc
        self.stdout.write(self.style.SUCCESS(f"Imported {batch.n_prompts} prompts into {target.slug} from {file}."))
