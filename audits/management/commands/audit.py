"""``python manage.py audit LABELS``: the full noise audit of a labels file, as JSON or Markdown.

A thin wrapper over :func:`audits.read_labels` and :func:`audits.full_report`; see
``noise-audit.md`` for every number. A malformed file stops with a CommandError naming the line
and the column.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from audits import LabelFileError, full_report, read_labels, read_predictions, render_markdown
from audits.engine.truths import METHODS as GROUND_TRUTH_METHODS


def _rescale(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(":"))
    except ValueError:
        raise CommandError(f"--rescale: expected LO:HI (e.g. 0:10), got {text!r}") from None
    return lo, hi


class Command(BaseCommand):
    help = "Audit a labels file (CSV/TSV/JSONL with worker, prompt, value[, gold, group, created_at])."
    # A file in, a report out: no database, URLs or models are involved, and the system checks
    # would import every view (the API schema, DRF renderers) just to start.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("labels", help="labels file: CSV (header), TSV or JSONL")
        parser.add_argument("--gold", help="gold file with prompt, gold (overrides a gold column)")
        parser.add_argument(
            "--sd",
            choices=["sample", "population"],
            default="sample",
            help="SD convention (default: sample, the study's)",
        )
        parser.add_argument(
            "--sweep",
            action="append",
            choices=["min", "max", "none"],
            help="volume-filter sweep(s) over every threshold (default: min); repeatable",
        )
        parser.add_argument(
            "--min-labels",
            type=int,
            action="append",
            default=[],
            metavar="T",
            help="also report the minimum-labels filter at T exactly; repeatable",
        )
        parser.add_argument(
            "--max-labels",
            type=int,
            action="append",
            default=[],
            metavar="T",
            help="also report the maximum-labels filter at T exactly; repeatable",
        )
        parser.add_argument("--format", choices=["json", "markdown"], default="json")
        parser.add_argument("--binarize", help="raw→scaled value map for rating files, e.g. 1:0,2:0,3:1,4:1")
        parser.add_argument("--rescale", help="map raw values in LO:HI linearly onto 0..1 (continuous ratings)")
        parser.add_argument("--valid-values", help="comma-separated allowed raw values (others count as invalid)")
        parser.add_argument(
            "--duplicates",
            choices=["error", "first", "last"],
            default="error",
            help="a worker labeling a prompt twice: stop (default) or keep one",
        )
        parser.add_argument("--k", type=int, help="labels per prompt for the partitions (default: most common)")
        parser.add_argument(
            "--min-scored",
            type=int,
            default=None,
            help="underpowered below this N (default: min(60, max(10, ⌈prompts / 4⌉)), the study's 60 "
            "from 240 prompts up)",
        )
        parser.add_argument("--predictions", help="a system's predictions (prompt, prediction): scored per partition")
        parser.add_argument("--predictions-b", help="a second system's predictions: per-rater paired t-test")
        parser.add_argument(
            "--metric",
            choices=["auto", "accuracy", "spearman"],
            default="auto",
            help="how systems are scored: accuracy (categories) or Spearman's rho (graded scores on ratings); "
            "default auto",
        )
        parser.add_argument(
            "--bootstrap",
            type=int,
            default=1000,
            metavar="N",
            help="crossed-bootstrap resamples for the six numbers' 95%% intervals (report key intervals); "
            "0 skips them (default 1000)",
        )
        parser.add_argument(
            "--seed", type=int, default=0, help="seed of the bootstrap (default 0): same seed, same intervals"
        )
        parser.add_argument("--second", help="a second labels file over the same prompts: reproducibility")
        parser.add_argument(
            "--alpha-level",
            action="append",
            choices=["nominal", "ordinal", "interval", "ratio"],
            help="Krippendorff alpha level(s) (default nominal, ordinal, interval)",
        )
        parser.add_argument("--no-per-worker", action="store_true", help="skip per-worker noise and regressions")
        parser.add_argument("--no-agreement", action="store_true", help="skip alpha/AC1/AC2 and item precision")
        parser.add_argument(
            "--ground-truth",
            action="append",
            choices=list(GROUND_TRUTH_METHODS),
            default=[],
            dest="ground_truth",
            metavar="METHOD",
            help="add an alternative ground truth (majority, dawid_skene, glad, mace) under the "
            "report key ground_truths; repeatable",
        )
        parser.add_argument("--campaign", help="campaign name to state in the report")
        parser.add_argument("--output", "-o", help="write the report to this file instead of stdout")
        parser.add_argument("--indent", type=int, default=2, help="JSON indent (default 2)")

    def handle(self, *args, **opts):
        scale = {
            "binarize": opts["binarize"],
            "rescale": _rescale(opts["rescale"]) if opts["rescale"] else None,
            "valid_values": opts["valid_values"].split(",") if opts["valid_values"] else None,
            "duplicates": opts["duplicates"],
        }
        sweeps = tuple(s for s in (opts["sweep"] or ["min"]) if s != "none")
        filters = tuple(("min", t) for t in opts["min_labels"]) + tuple(("max", t) for t in opts["max_labels"])
        try:
            matrix = read_labels(opts["labels"], gold=opts["gold"], **scale)
            second = read_labels(opts["second"], **scale) if opts["second"] else None
            preds = read_predictions(opts["predictions"]) if opts["predictions"] else None
            preds_b = read_predictions(opts["predictions_b"]) if opts["predictions_b"] else None
            if preds_b is not None and preds is None:
                raise CommandError("--predictions-b needs --predictions")
            report = full_report(
                matrix,
                ddof=1 if opts["sd"] == "sample" else 0,
                sweeps=sweeps,
                filters=filters,
                k=opts["k"],
                min_scored=opts["min_scored"],
                per_worker=not opts["no_per_worker"],
                agreement=not opts["no_agreement"],
                alpha_levels=tuple(opts["alpha_level"]) if opts["alpha_level"] else None,
                predictions=preds,
                predictions_b=preds_b,
                second=second,
                campaign=opts["campaign"],
                ground_truths=tuple(dict.fromkeys(opts["ground_truth"])),
                metric=opts["metric"],
                bootstrap=opts["bootstrap"],
                seed=opts["seed"],
            )
        except LabelFileError as exc:
            raise CommandError(str(exc)) from None
        except (ValueError, OSError) as exc:
            raise CommandError(f"{opts['labels']}: {exc}") from None
        data = report.to_dict()
        if opts["format"] == "json":
            text = json.dumps(data, indent=opts["indent"] or None, allow_nan=False, ensure_ascii=False)
        else:
            text = render_markdown(data)
        if opts["output"]:
            with open(opts["output"], "w", encoding="utf-8") as fh:
                fh.write(text if text.endswith("\n") else text + "\n")
        else:
            self.stdout.write(text)
