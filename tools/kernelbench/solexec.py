"""`import-sol`: SOL-ExecBench problems become mblast problems, one per workload
(docs/sol-execbench.md).

A SOL-ExecBench problem is a folder holding definition.json (axes, named inputs and outputs with
their dtypes and shapes in axis names, the reference as text), workload.jsonl (one workload a line:
a uuid, values for the definition's var axes, and where each input comes from) and, usually,
reference.py (the same reference as a file). Each workload is written out as a KernelBench-format
file (the reference, then class Model whose forward calls the reference's run(), get_inputs() that
makes the workload's inputs), and that file is imported like any KernelBench file
(importer.import_file): the KernelBench path does the rest (reference data, tolerance, graph).
The file is kept next to its problem, so that `mblast bench OUT` runs the same problems.

The speed-of-light bound is not part of definition.json or workload.jsonl as SOL-ExecBench
publishes them: its SOL times come from SOLAR and its leaderboard. A workload line may carry
`sol_latency_ms` itself, or --sol-anchors names a JSON file {workload uuid: {"sol_latency_ms": x}}
(the shape of the per-workload anchors the leaderboard's data is passed around in); the problem
keeps that bound as `speed_of_light`, and `mblast bench` reports the fraction of it reached.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
import time

from . import common
from .common import PROG, Failure, die, json_bytes, one_line, write_bytes_atomic

# SOL-ExecBench dtype names -> torch's. fp8 and fp4 formats have no mblast tensor type.
DTYPES = {
    "float64": "float64",
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "int64": "int64",
    "int32": "int32",
    "int16": "int16",
    "int8": "int8",
    "bool": "bool",
}
INPUT_TYPES = ("random", "scalar", "safetensors", "custom")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise Failure(f"{path}: missing (a SOL-ExecBench problem has definition.json and workload.jsonl)")
    except OSError as e:
        raise Failure(f"{path}: cannot read: {e.strerror}")
    try:
        j = json.loads(text)
    except json.JSONDecodeError as e:
        raise Failure(f"{path}:{e.lineno}: not JSON ({e.msg})")
    if not isinstance(j, dict):
        raise Failure(f"{path}:1: expected a JSON object")
    return j


def _eval_expr(text: str, axes: dict, where: str) -> int:
    """An `expr` axis: + - * / // % ** and parentheses over integers and other axes."""
    ops = {
        ast.Add: lambda a, b: a + b,
        ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b,
        ast.Div: lambda a, b: a / b,
        ast.FloorDiv: lambda a, b: a // b,
        ast.Mod: lambda a, b: a % b,
        ast.Pow: lambda a, b: a**b,
    }

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in axes:
                raise Failure(f"{where}: the expression '{text}' names '{n.id}', which has no value here")
            return axes[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.UAdd, ast.USub)):
            v = ev(n.operand)
            return v if isinstance(n.op, ast.UAdd) else -v
        raise Failure(f"{where}: the expression '{text}' uses something other than + - * / // % ** and axes")

    try:
        tree = ast.parse(str(text), mode="eval")
    except SyntaxError:
        raise Failure(f"{where}: '{text}' is not an expression")
    try:
        v = ev(tree)
    except ZeroDivisionError:
        raise Failure(f"{where}: the expression '{text}' divides by zero")
    if isinstance(v, float):
        if not v.is_integer():
            raise Failure(f"{where}: the expression '{text}' is {v}, not an integer")
        v = int(v)
    return v


