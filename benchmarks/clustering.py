"""Proposed answer clusters (``audits.engine.clustering``) against ProtoQA's expert clusters.

Run from the repository root::

    .venv/bin/python benchmarks/clustering.py            # held-out scores of the chosen settings
    .venv/bin/python benchmarks/clustering.py --sweep    # also the sweep the settings were chosen on

Data: ``../shared/datasets`` (or ``CHORUS_DATASETS``): ProtoQA's 52 crowd-sourced dev questions
(``protoqa/dev/dev.crowdsourced.jsonl``), each with ~100 answers and experts' clusters. For each
question the answers are the distinct raw strings; an expert label is the cluster holding the string,
or invalid when the experts dropped it. Agreement is computed over the strings the experts kept
(``invalid="drop"``: proposing clusters is the engine's job, rejecting answers the researcher's),
per distinct string and per worker's answer (weighted by the raw counts).

The settings (scorer, linkage, threshold) are chosen by mean BLANC per string on the even-numbered
questions (0, 2, 4, … in file order) and reported on the odd-numbered ones, which the choice never
saw; ``--sweep`` prints the tuning table. Baselines: every string its own cluster, and
normalised-exact-string grouping (``propose_clusters(threshold=None)``). Time per question is the
best of ``--repeat`` runs of ``propose_clusters`` after WordNet is loaded (its load is timed apart).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the engine is imported inside the functions, once this is set

DATASETS = Path(os.environ.get("CHORUS_DATASETS", REPO / ".." / "shared" / "datasets")).resolve()
SCORERS = ("ratio", "token_set_ratio", "partial_ratio", "WRatio")
LINKAGES = ("single", "average", "complete")
THRESHOLDS = (90, 80, 75, 70, 65, 60, 55, 50, 40)  # similarity at which keys merge


def questions() -> list[dict]:
    """``[{"id", "answers", "counts", "expert"}]`` per dev question (expert label None = dropped)."""
    path = DATASETS / "protoqa" / "dev" / "dev.crowdsourced.jsonl"
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            cluster_of = {s: cid for cid, c in q["answers"]["clusters"].items() for s in c["answers"]}
            answers = list(q["answers"]["raw"])
            out.append(
                {
                    "id": q["metadata"]["id"],
                    "answers": answers,
                    "counts": [q["answers"]["raw"][s] for s in answers],
                    "expert": [cluster_of.get(s) for s in answers],
                }
            )
    return out


def scores(qs: list[dict], propose) -> dict[str, list[float]]:
    """BLANC and adjusted Rand per question, per string and per worker's answer."""
    from audits.engine.clustering import adjusted_rand, blanc

    out: dict[str, list[float]] = {"blanc": [], "blanc_w": [], "ari": [], "ari_w": []}
    for q in qs:
        labels = propose(q["answers"])
        out["blanc"].append(blanc(q["expert"], labels, invalid="drop"))
        out["blanc_w"].append(blanc(q["expert"], labels, weights=q["counts"], invalid="drop"))
        out["ari"].append(adjusted_rand(q["expert"], labels, invalid="drop"))
        out["ari_w"].append(adjusted_rand(q["expert"], labels, weights=q["counts"], invalid="drop"))
    return out


def spread(values: list[float]) -> str:
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{statistics.fmean(values):.4f} ± {statistics.stdev(values):.4f} [{q1:.3f}, {q3:.3f}]"


def sweep(tune: list[dict], show: bool) -> tuple[str, str, float]:
    from audits.engine.clustering import propose_clusters

    if show:
        print("\nTuning half (even questions), mean BLANC per string:")
        print("| scorer | linkage | " + " | ".join(f"sim ≥ {t}" for t in THRESHOLDS) + " |")
        print("|---|---|" + "---|" * len(THRESHOLDS))
    best = (-1.0, "", "", 0.0)
    for scorer in SCORERS:
        for linkage in LINKAGES:
            row = []
            for t in THRESHOLDS:
                propose = functools.partial(propose_clusters, threshold=t, scorer=scorer, linkage=linkage)
                b = statistics.fmean(scores(tune, propose)["blanc"])
                row.append(b)
                best = max(best, (b, scorer, linkage, float(t)), key=lambda x: x[0])
            if show:
                print(f"| {scorer} | {linkage} | " + " | ".join(f"{b:.4f}" for b in row) + " |")
    return best[1], best[2], best[3]


