#!/usr/bin/env python3
"""benchmarks/learning.py --llm end to end, small: two problems, four evaluations, cold, warm and
transfer runs through `--llm` against the scripted engineer, on rvv-qemu (instruction counts, so
the figures do not vary from run to run). Checks that the script runs to its end and that what it
writes holds every mode's figures; learning itself is measured by the benchmark, not here.

    learning_smoke.py MBLAST
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    mblast = sys.argv[1]
    out = os.path.join(tempfile.mkdtemp(prefix="mblast-learning-smoke-"), "learning.json")
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "learning.py"), "--llm", "--mblast", mblast]
    cmd += ["--target", "rvv-qemu-256", "--transfer-from", "rvv-qemu-128", "--problems", "vec_add", "relu"]
    cmd += ["--max-evals", "4", "--samples", "1", "--out", out]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:], sep="\n")
        print(f"learning.py exited {r.returncode}")
        return 1
    d = json.load(open(out))
    s = d["summary"]
    problems = {p["problem"] if isinstance(p, dict) and "problem" in p else str(p) for p in d["problems"]}
    failures = []
    for key in ("geomean_speedup_cold", "geomean_speedup_warm", "geomean_speedup_transfer_all"):
        if not isinstance(s.get(key), float):
            failures.append(f"summary has no {key}")
    # The scripted engineer, reading only the prompt, finds something faster than the start.
    if isinstance(s.get("geomean_speedup_cold"), float) and not s["geomean_speedup_cold"] > 1.0:
        failures.append(f"no speedup through --llm: cold geomean {s['geomean_speedup_cold']}")
    if "scripted engineer" not in s.get("actor", ""):
        failures.append(f"the actor was {s.get('actor')!r}, not the scripted engineer through --llm")
    if not d.get("commit"):
        failures.append("no commit recorded")
    if len(d["problems"]) != 2:
        failures.append(f"{len(d['problems'])} problems in the output, expected 2: {sorted(problems)}")
    for f in failures:
        print(f)
    print(json.dumps(s))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
