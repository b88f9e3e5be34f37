"""A deliberately naive second implementation of the audit, for cross-checking the engine.

Plain Python: dicts, loops and the ``statistics`` module (which sums exactly with fractions), no
numpy and no shared code with ``audits``. Labels are a dict ``{(worker, prompt): value}``.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter

NAMES = ("level_noise", "pattern_noise_orig", "pattern_noise_mod", "system_noise_orig", "system_noise_mod", "residual")


def sd(values, ddof):
    values = list(values)
    if len(values) <= ddof:
        return None
    return statistics.stdev(values) if ddof == 1 else statistics.pstdev(values)


def by_worker(labels):
    out = {}
    for (w, _p), v in labels.items():
        out.setdefault(w, []).append(v)
    return out


def by_prompt(labels):
    out = {}
    for (_w, p), v in labels.items():
        out.setdefault(p, []).append(v)
    return out


def six_numbers(labels, ddof=1):
    """The six numbers, straight from the definitions in noise-audit.md (plus mod_sum)."""
    workers, prompts = by_worker(labels), by_prompt(labels)
    ln = sd([statistics.mean(v) for v in workers.values()], ddof)
    pn_orig = sd([statistics.mean(v) for v in prompts.values()], ddof)
    prompt_sds = [sd(v, ddof) for v in prompts.values()]
    pn_mod = sd([s for s in prompt_sds if s is not None], ddof)
    sn = sd(list(labels.values()), ddof)
    residual = None
    if sn is not None and ln is not None and pn_orig is not None:
        residual = sn**2 - ln**2 - pn_orig**2
    mod_sum = sn_mod = None
    if residual is not None and pn_mod is not None:
        mod_sum = ln**2 + pn_mod**2 + residual
        sn_mod = math.sqrt(mod_sum) if mod_sum >= 0 else None
    return {
        "level_noise": ln,
        "pattern_noise_orig": pn_orig,
        "pattern_noise_mod": pn_mod,
        "system_noise_orig": sn,
        "system_noise_mod": sn_mod,
        "residual": residual,
        "mod_sum": mod_sum,
        "n_workers": len(workers),
        "n_prompts": len(prompts),
        "n_labels": len(labels),
    }


def loo(labels):
    """{(worker, prompt): "correct" | "wrong" | "tie" | "alone"} against the others' mode."""
    prompts = {}
    for (w, p), v in labels.items():
        prompts.setdefault(p, {})[w] = v
    out = {}
    for (w, p), v in labels.items():
        others = [x for w2, x in prompts[p].items() if w2 != w]
        if not others:
            out[(w, p)] = "alone"
            continue
        counts = Counter(others)
        top = max(counts.values())
        modes = [x for x, c in counts.items() if c == top]
        if len(modes) > 1:
            out[(w, p)] = "tie"
        else:
            out[(w, p)] = "correct" if v == modes[0] else "wrong"
    return out


def loo_accuracy(labels):
    """{worker: (n_scored, n_correct)}."""
    res = {}
    for (w, _p), o in loo(labels).items():
        n, c = res.get(w, (0, 0))
        if o in ("correct", "wrong"):
            res[w] = (n + 1, c + (o == "correct"))
        else:
            res[w] = (n, c)
    return res


def volume_filter(labels, kind, t, ddof=1):
    counts = Counter(w for (w, p) in labels)
    keep = {w for w, c in counts.items() if (c >= t if kind == "min" else c <= t)}
    sub = {k: v for k, v in labels.items() if k[0] in keep}
    prompts = {p for (w, p) in labels}
    k_max = max(Counter(p for (w, p) in labels).values())
    left = Counter(p for (w, p) in sub)
    dist = [0] * (k_max + 1)
    for p in prompts:
        dist[left.get(p, 0)] += 1
    res = six_numbers(sub, ddof)
    res.update(workers_kept=len(keep), labels_kept=len(sub), prompt_distribution=dist)
    return res


def partitions(labels, k=None):
    prompts = by_prompt(labels)
    if k is None:
        freq = Counter(len(v) for v in prompts.values())
        best = max(freq.values())
        k = max(c for c, f in freq.items() if f == best)
    out = Counter()
    for v in prompts.values():
        if len(v) == k:
            out[k - max(Counter(v).values())] += 1
    return k, dict(out)


def worker_noise(labels, ddof=1):
    res = {}
    for w in by_worker(labels):
        mine = {p for (w2, p) in labels if w2 == w}
        sub = {key: v for key, v in labels.items() if key[1] in mine}
        res[w] = six_numbers(sub, ddof)
    return res
