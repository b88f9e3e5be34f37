"""Benchmark of the noise-audit engine (``audits``) on synthetic crowd campaigns.

Run from the repository root::

    .venv/bin/python benchmarks/audit.py                 # 10k, 1M and 10M labels
    .venv/bin/python benchmarks/audit.py --sizes 10000 1000000 --repeat 3

Each size runs in a fresh subprocess (so peak memory is per size). A campaign has k = 5 labels per
prompt, binary labels, and workers with long-tailed label counts (log-normal activity, as in a
real crowd: many light workers, a few very heavy ones). Measured:

- ``DataFrame``: ``pd.DataFrame`` from the same arrays (the pandas side's build);
- ``build``: ``LabelMatrix.from_triples`` from the arrays: codes the ids, checks for duplicate
  (worker, prompt) pairs, validates the values and accumulates the sufficient statistics — one
  pass over the labels, paid once per matrix;
- ``six numbers``: ``noise_audit`` on a newly built matrix (its first audit: merges identical
  prompt states, then O(workers + states));
- ``pandas``: the six numbers with a plain pandas groupby implementation on the DataFrame (checked
  equal to the engine's), which groups the labels again on every call;
- ``end to end``: build + six numbers against DataFrame + pandas, both from the raw arrays;
- ``full report``: matrix construction plus ``full_report`` with leave-one-out accuracy, a min-filter
  sweep over every threshold, partitions, per-worker noise and its regressions, alpha, AC1/AC2 and
  item precision, plus ``to_json``.

Time is wall-clock (``time.perf_counter``), best of ``--repeat`` untraced runs (one run for the
full report above 2M labels). Memory: the peak of Python/numpy allocations during one more, traced
run of the step (``tracemalloc``; numpy reports its buffers to it), and the process peak RSS
(``ru_maxrss``: the interpreter, the libraries and the generated data included) right after the
full report, which runs first, and at the end of the size. Start-up: wall time (and user+sys CPU
time) of ``python -c "import audits; read a 10k-label CSV; full_report; to_json"`` in a new process,
and of ``manage.py audit`` on the same file, median of 5 runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def synthetic_campaign(n_labels: int, *, k: int = 5, seed: int = 0):
    """Worker ids, prompt ids and binary values of a campaign with ``n_labels`` labels (k per prompt)."""
    rng = np.random.default_rng(seed)
    n_prompts = n_labels // k
    n_workers = max(50, n_labels // 40)
    activity = rng.lognormal(mean=0.0, sigma=1.6, size=n_workers)
    cdf = np.cumsum(activity / activity.sum())
    cdf[-1] = 1.0
    workers = np.searchsorted(cdf, rng.random((n_prompts, k)))
    # no worker twice on a prompt: redraw duplicates until none are left
    for _ in range(100):
        s = np.sort(workers, axis=1)
        dup_rows = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
        if dup_rows.size == 0:
            break
        workers[dup_rows] = np.searchsorted(cdf, rng.random((dup_rows.size, k)))
    prompt_p = rng.beta(0.6, 0.5, size=n_prompts)  # how plausible each prompt is
    bias = rng.normal(0.0, 0.08, size=n_workers)  # level noise
    p = np.clip(prompt_p[:, None] + bias[workers], 0, 1)
    values = (rng.random((n_prompts, k)) < p).astype(np.int8)
    prompts = np.repeat(np.arange(n_prompts), k)
    return workers.reshape(-1).astype(np.int64), prompts.astype(np.int64), values.reshape(-1)


def pandas_six_numbers(df, ddof: int = 1) -> dict:
    """The six numbers with plain pandas groupbys (the comparison baseline)."""
    v = df["value"]
    ln = df.groupby("worker")["value"].mean().std(ddof=ddof)
    g = df.groupby("prompt")["value"]
    pn_orig = g.mean().std(ddof=ddof)
    pn_mod = g.std(ddof=ddof).dropna().std(ddof=ddof)
    sn = v.std(ddof=ddof)
    residual = sn**2 - ln**2 - pn_orig**2
    total = ln**2 + pn_mod**2 + residual
    return {
        "level_noise": ln,
        "pattern_noise_orig": pn_orig,
        "pattern_noise_mod": pn_mod,
        "system_noise_orig": sn,
        "residual": residual,
        "system_noise_mod": math.sqrt(total) if total >= -1e-12 else None,
    }


def measure(fn, repeat: int, *, memory: bool = True, setup=None):
    """(best wall seconds, CPU seconds of that run, tracemalloc peak bytes, result).

    With ``setup``, each run calls ``fn(setup())`` and only ``fn`` is timed and traced (e.g. a new
    matrix for each audit, built outside the measurement). Timing runs are untraced (tracemalloc
    slows Python-level allocation down a lot); the peak comes from one more, traced run (0 when
    ``memory`` is false). CPU time (``time.process_time``) is
    shown beside wall time because a shared machine can stretch wall time while the process waits
    for a core; numpy runs these steps on one thread, so on an idle machine the two agree.
    """
    args = (lambda: (setup(),)) if setup else tuple
    best, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        a = args()
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn(*a)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if wall < best:
            best, best_cpu = wall, cpu
    peak = 0
    if memory:
        a = args()
        tracemalloc.start()
        fn(*a)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return (best, best_cpu), peak, result


def run_size(n_labels: int, repeat: int) -> dict:
    import krippendorff  # noqa: F401  (imported up front: module imports are not what is measured,
    import pandas as pd  # and importing under tracemalloc is very slow)
    import scipy.sparse  # noqa: F401
    import scipy.stats  # noqa: F401

    from audits import LabelMatrix, full_report, noise_audit

    w, p, v = synthetic_campaign(n_labels)
    out = {"labels": int(v.size)}
    # The full report first, so the process's peak RSS right after it is the report's own
    # (the synthetic arrays included), not a high-water mark left by the steps below.
    (t_rep, c_rep), m_rep, text = measure(
        lambda: full_report(LabelMatrix.from_triples(w, p, v), sweeps=("min",)).to_json(),
        1 if n_labels > 2_000_000 else repeat,
    )
    report_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    (t_build, c_build), m_build, matrix = measure(lambda: LabelMatrix.from_triples(w, p, v), repeat)
    out.update(workers=matrix.n_workers, prompts=matrix.n_prompts, max_worker_labels=int(matrix.worker_counts.max()))
    matrix = None
    # each timed audit gets a matrix no audit has seen (nothing cached beyond what the build leaves)
    (t_six, c_six), m_six, audit = measure(noise_audit, repeat, setup=lambda: LabelMatrix.from_triples(w, p, v))
    (t_df, c_df), _, df = measure(
        lambda: pd.DataFrame({"worker": w, "prompt": p, "value": v.astype(np.float64)}), repeat, memory=False
    )
    (t_pd, c_pd), m_pd, ref = measure(lambda: pandas_six_numbers(df), repeat)
    for key, x in ref.items():
        y = getattr(audit, key)
        if x is None or y is None:
            assert x is None and y is None, key
        else:
            assert abs(x - y) <= 1e-9, (key, x, y)
    out.update(
        build_s=t_build,
        build_cpu=c_build,
        build_peak=m_build,
        dataframe_s=t_df,
        dataframe_cpu=c_df,
        six_s=t_six,
        six_cpu=c_six,
        six_peak=m_six,
        pandas_s=t_pd,
        pandas_cpu=c_pd,
        pandas_peak=m_pd,
        report_s=t_rep,
        report_cpu=c_rep,
        report_peak=m_rep,
        report_json_bytes=len(text),
        report_maxrss=report_maxrss,
        speedup=t_pd / t_six,
        speedup_cpu=c_pd / max(c_six, 1e-9),
        speedup_end_to_end=(t_df + t_pd) / (t_build + t_six),
        maxrss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        loadavg=os.getloadavg()[0],
    )
    return out


def startup(n_runs: int = 5) -> dict:
    """End-to-end: a new Python process imports audits, reads a 10k-label CSV, reports, writes JSON."""
    w, p, v = synthetic_campaign(10_000, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "labels.csv")
        with open(path, "w") as fh:
            fh.write("worker,prompt,value\n")
            fh.writelines(f"w{a},p{b},{c}\n" for a, b, c in zip(w, p, v))
        code = (
            "import audits, sys; m = audits.read_labels(sys.argv[1]); "
            "sys.stdout.write(audits.full_report(m).to_json()[:1])"
        )

        def run(cmd, env=None):
            walls, cpus = [], []
            for _ in range(n_runs):
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                subprocess.run(cmd, cwd=REPO, env=env, check=True, capture_output=True)
                walls.append(time.perf_counter() - t0)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
            return statistics.median(walls), min(walls), statistics.median(cpus)

        env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings")}
        py_med, py_min, py_cpu = run([sys.executable, "-c", code, path])
        cli_med, cli_min, cli_cpu = run([sys.executable, "manage.py", "audit", path, "--output", os.devnull], env)
    return {
        "python_c_median_s": py_med,
        "python_c_min_s": py_min,
        "python_c_cpu_s": py_cpu,
        "cli_median_s": cli_med,
        "cli_min_s": cli_min,
        "cli_cpu_s": cli_cpu,
        "loadavg": os.getloadavg()[0],
    }


def fmt_bytes(b: float) -> str:
    return f"{b / 2**20:,.0f} MiB" if b < 2**30 else f"{b / 2**30:,.2f} GiB"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000, 10_000_000])
    ap.add_argument("--repeat", type=int, default=3, help="runs per timing (best is reported; default 3)")
    ap.add_argument("--no-startup", action="store_true", help="skip the start-up measurement")
    ap.add_argument("--json", help="also write the raw results to this file")
    ap.add_argument("--_one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._one:
        print(json.dumps(run_size(args._one, args.repeat)))
        return
    rows = []
    for n in args.sizes:
        proc = subprocess.run(
            [sys.executable, __file__, "--_one", str(n), "--repeat", str(args.repeat)],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        if proc.returncode:
            sys.exit(f"size {n} failed:\n{proc.stderr}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(
        f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; numpy {np.__version__}; "
        f"best of {args.repeat} runs; times are wall (CPU); memory = tracemalloc peak of the step, "
        f"process peak RSS after the report (run first) and at the end in the last column; "
        f"1-min load average during each size in the first column"
    )
    head = [
        "labels (load)",
        "workers",
        "prompts",
        "max/worker",
        "DataFrame",
        "build matrix",
        "pandas groupby",
        "six numbers",
        "speed-up (CPU)",
        "end to end",
        "full report",
        "peak: six / pandas / report",
        "peak RSS: report / process",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))

    def t(s, c):
        return f"{s:.3f} s ({c:.3f})" if s < 10 else f"{s:.1f} s ({c:.1f})"

    for r in rows:
        print(
            "| "
            + " | ".join(
                [
                    f"{r['labels']:,} ({r['loadavg']:.1f})",
                    f"{r['workers']:,}",
                    f"{r['prompts']:,}",
                    f"{r['max_worker_labels']:,}",
                    t(r["dataframe_s"], r["dataframe_cpu"]),
                    t(r["build_s"], r["build_cpu"]),
                    t(r["pandas_s"], r["pandas_cpu"]),
                    t(r["six_s"], r["six_cpu"]),
                    f"{r['speedup']:.0f}× ({r['speedup_cpu']:.0f}×)",
                    f"{r['speedup_end_to_end']:.1f}×",
                    t(r["report_s"], r["report_cpu"]),
                    f"{fmt_bytes(r['six_peak'])} / {fmt_bytes(r['pandas_peak'])} / {fmt_bytes(r['report_peak'])}",
                    f"{fmt_bytes(r['report_maxrss'])} / {fmt_bytes(r['maxrss'])}",
                ]
            )
            + " |"
        )
    result = {"sizes": rows}
    if not args.no_startup:
        s = startup()
        result["startup"] = s
        print(
            f"\nstart-up, 10k labels end to end (new process: import audits, read CSV, full report, JSON), "
            f"load {s['loadavg']:.1f}: wall median {s['python_c_median_s']:.2f} s (min {s['python_c_min_s']:.2f} s), "
            f"CPU (user+sys) median {s['python_c_cpu_s']:.2f} s; via `manage.py audit` (Django start-up "
            f"included): wall median {s['cli_median_s']:.2f} s (min {s['cli_min_s']:.2f} s), "
            f"CPU median {s['cli_cpu_s']:.2f} s"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