def load_definition(pdir: str) -> tuple[dict, str]:
    """definition.json, checked; and the reference's text (reference.py, else the definition's)."""
    path = os.path.join(pdir, "definition.json")
    d = _read_json(path)
    name = d.get("name")
    if not isinstance(name, str) or not name.strip():
        raise Failure(f"{path}: 'name' is missing or not a string")
    axes = d.get("axes")
    if not isinstance(axes, dict) or not axes:
        raise Failure(f"{path}: 'axes' is missing or not an object")
    for a, spec in axes.items():
        t = spec.get("type") if isinstance(spec, dict) else None
        if t not in ("const", "var", "expr"):
            raise Failure(f"{path}: axes.{a}: type must be const, var or expr")
        if t == "const" and (not isinstance(spec.get("value"), int) or isinstance(spec.get("value"), bool)):
            raise Failure(f"{path}: axes.{a}: a const axis needs an integer 'value'")
        if t == "expr" and not isinstance(spec.get("expression"), str):
            raise Failure(f"{path}: axes.{a}: an expr axis needs an 'expression'")
    for part in ("inputs", "outputs"):
        tensors = d.get(part)
        if not isinstance(tensors, dict) or not tensors:
            raise Failure(f"{path}: '{part}' is missing or not an object")
        for t, spec in tensors.items():
            if not _NAME.fullmatch(t):
                raise Failure(f"{path}: {part}.{t}: not a Python identifier")
            if not isinstance(spec, dict):
                raise Failure(f"{path}: {part}.{t}: expected an object with shape and dtype")
            dt = spec.get("dtype")
            if dt not in DTYPES:
                raise Failure(f"{path}: {part}.{t}: dtype '{dt}' is not supported (supported: {', '.join(DTYPES)})")
            shape = spec.get("shape")
            if shape is not None and not isinstance(shape, list):
                raise Failure(f"{path}: {part}.{t}: shape must be a list of axis names or null")
            for ax in shape or []:
                if ax not in axes:
                    raise Failure(f"{path}: {part}.{t}: the shape names the unknown axis '{ax}'")
    ref_path = os.path.join(pdir, "reference.py")
    if os.path.exists(ref_path):
        try:
            with open(ref_path, encoding="utf-8") as f:
                ref = f.read()
        except OSError as e:
            raise Failure(f"{ref_path}: cannot read: {e.strerror}")
        where = ref_path
    elif isinstance(d.get("reference"), str) and d["reference"].strip():
        ref, where = d["reference"], path + ": reference"
    else:
        raise Failure(f"{ref_path}: missing, and {path} has no 'reference'")
    try:
        tree = ast.parse(ref)
    except SyntaxError as e:
        raise Failure(f"{where}:{e.lineno}: not Python ({e.msg})")
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    if "run" not in defined:
        raise Failure(f"{where}: defines no top-level function run()")
    entry = d.get("custom_inputs_entrypoint")
    if entry is not None and entry not in defined:
        raise Failure(f"{where}: defines no {entry}() (the definition's custom_inputs_entrypoint)")
    return d, ref


