#!/usr/bin/env python3
"""Runs `mblast optimize-model` on KernelBench-style model files and summarises the speedup over
PyTorch eager per model and as a geometric mean over the verified ones (docs/model.md).

Usage:
    benchmarks/model_level.py --mblast build/bin/mblast --target pocl-cpu --max-bytes 4M --evals 4 \
        --work /tmp/model-level --out benchmarks/results/DATE-model-level-pocl.json FILE.py...

Each model gets a KB file of its own under --work (the figures are of one model, not of a KB
filled by the ones before it), unless --kb names a shared one.

With --onnx, each model that verified is also exported to ONNX (torch.onnx.export of the module as
it was imported: the scaled file, init 0's parameters, eval mode) and optimized again from the .onnx
file, with a KB of its own; the row's "onnx" says whether it verified, its model time, and its time
over the .py run's (issue 40: the same plan quality from ONNX, within 10 %).
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


def onnx_run(a, out: str, stem: str, row: dict) -> dict:
    """Exports the imported model to ONNX and optimizes it from there (see the module's docstring)."""
    import torch
    from safetensors.torch import load_file

    plan = json.load(open(os.path.join(out, "plan.json")))
    pdir = os.path.join(out, plan["model"]["problem"])
    problem = json.load(open(os.path.join(pdir, "problem.json")))
    ns: dict = {"__name__": "mblast_model_level_onnx"}
    exec(compile(open(os.path.join(pdir, "model.py")).read(), "model.py", "exec"), ns)
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    params = load_file(os.path.join(pdir, "data", "params.init0.safetensors"))
    state = model.state_dict()
    for spec in problem["parameters"]:
        if spec["name"] in state:
            state[spec["name"]] = params[spec["name"]].reshape(state[spec["name"]].shape)
    model.load_state_dict(state)
    model.eval()
    names = [s["name"] for s in problem["inputs"]]
    inputs = load_file(os.path.join(pdir, "data", "inputs.seed%d.safetensors" % problem["seeds"][0]["seed"]))
    args = tuple(inputs[n].reshape(s.get("torch_shape", s["shape"])) for n, s in zip(names, problem["inputs"]))
    path = os.path.join(a.work, stem + ".onnx")
    res = {"module_mode_of_py_run": problem.get("module_mode")}
    try:
        torch.onnx.export(model, args, path, input_names=names, opset_version=17)
    except Exception as e:  # the exporter's own limits
        res["error"] = "torch.onnx.export: " + " ".join(str(e).split())[:300]
        return res
    oout = os.path.join(a.work, stem + ".onnx.mblast")
    shutil.rmtree(oout, ignore_errors=True)
    shapes = []
    for n, t in zip(names, args):
        shapes += ["--input-shape", n + "=" + "x".join(str(d) for d in t.shape)]
    cmd = [a.mblast, "optimize-model", path, "--target", a.target, "--evals", a.evals, "--out", oout]
    cmd += ["--kb", os.path.join(a.work, stem + ".onnx.kb.sqlite"), "--json", *shapes]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    res.update({"exit": r.returncode, "wall_s": round(time.time() - t0, 1)})
    if r.returncode in (0, 1) and r.stdout.strip().startswith("{"):
        e = json.loads(r.stdout)["end_to_end"]
        res.update(
            {
                "correct": e.get("correct"),
                "model_us": e.get("median"),
                "onnxruntime_us": e.get("onnxruntime_us"),
                "speedup_vs_onnxruntime": e.get("speedup_vs_onnxruntime"),
                "reader_vs_onnxruntime": e.get("onnxruntime_check"),
            }
        )
        if e.get("correct") and e.get("median") and row.get("model_us"):
            res["time_over_py"] = e["median"] / row["model_us"]
    else:
        res["error"] = (r.stderr.strip().splitlines() or ["?"])[-1]
    return res


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
    ap.add_argument("--onnx", action="store_true", help="also optimize each verified model from an ONNX export")
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
        if a.onnx and row.get("correct"):
            row["onnx"] = onnx_run(a, out, stem, row)
        rows.append(row)
        print(
            json.dumps(
                {k: row.get(k) for k in ("model", "exit", "correct", "speedup_vs_eager", "groups", "wall_s", "error")}
            ),
            flush=True,
        )
    ok = [r["speedup_vs_eager"] for r in rows if r.get("correct") and r.get("speedup_vs_eager")]
    geo = math.exp(sum(math.log(x) for x in ok) / len(ok)) if ok else None
    ratios = [r["onnx"]["time_over_py"] for r in rows if r.get("onnx", {}).get("time_over_py")]
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
    if a.onnx:
        doc["summary"]["onnx"] = {
            "exported": sum(1 for r in rows if "onnx" in r),
            "verified": sum(1 for r in rows if r.get("onnx", {}).get("correct")),
            "time_over_py": ratios,
            "within_10_percent": sum(1 for x in ratios if 1 / 1.1 <= x <= 1.1),
        }
    print(json.dumps(doc["summary"]))
    if a.out:
        with open(a.out + ".tmp", "w") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(a.out + ".tmp", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
