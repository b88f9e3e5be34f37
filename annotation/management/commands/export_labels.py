from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.exporting import BINARY_FORMATS, FORMATS, export_chunks
from annotation.models import Campaign


class Command(BaseCommand):
    help = "Write a campaign's labels as CSV, JSONL or Parquet (one row per label; per-option labels: one per option)."

    def add_arguments(self, parser):
        parser.add_argument("campaign", help="the campaign's slug")
        parser.add_argument("--format", choices=list(FORMATS), default="csv", dest="fmt")
        parser.add_argument("--output", type=Path, help="file to write (default: standard output)")
        parser.add_argument(
            "--pseudonymize", action="store_true", help="replace worker ids by a keyed hash (stable per worker)"
        )

    def handle(self, *args, campaign: str, fmt: str, output: Path | None, pseudonymize: bool, **options):
        try:
            target = Campaign.objects.get(slug=campaign)
        except Campaign.DoesNotExist as exc:
            raise CommandError(f"No campaign with slug {campaign!r}.") from exc
        binary = fmt in BINARY_FORMATS
        if binary and output is None:
            # A binary file on a terminal is garbage, and self.stdout only takes text.
            raise CommandError(f"--format {fmt} writes a binary file: give it an --output path.")
        chunks = export_chunks(campaign=target, fmt=fmt, pseudonymize=pseudonymize)
        if output is None:
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
            return
        try:
            with output.open("wb") if binary else output.open("w", encoding="utf-8", newline="") as handle:
                for chunk in chunks:
                    handle.write(chunk)
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror}.") from exc
        self.stderr.write(f"Wrote the labels of {target.slug} to {output}.")
