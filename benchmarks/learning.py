#!/usr/bin/env python3
"""Does the knowledge base help? (issue 8, "Learning, measured")

Optimizes a sequence of problems twice with the builtin policy:
  cold: every problem with an empty KB (only the curated seed);
  warm: one KB carried along the sequence, so each problem starts from what the runs on the
        problems before it (other problems) taught.
For every problem it reports the final speedup over the start, and how many evaluations each
mode needed to reach 95% of the best speedup either mode found (the sooner, the better the
KB's guidance). The first problem is cold in both modes by construction.

With --transfer-from TARGET a third mode measures transfer across targets: the whole sequence
is first optimized on TARGET into one KB, and each problem then starts from a copy of that KB
(knowledge of this problem and the others, all from the other target, which retrieval weighs
with its transfer discount) instead of an empty one.

    python3 benchmarks/learning.py --target rvv-qemu-256 --transfer-from rvv-qemu-128 --out learning.json

    python3 benchmarks/learning.py --target rvv-qemu-256 --max-evals 8 --samples 2 --out learning.json

With --llm every mode runs through `--llm` instead of the builtin policy: the actor and critic are
tests/support/engineer_llm_server.py, a scripted engineer with no memory of its own that picks
among the actions and earlier kernels each prompt shows and answers with the builtin policy's
variant of the action it picked. What the KB holds reaches it only through the prompt, so the
cold/warm/transfer comparison then measures what the prompt carries. Each mode's rows also say
how many proposals the builtin policy made in the LLM's place (after it repeated itself).

    python3 benchmarks/learning.py --llm --target pocl-cpu --problems vec_add relu row_sum --max-evals 6

Costs are instruction counts on rvv-qemu targets (deterministic), so the two modes differ only
by what the KB told the policy. On timed targets, noise adds to the comparison.
"""

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def optimize(mblast, problem, target, kb, runs, args):
    policy = ["--policy", "llm", "--llm", args.llm_spec, "--no-cache"] if args.llm else ["--policy", "builtin"]
    cmd = [
        mblast,
        "optimize",
        os.path.join(ROOT, "problems", problem),
        "--target",
        target,
        *policy,
        "--kb",
        kb,
        "--max-evals",
        str(args.max_evals),
        "--samples",
        str(args.samples),
        "--patience",
        "99",
        "--max-steps",
        "99",
        "--seed",
        str(args.seed),
        "--json",
        "--no-confirm",
    ]
    ext = {"rvv": ".rvv.c", "cuda": ".cuda.cu"}.get(target.split("-")[0], ".opencl.cpp")
    if target.startswith("rvv") or target in ("spacemit-k1", "sifive-x280"):
        ext = ".rvv.c"
    start = os.path.join(ROOT, "problems", problem, "candidates", args.start + ext)
    if not os.path.exists(start):  # autovec is RVV's; other backends start from the naive kernel
        start = os.path.join(ROOT, "problems", problem, "candidates", "naive" + ext)
    if os.path.exists(start):
        cmd += ["--start", start]
    env = dict(os.environ, MBLAST_RUNS_DIR=runs)
    if args.llm:  # the scripted engineer takes no key; no user config may change the client
        env.update(MBLAST_LLM_API_KEY="sk-none", MBLAST_CONFIG=args.llm_config)
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"learning: {problem}: mblast optimize failed: {p.stderr.strip().splitlines()[-1:]}")
    result = json.loads(p.stdout)
    with open(result["report"]["json"]) as f:
        events = json.load(f)["events"]
    # best speedup over the start after each evaluation
    trajectory, best, fallback = [], 1.0, 0
    for e in events:
        if e.get("type") == "candidate":
            if e.get("speedup_vs_start"):
                best = max(best, e["speedup_vs_start"])
            trajectory.append(best)
            # proposals the builtin policy made in place of an LLM that only repeated itself
            fallback += e.get("description", "").startswith("the LLM repeated itself")
    out = {
        "speedup": result["speedup"],
        "improved": result["improved"],
        "trajectory": trajectory,
        "evaluations": result["evaluations"],
        "best": result.get("best_description", ""),
        "wall_s": round(time.time() - t0, 1),
    }
    if args.llm:
        out.update(
            builtin_fallback_proposals=fallback,
            stop_reason=result.get("stop_reason", ""),
            llm_calls=result.get("spend", {}).get("calls"),
        )
    return out


