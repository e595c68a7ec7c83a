#!/usr/bin/env python3
"""Measures `mblast eval` itself: where its wall time goes, and how repeatable its median is.

For each problem it evaluates the given candidate N times (separate processes, build cache
warm after the first) and reports the eval wall time split into build / verify / timing /
overhead, and the spread of the N medians: (max - min) / mean, in percent.

  benchmarks/eval_repeatability.py --target pocl-cpu --problems softmax matmul --runs 5
  benchmarks/eval_repeatability.py --target h200 --backend cuda --out results.json

Needs only the Python standard library; uses build/bin/mblast unless --mblast is given.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

EXT = {"opencl": "cpp", "cuda": "cu", "rvv": "c"}


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="pocl-cpu")
    ap.add_argument("--backend", default="opencl", choices=sorted(EXT))
    ap.add_argument("--problems", nargs="+", default=["softmax", "matmul"])
    ap.add_argument("--candidate", default="naive", help="candidate label: problems/P/candidates/LABEL.BACKEND.EXT")
    ap.add_argument(
        "--problems-root",
        help="problem folders under this one (e.g. imported KernelBench files) "
        "instead of problems/; their candidates are CANDIDATES_DIR/P.BACKEND.EXT",
    )
    ap.add_argument("--candidates-dir", help="with --problems-root: where the candidates are")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mblast", default=os.path.join(root, "build", "bin", "mblast"))
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more `mblast eval` options")
    ap.add_argument("--out", help="also write the results as JSON here")
    a = ap.parse_args()

    report = {"target": a.target, "backend": a.backend, "runs": a.runs, "problems": {}}
    for prob in a.problems:
        if a.problems_root:
            pdir = os.path.join(a.problems_root, prob)
            cand = os.path.join(a.candidates_dir, f"{prob}.{a.backend}.{EXT[a.backend]}")
        else:
            pdir = os.path.join(root, "problems", prob)
            cand = os.path.join(pdir, "candidates", f"{a.candidate}.{a.backend}.{EXT[a.backend]}")
        rows = []
        for i in range(a.runs):
            cmd = [a.mblast, "eval", pdir, cand, "--target", a.target, "--json"] + a.extra
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode not in (0, 1):
                sys.exit(f"eval_repeatability: {prob}: mblast failed: {p.stderr.strip()}")
            r = json.loads(p.stdout)
            if not r["correct"]:
                sys.exit(f"eval_repeatability: {prob}: candidate rejected: {r['failure_kind']}: {r['reason']}")
            rows.append(r)
        medians = [r["time"]["median"] for r in rows]
        unit = rows[0]["time"]["unit"]
        ph = [r["phases"] for r in rows]

        def mean(key):
            return statistics.mean(x[key] for x in ph)

        # The first run may build; the later ones hit the build cache.
        entry = {
            "unit": unit,
            "medians": medians,
            "median_of_medians": statistics.median(medians),
            "spread_of_medians_pct": 100 * (max(medians) - min(medians)) / statistics.mean(medians),
            "within_eval_spread_pct": [r["time"]["spread_pct"] for r in rows],
            "fraction_of_peak": [r.get("fraction_of_peak") for r in rows],
            "first_run_phases": ph[0],
            "cached_runs_mean_phases": {
                k: statistics.mean(x[k] for x in ph[1:]) for k in ph[0] if isinstance(ph[0][k], (int, float))
            }
            if len(ph) > 1
            else ph[0],
            "overhead_beyond_build_and_timed_runs_s": mean("overhead_s"),
            # The same less the candidate's own untimed calls (verification runs, warm-up): what
            # measuring costs (processes, transfers, poisoning, hashing, checks, cache flushes).
            "measuring_s": mean("measuring_s"),
            "untimed_calls_s": mean("untimed_calls_s"),
            # The minimum sample of each eval: how steady the machine was, beside the medians.
            "spread_of_minima_pct": 100
            * (max(r["time"]["min"] for r in rows) - min(r["time"]["min"] for r in rows))
            / statistics.mean(r["time"]["min"] for r in rows),
            # Everything but the build and the whole timing stage (warm-up, flushes, samples):
            # process start, device open, verification runs, transfers and checks.
            "overhead_beyond_build_and_timing_stage_s": statistics.mean(
                x["total_s"] - x["build_s"] - x["timing_s"] for x in ph
            ),
        }
        # The worker's verification runs by step (uploads, poisoning, calls, downloads, hashing,
        # sending each run and waiting for the driver's word), the mean over the evals.
        steps = [x.get("worker", {}).get("verify_steps", {}) for x in ph]
        if all(steps):
            entry["verify_steps_mean_s"] = {k: statistics.mean(st[k] for st in steps) for k in steps[0]}
        report["problems"][prob] = entry
        c = entry["cached_runs_mean_phases"]
        print(
            f"{prob:10s} median {entry['median_of_medians']:.2f} {unit}; spread of {a.runs} medians "
            f"{entry['spread_of_medians_pct']:.2f}%; first eval: build {ph[0]['build_s']:.2f} s, total {ph[0]['total_s']:.2f} s; "
            f"cached evals: verify {c['verify_s']:.2f} s, timing {c['timing_s']:.2f} s, total {c['total_s']:.2f} s, "
            f"overhead beyond build+timed runs {c['overhead_s']:.2f} s (of it the candidate's untimed calls "
            f"{c['untimed_calls_s']:.2f} s, measuring {c['measuring_s']:.2f} s), beyond build+timing stage "
            f"{entry['overhead_beyond_build_and_timing_stage_s']:.2f} s; spread of the minima {entry['spread_of_minima_pct']:.2f}%"
        )
        if "verify_steps_mean_s" in entry:
            print(
                f"{'':10s} verification runs by step (mean s): "
                + ", ".join(f"{k[:-2]} {v:.3f}" for k, v in entry["verify_steps_mean_s"].items())
            )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
