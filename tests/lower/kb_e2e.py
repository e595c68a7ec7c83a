#!/usr/bin/env python3
"""End to end through the lowering pipeline: KernelBench files, made small, imported, given the
pipeline's candidate (`mblast plan --pipeline --write-variants`) and evaluated on a target.

Every module-level integer constant above --limit is set to --limit (a file that then fails to
import is tried again at twice the limit, up to --max-limit): a generic rule, the same for every
file, so that the problems fit a CPU target's time. Prints one line per file and a summary
(verdicts, and the ops the pipeline could not lower); exits non-zero with --require-correct
when any file is not CORRECT.
"""
import argparse
import ast
import collections
import json
import os
import re
import subprocess
import sys


def shrink(src: str, limit: int) -> str:
    tree = ast.parse(src)

    def value(n):
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.Add, ast.Sub, ast.FloorDiv, ast.Pow)):
            a, b = value(n.left), value(n.right)
            if a is None or b is None:
                return None
            return {
                ast.Mult: a * b,
                ast.Add: a + b,
                ast.Sub: a - b,
                ast.FloorDiv: a // b if b else None,
                ast.Pow: a**b,
            }[type(n.op)]
        return None

    for node in tree.body:
        if isinstance(node, ast.Assign):
            v = value(node.value)
            if v is not None and v > limit:
                node.value = ast.Constant(limit)
            elif isinstance(node.value, ast.Tuple):  # height, width = 256, 256
                node.value.elts = [ast.Constant(limit) if (value(e) or 0) > limit else e for e in node.value.elts]
    return ast.unparse(tree) + "\n"


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout} s"


def one(a, path):
    stem = os.path.splitext(os.path.basename(path))[0]
    level = os.path.basename(os.path.dirname(path))
    name = f"{level}_{stem}"
    work = os.path.join(a.work, name)
    os.makedirs(work, exist_ok=True)
    src = open(path).read()
    limit = a.limit
    pdir = None
    why = ""
    while limit <= a.max_limit:
        small = os.path.join(work, f"{name}.py")
        with open(small, "w") as f:
            f.write(shrink(src, limit))
        out = os.path.join(work, f"imported{limit}")
        done = os.path.join(out, name, "problem.json")
        if os.path.exists(done) and open(small).read() == shrink(src, limit):  # imported by an earlier run
            pdir = os.path.dirname(done)
            break
        rc, so, se = run(
            [a.mblast, "import", "kernelbench", small, "--out", out, "--seeds", "2", "--inits", "1", "--json"],
            a.timeout,
        )
        try:
            doc = json.loads(so)
            entries = doc if isinstance(doc, list) else doc.get("files", doc.get("results", [doc]))
            e = entries[0]
        except Exception:
            e = {"ok": False, "reason": (se or so).strip().splitlines()[-1:] or ["no output"]}
        if e.get("ok"):
            pdir = e.get("problem") or e.get("dir") or e.get("problem_dir")
            break
        why = str(e.get("reason"))
        limit *= 2
    if not pdir:
        return "IMPORT_FAILED", why
    cand = os.path.join(work, "cand")
    rc, so, se = run(
        [a.mblast, "plan", pdir, "--target", a.target, "--pipeline", "--write-variants", cand, "--json"], 120
    )
    try:
        plan = json.loads(so)[0]
    except Exception:
        return "PLAN_FAILED", (se or so).strip()[-300:]
    if not plan.get("variants"):
        return "NOT_LOWERED", plan.get("pipeline_reason") or plan.get("lowering", {}).get("reason", "?")
    files = sorted(os.listdir(plan["written_to"]))
    cfile = os.path.join(plan["written_to"], files[0])
    rc, so, se = run([a.mblast, "eval", pdir, cfile, "--target", a.target, "--json"], a.timeout)
    try:
        r = json.loads(so)
    except Exception:
        return "EVAL_FAILED", (se or so).strip()[-300:]
    if r.get("correct") is True and not r.get("failure_kind"):
        verdict = "CORRECT"
    else:
        verdict = str(r.get("failure_kind") or "INCORRECT").upper()
    detail = r.get("reason") or ""
    t = r.get("time") or {}
    if verdict == "CORRECT" and isinstance(t, dict):
        detail = f"median {t.get('median', '?')} {t.get('unit', '')}"
    return verdict, str(detail)[:300]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mblast", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-limit", type=int, default=32)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--require-correct", action="store_true")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    absent = [f for f in a.files if not os.path.exists(f)]
    if absent:
        print(f"skipped: {absent[0]} is not here (KernelBench lives in ../shared/kernelbench)")
        return 77
    verdicts = collections.Counter()
    missing = collections.Counter()
    bad = 0
    for f in a.files:
        v, why = one(a, f)
        verdicts[v] += 1
        print(f"{os.path.basename(f)}: {v} {why}", flush=True)
        if v == "NOT_LOWERED":
            m = re.search(r"op (\S+) has no lowering", why)
            missing[m.group(1) if m else why[:80]] += 1
        bad += v != "CORRECT"
    print("summary:", dict(verdicts))
    if missing:
        print("not lowered:", missing.most_common())
    return 1 if a.require_correct and bad else 0


if __name__ == "__main__":
    sys.exit(main())