def evals_to_reach(trajectory, goal):
    for i, s in enumerate(trajectory):
        if s >= goal:
            return i + 1
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mblast", default=os.path.join(ROOT, "build", "bin", "mblast"))
    ap.add_argument("--target", default="rvv-qemu-256")
    ap.add_argument("--problems", nargs="+", default=["vec_add", "relu", "act_chain", "row_sum", "softmax", "matmul"])
    ap.add_argument("--max-evals", type=int, default=8)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--start",
        default="autovec",
        help="the starting candidate in each problem's candidates/: autovec (clang -O3, rvv) or naive",
    )
    ap.add_argument(
        "--transfer-from",
        default="",
        help="another target: also start each problem from a KB filled by the whole sequence on it",
    )
    ap.add_argument(
        "--llm",
        action="store_true",
        help="the actor is tests/support/engineer_llm_server.py, a scripted engineer that knows only "
        "what each prompt shows: the KB reaches it through the prompt alone",
    )
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    # The tree the run starts from (the binary is not rebuilt by this script; a commit taken at the
    # end would name whatever was checked out by then).
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    args.start_commit = commit.stdout.strip()

    work = tempfile.mkdtemp(prefix="mblast-learning-")
    server = None
    if args.llm:
        server = subprocess.Popen(
            [
                sys.executable,
                os.path.join(ROOT, "tests", "support", "engineer_llm_server.py"),
                "--mblast",
                args.mblast,
                "--problems",
                os.path.join(ROOT, "problems"),
                "--log",
                os.path.join(work, "requests.jsonl"),
                "--watch-stdin",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = server.stdout.readline()
        if not line.startswith("PORT "):
            raise SystemExit("learning: the scripted engineer did not start")
        args.llm_spec = f"http://127.0.0.1:{int(line.split()[1])}/v1:engineer"
        args.llm_config = os.path.join(work, "llm-config.json")
        with open(args.llm_config, "w") as f:
            json.dump({"max_retries": 1}, f)
    try:
        run_all(args, work)
    finally:
        if server:
            server.stdin.close()
            server.wait(timeout=30)


def run_all(args, work):
    runs = os.path.join(work, "runs")
    warm_kb = os.path.join(work, "warm.sqlite")
    transfer_kb = os.path.join(work, "transfer.sqlite")
    if args.transfer_from:
        for prob in args.problems:
            r = optimize(args.mblast, prob, args.transfer_from, transfer_kb, runs, args)
            print(f"{prob:<10} on {args.transfer_from}: {r['speedup']:.2f}x (filling the transfer KB)", flush=True)
    rows = []
    for i, prob in enumerate(args.problems):
        cold = optimize(args.mblast, prob, args.target, os.path.join(work, f"cold-{prob}.sqlite"), runs, args)
        warm = optimize(args.mblast, prob, args.target, warm_kb, runs, args)
        modes = {"cold": cold, "warm": warm}
        if args.transfer_from:
            kb = os.path.join(work, f"transfer-{prob}.sqlite")  # a fresh copy: only the other target's runs
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(transfer_kb + suffix):
                    shutil.copyfile(transfer_kb + suffix, kb + suffix)
            modes["transfer"] = optimize(args.mblast, prob, args.target, kb, runs, args)
        goal = 0.95 * max(m["speedup"] for m in modes.values())
        row = {"problem": prob, "warmed_on": args.problems[:i]}
        for name, m in modes.items():
            row[name] = m
            row[f"{name}_evals_to_95pct"] = evals_to_reach(m["trajectory"], goal)
        rows.append(row)
        line = (
            f"{prob:<10} cold {cold['speedup']:.2f}x in {row['cold_evals_to_95pct']} evals to 95% | "
            f"warm {warm['speedup']:.2f}x in {row['warm_evals_to_95pct']} evals to 95% "
            f"(warmed on {len(args.problems[:i])} other problems)"
        )
        if args.transfer_from:
            line += (
                f" | from {args.transfer_from} {modes['transfer']['speedup']:.2f}x in "
                f"{row['transfer_evals_to_95pct']} evals to 95%"
            )
        print(line, flush=True)

    def geo(xs):
        xs = [x for x in xs if x and x > 0]
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None

    later = rows[1:]  # the first problem is cold in both modes
    budget = args.max_evals + 1  # "not reached within the budget" counts as budget + 1
    summary = {
        "target": args.target,
        "max_evals": args.max_evals,
        "samples": args.samples,
        "actor": "scripted engineer through --llm (tests/support/engineer_llm_server.py)" if args.llm else "builtin",
        "geomean_speedup_cold": geo([r["cold"]["speedup"] for r in later]),
        "geomean_speedup_warm": geo([r["warm"]["speedup"] for r in later]),
        "mean_evals_to_95pct_cold": sum(r["cold_evals_to_95pct"] or budget for r in later) / max(1, len(later)),
        "mean_evals_to_95pct_warm": sum(r["warm_evals_to_95pct"] or budget for r in later) / max(1, len(later)),
    }
    if args.transfer_from:  # every problem: the transfer KB holds them all
        summary["transfer_from"] = args.transfer_from
        summary["geomean_speedup_transfer_all"] = geo([r["transfer"]["speedup"] for r in rows])
        summary["geomean_speedup_cold_all"] = geo([r["cold"]["speedup"] for r in rows])
        summary["mean_evals_to_95pct_transfer_all"] = sum(r["transfer_evals_to_95pct"] or budget for r in rows) / len(
            rows
        )
        summary["mean_evals_to_95pct_cold_all"] = sum(r["cold_evals_to_95pct"] or budget for r in rows) / len(rows)
    summary["aim_warm_at_most_half_of_cold"] = (
        summary["mean_evals_to_95pct_warm"] <= 0.5 * summary["mean_evals_to_95pct_cold"]
    )
    if args.transfer_from:
        summary["aim_transfer_at_most_half_of_cold"] = (
            summary["mean_evals_to_95pct_transfer_all"] <= 0.5 * summary["mean_evals_to_95pct_cold_all"]
        )
    print(json.dumps(summary, indent=1))
    if args.out:
        meta = {
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
            "commit": args.start_commit,
            "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        with open(args.out, "w") as f:
            json.dump({**meta, "summary": summary, "problems": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