def load_workloads(pdir: str, d: dict, anchors: dict) -> list[dict]:
    """workload.jsonl, every line checked against the definition: a list of {line, uuid, axes (all
    of them, const and expr included), inputs, sol_ms}."""
    path = os.path.join(pdir, "workload.jsonl")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise Failure(f"{path}: missing (a SOL-ExecBench problem has definition.json and workload.jsonl)")
    except OSError as e:
        raise Failure(f"{path}: cannot read: {e.strerror}")
    axes, out = d["axes"], []
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        where = f"{path}:{n}"
        try:
            w = json.loads(text)
        except json.JSONDecodeError as e:
            raise Failure(f"{where}: not JSON ({e.msg}, column {e.colno})")
        if isinstance(w, dict) and isinstance(w.get("workload"), dict):  # a Trace holding the workload
            sol = w.get("sol_latency_ms", w["workload"].get("sol_latency_ms"))
            w = dict(w["workload"], sol_latency_ms=sol)
        if not isinstance(w, dict):
            raise Failure(f"{where}: expected a JSON object")
        uuid = w.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            raise Failure(f"{where}: 'uuid' is missing or not a string")
        given = w.get("axes", {})
        if not isinstance(given, dict):
            raise Failure(f"{where}: 'axes' is not an object")
        values = {}
        for a, v in given.items():
            if a not in axes:
                raise Failure(f"{where}: axes names '{a}', which is not an axis of {d['name']}")
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise Failure(f"{where}: axes.{a} is {v!r}, not a non-negative integer")
            if axes[a]["type"] == "const" and v != axes[a]["value"]:
                raise Failure(f"{where}: axes.{a} is {v}, but the definition fixes it at {axes[a]['value']}")
            if axes[a]["type"] == "expr":
                raise Failure(f"{where}: axes.{a} is an expr axis: its value comes from its expression")
            values[a] = v
        for a, spec in axes.items():
            if spec["type"] == "const":
                values[a] = spec["value"]
            elif spec["type"] == "var" and a not in values:
                raise Failure(f"{where}: the var axis '{a}' has no value")
        pending = [a for a, s in axes.items() if s["type"] == "expr"]
        while pending:  # expressions may name other expressions: resolve in dependency order
            ready = [a for a in pending if all(x in values for x in _names(axes[a]["expression"]))]
            if not ready:
                raise Failure(
                    f"{path.replace('workload.jsonl', 'definition.json')}: the expr axes {pending} "
                    "name each other in a circle, or an axis that does not exist"
                )
            for a in ready:
                values[a] = _eval_expr(axes[a]["expression"], values, f"{where}: axis {a}")
                pending.remove(a)
        inputs = w.get("inputs", {})
        if not isinstance(inputs, dict):
            raise Failure(f"{where}: 'inputs' is not an object")
        specs = {}
        for name in inputs:
            if name not in d["inputs"]:
                raise Failure(f"{where}: inputs names '{name}', which is not an input of {d['name']}")
        for name, tensor in d["inputs"].items():
            src = inputs.get(name, {"type": "random"})
            t = src.get("type") if isinstance(src, dict) else None
            if t not in INPUT_TYPES:
                raise Failure(f"{where}: inputs.{name}: type must be one of {', '.join(INPUT_TYPES)}")
            if t == "scalar" and not isinstance(src.get("value"), (int, float, bool)):
                raise Failure(f"{where}: inputs.{name}: a scalar input needs a numeric 'value'")
            if t == "custom" and not d.get("custom_inputs_entrypoint"):
                raise Failure(f"{where}: inputs.{name} is custom, but the definition has no custom_inputs_entrypoint")
            if t == "safetensors":
                if not isinstance(src.get("path"), str) or not isinstance(src.get("tensor_key"), str):
                    raise Failure(f"{where}: inputs.{name}: a safetensors input needs 'path' and 'tensor_key'")
                p = src["path"] if os.path.isabs(src["path"]) else os.path.join(pdir, src["path"])
                if not os.path.exists(p):
                    raise Failure(f"{where}: inputs.{name}: {p}: no such file")
                src = dict(src, path=os.path.abspath(p))
            if tensor.get("shape") is None and t == "random":
                raise Failure(f"{where}: inputs.{name} is a scalar (shape null) and needs type scalar")
            specs[name] = src
        kinds = {s["type"] == "custom" for s in specs.values()}
        if len(kinds) > 1:
            raise Failure(f"{where}: custom inputs cannot be mixed with others (SOL-ExecBench's rule)")
        sol = w.get("sol_latency_ms")
        anchor = anchors.get(uuid)
        if sol is None and anchor is not None:
            sol = anchor.get("sol_latency_ms") if isinstance(anchor, dict) else anchor
        if sol is not None and (not isinstance(sol, (int, float)) or isinstance(sol, bool) or sol <= 0):
            raise Failure(f"{where}: the speed-of-light time {sol!r} ms is not a positive number")
        out.append({"line": n, "uuid": uuid, "axes": values, "inputs": specs, "sol_ms": sol})
    if not out:
        raise Failure(f"{path}: no workloads in it")
    return out


def _names(expr: str) -> set:
    try:
        return {n.id for n in ast.walk(ast.parse(str(expr), mode="eval")) if isinstance(n, ast.Name)}
    except SyntaxError:
        return set()