def main() -> None:
    from audits.engine import clustering
    from audits.engine.clustering import lemmatizer, propose_clusters

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="print the tuning table")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per question (best is reported)")
    args = parser.parse_args()
    print("$ " + shlex.join([".venv/bin/python", "benchmarks/clustering.py", *sys.argv[1:]]))

    t = time.perf_counter()
    name = lemmatizer()  # loads WordNet once
    print(f"lemmatiser: {name} (loaded in {time.perf_counter() - t:.2f} s)")
    qs = questions()
    tune, test = qs[0::2], qs[1::2]
    chosen = sweep(tune, args.sweep)
    default = (clustering.SCORER, clustering.LINKAGE, clustering.THRESHOLD)
    print(f"\nbest on the tuning half: scorer={chosen[0]} linkage={chosen[1]} threshold={chosen[2]:g}")
    print(f"engine defaults:        scorer={default[0]} linkage={default[1]} threshold={default[2]:g}")

    methods = {
        "all singletons": lambda a: list(range(len(a))),
        "normalised exact": lambda a: propose_clusters(a, threshold=None),
        "proposal (defaults)": propose_clusters,
    }
    print(f"\nHeld-out half: {len(test)} odd-numbered questions; mean ± SD [quartiles] over questions")
    print("| method | BLANC per string | BLANC per answer | ARI per string | ARI per answer |")
    print("|---|---|---|---|---|")
    for label, fn in methods.items():
        s = scores(test, fn)
        print(
            f"| {label} | {spread(s['blanc'])} | {spread(s['blanc_w'])} | {spread(s['ari'])} | {spread(s['ari_w'])} |"
        )
    s_all = scores(qs, propose_clusters)
    print(f"\nAll {len(qs)} questions, proposal: BLANC per string {spread(s_all['blanc'])}, ARI {spread(s_all['ari'])}")

    times = []
    for q in qs:
        best = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            propose_clusters(q["answers"])
            best = min(best, time.perf_counter() - t)
        times.append(best * 1000)
    print(
        f"propose_clusters per question ({statistics.fmean(len(q['answers']) for q in qs):.0f} distinct strings on "
        f"average): mean {statistics.fmean(times):.2f} ms, max {max(times):.2f} ms"
    )
    from audits.engine.clustering import answer_noise_summary, cluster_counts

    summary = answer_noise_summary({q["id"]: cluster_counts(q["expert"], q["counts"]) for q in qs})
    print("\nAnswer noise of the experts' clusters (all questions; entropy in bits; median [q1, q3]):")
    for field, d in summary.distribution.items():
        print(f"  {field}: mean {d['mean']:.3f}, median {d['median']:.3f} [{d['q1']:.3f}, {d['q3']:.3f}]")
    print("  most divided: " + ", ".join(f"{p} ({h:.2f} bits, top {s:.0%})" for p, h, s in summary.most_divided))
    print(f"  failing ProtoQA's filter (top 8 clusters < 85%): {summary.failing_filter}")

    worst = max(qs, key=lambda q: len(q["answers"]))
    hundred = [a for a, n in zip(worst["answers"], worst["counts"]) for _ in range(n)]
    best = float("inf")
    for _ in range(args.repeat):
        t = time.perf_counter()
        propose_clusters(hundred)
        best = min(best, time.perf_counter() - t)
    print(
        f"{len(hundred)} answers with repeats ({worst['id']}, {len(worst['answers'])} distinct): {best * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
