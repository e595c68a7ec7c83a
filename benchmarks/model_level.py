#!/usr/bin/env python3
"""Runs `mblast optimize-model` on KernelBench-style model files and summarises the speedup over
PyTorch eager per model and as a geometric mean over the verified ones (docs/model.md).

Usage:
    benchmarks/model_level.py --mblast build/bin/mblast --target pocl-cpu --max-bytes 4M --evals 4 \
        --work /tmp/model-level --out benchmarks/results/DATE-model-level-pocl.json FILE.py...

Each model gets a KB file of its own under --work (the figures are of one model, not of a KB
filled by the ones before it), unless --kb names a shared one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--mblast", required=True)
    ap.add_argument("--target", default="pocl-cpu")
    ap.add_argument("--max-bytes", default="4M")
    ap.add_argument("--evals", default="4")
    ap.add_argument("--work", required=True)
    ap.add_argument("--kb", default="")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rows = []
    for f in a.files:
        stem = os.path.splitext(os.path.basename(f))[0]
        out = os.path.join(a.work, stem + ".mblast")
        shutil.rmtree(out, ignore_errors=True)
        kb = a.kb or os.path.join(a.work, stem + ".kb.sqlite")
        cmd = [
            a.mblast,
            "optimize-model",
            f,
            "--target",
            a.target,
            "--max-bytes",
            a.max_bytes,
            "--evals",
            a.evals,
            "--out",
            out,
            "--kb",
            kb,
            "--json",
        ]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        row = {"file": f, "model": stem, "exit": r.returncode, "wall_s": round(time.time() - t0, 1)}
        if r.returncode in (0, 1) and r.stdout.strip().startswith("{"):
            j = json.loads(r.stdout)
            e = j["end_to_end"]
            row.update(
                {
                    "correct": e.get("correct"),
                    "model_us": e.get("median"),
                    "eager_us": e.get("eager_us"),
                    "speedup_vs_eager": e.get("speedup_vs_eager"),
                    "generic_us": e.get("generic_median"),
                    "groups": len(j["groups"]),
                    "unknown_ops": j["unknown_ops"],
                    "hottest": sorted(
                        (
                            {
                                "group": g["name"],
                                "kind": g["kind"],
                                "share": g.get("share"),
                                "outcome": g.get("outcome", ""),
                            }
                            for g in j["groups"]
                        ),
                        key=lambda g: -(g["share"] or 0),
                    )[:3],
                }
            )
        else:
            row["error"] = (r.stderr.strip().splitlines() or ["?"])[-1]
        rows.append(row)
        print(
            json.dumps(
                {k: row.get(k) for k in ("model", "exit", "correct", "speedup_vs_eager", "groups", "wall_s", "error")}
            ),
            flush=True,
        )
    ok = [r["speedup_vs_eager"] for r in rows if r.get("correct") and r.get("speedup_vs_eager")]
    geo = math.exp(sum(math.log(x) for x in ok) / len(ok)) if ok else None
    doc = {
        "format": 1,
        "what": "mblast optimize-model per model: verified end to end, speedup over PyTorch eager",
        "command": " ".join(sys.argv),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count()},
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "target": a.target,
        "max_bytes": a.max_bytes,
        "evals": a.evals,
        "models": rows,
        "summary": {
            "models": len(rows),
            "verified": sum(1 for r in rows if r.get("correct")),
            "geomean_speedup_vs_eager": geo,
        },
    }
    print(json.dumps(doc["summary"]))
    if a.out:
        with open(a.out + ".tmp", "w") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(a.out + ".tmp", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