def kernelbench_text(d: dict, ref: str, w: dict, pdir: str, bound: dict | None) -> str:
    """The workload as a KernelBench-format file: the reference first, as the problem has it."""
    shapes = {
        name: (None if t.get("shape") is None else [w["axes"][a] for a in t["shape"]])
        for name, t in d["inputs"].items()
    }
    inputs = [
        (name, w["inputs"][name]["type"], shapes[name], DTYPES[t["dtype"]], w["inputs"][name])
        for name, t in d["inputs"].items()
    ]
    doc = (d.get("description") or d["name"]).strip().splitlines()[0].replace('"""', "'''")
    source = {
        "kind": "sol-execbench",
        "definition": d["name"],
        "workload": w["uuid"],
        "dir": os.path.abspath(pdir),
        "line": w["line"],
    }
    lines = [
        f"# mblast: the SOL-ExecBench problem {d['name']}, workload {w['uuid']}, as a KernelBench-format file",
        "# (written by `mblast import sol-execbench`; the problem's reference comes first, unchanged).",
        ref.rstrip(),
        "",
        "",
        "# --- mblast: the workload ---",
        "import torch as _mblast_torch  # noqa: E402",
        "",
        f"MBLAST_SOL_AXES = {w['axes']!r}",
        f"MBLAST_SOL_INPUTS = {inputs!r}",
        f"MBLAST_BOUND = {bound!r}",
        f"MBLAST_SOURCE = {source!r}",
    ]
    entry = d.get("custom_inputs_entrypoint")
    if entry:  # the reference may call its entrypoint get_inputs: keep it before ours takes the name
        lines.append(f"_mblast_custom_inputs = {entry}")
    lines += [
        "",
        "",
        "class Model(_mblast_torch.nn.Module):",
        f'    """{doc}"""',
        "",
        "    def forward(self, *args):",
        "        return run(**dict(zip([i[0] for i in MBLAST_SOL_INPUTS], args)))",
        "",
        "",
        "def get_inputs():",
    ]
    if entry:
        lines += [
            "    scalars = {i[0]: i[4]['value'] for i in MBLAST_SOL_INPUTS if i[1] == 'scalar'}",
            "    made = _mblast_custom_inputs(dict(MBLAST_SOL_AXES, **scalars), _mblast_torch.device('cpu'))",
            "    return [made[i[0]] for i in MBLAST_SOL_INPUTS]",
        ]
    else:
        lines += [
            "    out = []",
            "    for name, kind, shape, dtype, src in MBLAST_SOL_INPUTS:",
            "        dt = getattr(_mblast_torch, dtype)",
            "        if kind == 'scalar':",
            "            out.append(src['value'])",
            "        elif kind == 'safetensors':",
            "            import safetensors.torch",
            "            out.append(safetensors.torch.load_file(src['path'])[src['tensor_key']].to(dt))",
            "        elif dt.is_floating_point:",
            "            out.append(_mblast_torch.randn(shape).to(dt))",
            "        elif dt == _mblast_torch.bool:",
            "            out.append(_mblast_torch.rand(shape) < 0.5)",
            "        else:",
            "            out.append(_mblast_torch.randint(0, 16, shape, dtype=dt))",
            "    return out",
        ]
    lines += ["", "", "def get_init_inputs():", "    return []", ""]
    return "\n".join(lines)


def find_problems(src: str) -> list[str]:
    """SRC itself when it holds definition.json, else every folder under it that does (sorted)."""
    if os.path.isfile(os.path.join(src, "definition.json")):
        return [src]
    found = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "_")))
        if "definition.json" in files:
            found.append(root)
            dirs[:] = []
    return sorted(found)


def _stem(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.\-]", "_", text).strip(".-") or "problem"
    return s if re.match(r"[A-Za-z0-9_]", s) else "_" + s


