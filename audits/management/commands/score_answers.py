"""``python manage.py score_answers TARGETS PREDICTIONS``: ProtoQA scores of ranked free-text answers.

A thin wrapper over :mod:`audits.engine.protoqa_scoring`: Max Answers@k and Max Incorrect@k of a
predictions file against crowdsourced answer clusters, and ``probeval_kl`` when a samples file is
given. Every target question is scored; one the predictions (or samples) leave out is scored on an
empty list, with a warning on stderr. A malformed file, a question id the targets lack, or WordNet
matching without a WordNet database stops with a one-line message and exit code 2.
"""

from __future__ import annotations

import json
import math

from django.core.management.base import BaseCommand, CommandError

from audits.engine.protoqa_scoring import (
    ProtoQAFormatError,
    WordNetUnavailable,
    read_answers,
    read_targets,
    score_protoqa,
)
from audits.engine.wordnet import reader as wordnet_reader

#: argparse's own usage errors exit with 2; a bad file does the same
EXIT_BAD_INPUT = 2


def _fmt(value) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4f}"


def render_markdown(result: dict) -> str:
    """A short table: the mean of each metric over the questions."""
    lines = [
        "# ProtoQA scores",
        "",
        f"{result['n_questions']} questions, {result['matching']} matching (means over questions).",
        "",
        "| metric | score |",
        "| --- | ---: |",
    ]
    lines += [f"| {key} | {_fmt(value)} |" for key, value in result["metrics"].items()]
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Score ranked free-text answers against ProtoQA answer clusters (Max Answers@k, Max Incorrect@k, KL)."
    # Files in, scores out: no database, URLs or models (see the audit command).
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("targets", help="crowdsourced targets JSONL (metadata.id, question, answers.clusters)")
        parser.add_argument("predictions", help="ranked answers: {question_id: [answers]} as JSON or JSONL")
        parser.add_argument("--samples", help="sampled answers, same shapes: adds probeval_kl")
        parser.add_argument("--format", choices=["json", "markdown"], default="json")
        parser.add_argument(
            "--matching",
            choices=["exact", "wordnet"],
            default="exact",
            help="exact (normalised strings, default) or wordnet (ProtoQA's WordNet synonyms, offline)",
        )

    def handle(self, *args, **opts):
        try:
            if opts["matching"] == "wordnet":
                wordnet_reader()  # fail before reading files, with the reason
            targets = read_targets(opts["targets"])
            predictions = read_answers(opts["predictions"], known_ids=targets)
            samples = read_answers(opts["samples"], known_ids=targets) if opts["samples"] else None
        except (ProtoQAFormatError, WordNetUnavailable) as exc:
            raise CommandError(str(exc), returncode=EXIT_BAD_INPUT) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read input: {exc}", returncode=EXIT_BAD_INPUT) from None
        for name, answers in (("predictions", predictions), ("samples", samples)):
            missing = 0 if answers is None else sum(qid not in answers for qid in targets)
            if missing:
                self.stderr.write(f"warning: {missing} of {len(targets)} questions have no {name}; scored as empty")
        result = score_protoqa(targets, predictions, samples, matching=opts["matching"])
        if opts["format"] == "json":
            self.stdout.write(json.dumps(result, indent=2, allow_nan=False, ensure_ascii=False))
        else:
            self.stdout.write(render_markdown(result))
