"""``manage.py import_study LABELS --owner USER --title T [--prompts FILE] [schema options]``: a labels file
collected elsewhere as an imported study (``annotation.services.studies``), for files over the web
upload's limit (``CHORUS_MAX_IMPORT_BYTES``)."""

import json

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotation.importing import PromptFileError
from annotation.schemas import CONTINUOUS
from annotation.services.studies import study_import


class Command(BaseCommand):
    help = "Import a labels file collected elsewhere as a closed, read-only campaign (an imported study)."

    def add_arguments(self, parser):
        parser.add_argument("labels", help="labels file: CSV (header), TSV or JSONL with worker, prompt, value")
        parser.add_argument("--prompts", help="prompts file with prompt, text (optional gold, group)")
        parser.add_argument("--owner", required=True, help="username of the researcher who owns the study")
        parser.add_argument("--title", required=True)
        parser.add_argument("--schema", default="binary", help="binary, rating or free_text")
        parser.add_argument("--scale-min", type=int)
        parser.add_argument("--scale-max", type=int)
        parser.add_argument("--scale-step", help='rating schemas: 1, 0.5, 0.1 … or "continuous" (default 1)')
        parser.add_argument("--binarization", help='rating schemas: JSON map raw value → 0/1, e.g. {"1": 0, "4": 1}')

    def handle(self, *args, **options):
        owner = get_user_model().objects.filter(username=options["owner"]).first()
        if owner is None:
            raise CommandError(f"No user {options['owner']!r}.")
        fields = {"schema": options["schema"]}
        for name in ("scale_min", "scale_max"):
            if options[name] is not None:
                fields[name] = options[name]
        if options["scale_step"]:
            step = options["scale_step"].strip().lower()
            try:
                fields["scale_step"] = None if step == CONTINUOUS else float(step)
            except ValueError as exc:
                raise CommandError(f'--scale-step: a number or "{CONTINUOUS}", not {step!r}') from exc
        if options["binarization"]:
            try:
                fields["binarization"] = json.loads(options["binarization"])
            except ValueError as exc:
                raise CommandError(f"--binarization: not JSON ({exc})") from exc
        try:
            imported = study_import(
                owner=owner,
                title=options["title"],
                labels_path=options["labels"],
                labels_name=options["labels"].rsplit("/", 1)[-1],
                prompts_path=options["prompts"],
                **fields,
            )
        except (PromptFileError, ValidationError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"{imported.campaign.slug}: {imported.n_labels} labels of {imported.n_workers} workers on "
            f"{imported.n_prompts} prompts (k = {imported.campaign.k}); "
            f"{imported.n_empty} rows without a value skipped."
        )