def cmd_import_sol(a) -> int:
    from .importer import import_file  # torch is imported by then (mblast_kernelbench._need_torch)

    if a.seeds < 1 or a.inits < 1:
        die("--seeds and --inits must be at least 1")
    if not os.path.isdir(a.src):
        die(f"{a.src}: not a folder (a SOL-ExecBench problem folder, or a folder of them)")
    problems = find_problems(a.src)
    if not problems:
        die(f"{a.src}: no definition.json in it or under it")
    anchors = {}
    if a.sol_anchors:
        anchors = _read_json(a.sol_anchors) if os.path.exists(a.sol_anchors) else None
        if anchors is None:
            die(f"{a.sol_anchors}: no such file")
    ok, failed, results = 0, 0, []
    events = getattr(a, "progress_events", False)  # mblast's live progress line: the count, then each start
    if events:
        print(f"{PROG}: progress: total {len(problems)}", flush=True)
    for pdir in problems:
        if events:
            print(f"{PROG}: progress: start {pdir}", flush=True)
        try:
            d, ref = load_definition(pdir)
            workloads = load_workloads(pdir, d, anchors)
        except Failure as e:
            failed += 1
            results.append({"dir": os.path.abspath(pdir), "ok": False, "reason": str(e)})
            print(f"{PROG}: {e}", file=sys.stderr, flush=True)
            continue
        level = _stem(d["name"])
        root = os.path.join(a.out, level)
        os.makedirs(root, exist_ok=True)
        for i, w in enumerate(workloads):
            t0 = time.perf_counter()
            stem = f"{level}_w{i}"
            bound = None
            if w["sol_ms"] is not None:
                bound = {
                    "time_us": w["sol_ms"] * 1000.0,
                    "source": "SOL-ExecBench speed-of-light time for this workload (SOLAR; B200 unless said)",
                }
            py = os.path.join(root, stem + ".py")
            entry = {"dir": os.path.abspath(pdir), "workload": w["uuid"], "file": os.path.abspath(py)}
            phases = {"import_torch_s": common.TORCH_IMPORT_SECONDS or 0.0}
            common.TORCH_IMPORT_SECONDS = 0.0
            try:
                write_bytes_atomic(py, kernelbench_text(d, ref, w, pdir, bound).encode())
                out = import_file(py, root, a.seeds, a.inits, a.device, phases)
                ok += 1
                secs = time.perf_counter() - t0
                entry.update(
                    {"ok": True, "problem": os.path.abspath(out), "seconds": secs, "sol_us": bound and bound["time_us"]}
                )
                sol = f", speed of light {bound['time_us']:.4g} us" if bound else ", no speed-of-light time"
                print(f"{PROG}: {pdir}: workload {w['uuid']} imported to {out}{sol} ({secs:.1f} s)", flush=True)
            except Failure as e:
                failed += 1
                entry.update({"ok": False, "reason": str(e)})
                print(
                    f"{PROG}: {pdir}: workload {w['uuid']} (workload.jsonl:{w['line']}): {e}",
                    file=sys.stderr,
                    flush=True,
                )
            except OSError as e:
                failed += 1
                entry.update({"ok": False, "reason": f"cannot write {py}: {e.strerror}"})
                print(f"{PROG}: cannot write {py}: {e.strerror}", file=sys.stderr, flush=True)
            except KeyboardInterrupt:
                print(f"{PROG}: {pdir}: interrupted", file=sys.stderr)
                return 130
            except Exception as e:  # a reference failing oddly: still one line
                failed += 1
                entry.update({"ok": False, "reason": f"internal error: {one_line(e)}"})
                print(
                    f"{PROG}: {pdir}: workload {w['uuid']}: internal error: {one_line(e)}", file=sys.stderr, flush=True
                )
            entry["phases"] = phases
            results.append(entry)
    print(f"{PROG}: imported {ok}, failed {failed}", flush=True)
    if a.json_out:
        try:
            write_bytes_atomic(a.json_out, json_bytes({"imported": ok, "failed": failed, "workloads": results}))
        except OSError as e:
            die(f"cannot write {a.json_out}: {e.strerror}")
    return 0 if failed == 0 else 1
