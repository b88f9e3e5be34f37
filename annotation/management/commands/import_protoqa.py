import hashlib
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils.text import slugify

from annotation.protoqa_files import ProtoQAFileError, protoqa_read
from annotation.services import ServiceError
from annotation.services.protoqa_import import protoqa_import


class Command(BaseCommand):
    help = (
        "Import ProtoQA's crowdsourced answers (dev.crowdsourced.jsonl) as a closed free-text campaign: one prompt "
        "per question, one label per raw answer. All of the file or nothing; a second run changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="ProtoQA's crowdsourced JSONL file")
        parser.add_argument("--slug", help="the campaign's slug (default: protoqa-<file name>)")
        parser.add_argument("--owner", help="the owning researcher's username (default: the first superuser)")

    def handle(self, *args, path: Path, slug: str | None, owner: str | None, **options):
        users = get_user_model().objects
        user = users.filter(username=owner).first() if owner else users.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            raise CommandError(f"No user {owner!r}." if owner else "No superuser to own the campaign: pass --owner.")
        slug = slug or slugify(f"protoqa-{path.name.split('.')[0]}")
        try:
            questions = protoqa_read(path)
            result = protoqa_import(
                questions=questions,
                owner=user,
                slug=slug,
                filename=path.name,
                sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
            )
        except ProtoQAFileError as exc:
            lines = "\n".join(f"  line {line}: {problem}" if line else f"  {problem}" for line, problem in exc.errors)
            raise CommandError(f"Nothing was imported from {path}:\n{lines}") from exc
        except ServiceError as exc:
            raise CommandError(f"Nothing was imported from {path}: {exc.message}") from exc
        if not result.created:
            self.stdout.write(f"{path} is already campaign {slug}: nothing changed.")
            return
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {result.n_prompts} questions and {result.n_labels} answers into {slug} "
                f"(k = {result.campaign.k})."
            )
        )
