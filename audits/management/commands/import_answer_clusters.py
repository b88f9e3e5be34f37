"""``python manage.py import_answer_clusters SLUG FILE``: expert answer clusters in ProtoQA's crowdsourced
JSONL (``answers.clusters``) as the final clusterings of a free-text campaign's prompts, matched by
question id — after ``import_protoqa FILE``, the dev set's expert clusters for its campaign."""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotation.models import Campaign
from annotation.protoqa_files import ProtoQAFileError, protoqa_clusters
from audits.services import expert_clusters_import


class Command(BaseCommand):
    help = (
        "Import expert answer clusters (ProtoQA's crowdsourced JSONL) as the adjudicated clusterings of a "
        "free-text campaign's prompts, by question id. All of the file or nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", help="the free-text campaign")
        parser.add_argument("path", type=Path, help="ProtoQA's crowdsourced JSONL file")
        parser.add_argument("--by", help="the researcher recorded as adjudicator (default: the campaign's owner)")

    def handle(self, *args, slug: str, path: Path, by: str | None, **options):
        campaign = Campaign.objects.filter(slug=slug).first()
        if campaign is None:
            raise CommandError(f"No campaign {slug!r}.")
        if campaign.schema != Campaign.Schema.FREE_TEXT:
            raise CommandError(f"{slug} is not a free-text campaign: answer clusters belong to free-text answers.")
        user = get_user_model().objects.filter(username=by).first() if by else campaign.owner
        if user is None:
            raise CommandError(f"No user {by!r}.")
        try:
            n = expert_clusters_import(campaign=campaign, clusters=protoqa_clusters(path), by=user)
        except ProtoQAFileError as exc:
            lines = "\n".join(f"  line {line}: {problem}" if line else f"  {problem}" for line, problem in exc.errors)
            raise CommandError(f"Nothing was imported from {path}:\n{lines}") from exc
        except ValidationError as exc:
            raise CommandError(
                f"Nothing was imported from {path}:\n" + "\n".join(f"  {m}" for m in exc.messages)
            ) from exc
        self.stdout.write(self.style.SUCCESS(f"Imported the final clusters of {n} prompts into {slug}."))
