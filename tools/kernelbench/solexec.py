"""`import-sol`: SOL-ExecBench problems become mblast problems, one per workload
(docs/sol-execbench.md).

A SOL-ExecBench problem is a folder holding definition.json and workload.jsonl (and reference.py,
a copy of the definition's `reference` that SOL-ExecBench's own evaluator does not read; neither
does this). definition.json: `name`, optional `op_type` and `description`, `axes` (const with a
`value`, var, expr with an `expression`), `inputs` and `outputs` (name -> {shape: axis names,
digit strings or null for a Python scalar; dtype}), `reference` (Python text whose top-level
run() takes the inputs in the definition's order), optional `custom_inputs_entrypoint` and
`constraints`. workload.jsonl: one workload a line ({uuid, axes: values of the var axes, inputs:
name -> {type: random | scalar (value) | safetensors (path, tensor_key) | custom}, optional
tolerance}), or a FlashInfer Trace holding one ({definition, workload, ...}).

Each workload is written out as a KernelBench-format file (the definition's reference, then class
Model whose forward calls run() with the inputs in order, get_inputs() that makes the workload's
inputs the way SOL-ExecBench's evaluator makes them) and that file is imported like any
KernelBench file (importer.import_file): the KernelBench path does the rest (reference data,
tolerance, graph). The file is kept next to its problem, so that `mblast bench OUT` runs the same
problems.

The speed-of-light bound is in neither file: SOL-ExecBench's SOL times are computed by SOLAR and
published on its leaderboard, not in the data set. --sol-anchors names a JSON file the user
writes, {workload uuid: {"sol_latency_ms": x, ...}} (a bare number is x too); the problem keeps
that bound as `speed_of_light`, and `mblast bench` reports the fraction of it reached. Nothing
else is read as a bound (in SOL-ExecBench's own code `sol_latency_ms` is a solution's measured
latency, so a field of that name on a workload line is not taken for one).
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import sys
import time

from . import common
from .common import PROG, Failure, die, json_bytes, one_line, write_bytes_atomic

# SOL-ExecBench dtype names that mblast carries (the torch dtype has the same name).
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int8", "bool")
# SOL-ExecBench dtypes that mblast does not carry, and why.
REFUSED_DTYPES = {
    "int16": "the mblast ABI has no 16-bit integer type",
    "float8_e4m3fn": "the mblast ABI has no fp8 type",
    "float8_e5m2": "the mblast ABI has no fp8 type",
    "float4_e2m1": "the mblast ABI has no fp4 type",
    "float4_e2m1fn_x2": "the mblast ABI has no fp4 type",
}
INPUT_TYPES = ("random", "scalar", "safetensors", "custom")
# safetensors header dtype codes -> SOL-ExecBench dtype names.
SAFETENSORS_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")


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


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _text(v) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _eval_expr(text: str, axes: dict, where: str) -> int:
    """An `expr` axis: + - * / // % ** and parentheses over numbers and other axes; the result
    must be an integer (a float that is one is taken), as SOL-ExecBench resolves it."""
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
    except OverflowError:
        raise Failure(f"{where}: the expression '{text}' overflows")
    if isinstance(v, float):
        if not v.is_integer():
            raise Failure(f"{where}: the expression '{text}' is {v}, not an integer")
        v = int(v)
    if v < 0:
        raise Failure(f"{where}: the expression '{text}' is {v}, a negative size")
    return v


def _names(expr: str) -> set:
    try:
        return {n.id for n in ast.walk(ast.parse(str(expr), mode="eval")) if isinstance(n, ast.Name)}
    except SyntaxError:
        return set()


def _check_tensors(path: str, d: dict, part: str, axes: dict) -> None:
    tensors = d.get(part)
    if not isinstance(tensors, dict):
        raise Failure(f"{path}: '{part}' is missing or not an object")
    if not tensors:
        raise Failure(f"{path}: '{part}' is empty (an mblast problem needs at least one)")
    for t, spec in tensors.items():
        where = f"{path}: {part}.{t}"
        if not _NAME.fullmatch(t) or t == "self":
            raise Failure(f"{where}: not usable as a Python parameter name")
        if not isinstance(spec, dict):
            raise Failure(f"{where}: expected an object with 'shape' and 'dtype'")
        dt = spec.get("dtype")
        if dt in REFUSED_DTYPES:
            raise Failure(
                f"{where}: dtype '{dt}' is not supported: {REFUSED_DTYPES[dt]} (supported: {', '.join(DTYPES)})"
            )
        if dt not in DTYPES:
            raise Failure(f"{where}: dtype {dt!r} is not a SOL-ExecBench dtype (supported: {', '.join(DTYPES)})")
        if "shape" not in spec:
            raise Failure(f"{where}: 'shape' is missing (a list of axis names, or null for a scalar)")
        shape = spec["shape"]
        if shape is not None and not isinstance(shape, list):
            raise Failure(f"{where}: shape must be a list of axis names or null")
        for ax in shape or []:
            if not _text(ax):
                raise Failure(f"{where}: shape holds {ax!r}, not an axis name")
            if not ax.isdigit() and ax not in axes:
                raise Failure(f"{where}: the shape names the unknown axis '{ax}'")


def load_definition(pdir: str) -> tuple[dict, str]:
    """definition.json, checked as SOL-ExecBench's Definition checks it; and the reference's text
    (the definition's `reference`: what SOL-ExecBench's evaluator runs)."""
    path = os.path.join(pdir, "definition.json")
    d = _read_json(path)
    if not _text(d.get("name")):
        raise Failure(f"{path}: 'name' is missing or not a string")
    op_type = d.get("op_type")
    if op_type is not None and not isinstance(op_type, str):
        raise Failure(f"{path}: 'op_type' is not a string")
    if op_type == "sampling":
        raise Failure(
            f"{path}: op_type 'sampling' is not supported: its outputs are random samples, which "
            "SOL-ExecBench checks against a distribution; mblast compares outputs element by element"
        )
    if d.get("description") is not None and not isinstance(d.get("description"), str):
        raise Failure(f"{path}: 'description' is not a string")
    axes = d.get("axes")
    if not isinstance(axes, dict):
        raise Failure(f"{path}: 'axes' is missing or not an object")
    for a, spec in axes.items():
        t = spec.get("type") if isinstance(spec, dict) else None
        if t not in ("const", "var", "expr"):
            raise Failure(f"{path}: axes.{a}: type must be const, var or expr")
        if t == "const" and (not _is_int(spec.get("value")) or spec["value"] < 0):
            raise Failure(f"{path}: axes.{a}: a const axis needs a non-negative integer 'value'")
        if t == "expr":
            if not _text(spec.get("expression")):
                raise Failure(f"{path}: axes.{a}: an expr axis needs an 'expression'")
            try:
                ast.parse(spec["expression"], mode="eval")
            except SyntaxError:
                raise Failure(f"{path}: axes.{a}: '{spec['expression']}' is not an expression")
            unknown = sorted(_names(spec["expression"]) - set(axes))
            if unknown:
                raise Failure(f"{path}: axes.{a}: the expression names the unknown axis '{unknown[0]}'")
    _check_tensors(path, d, "inputs", axes)
    _check_tensors(path, d, "outputs", axes)
    for name in d["inputs"]:
        if name in axes:
            raise Failure(f"{path}: inputs.{name}: an input may not have an axis's name")
        if name in d["outputs"]:
            raise Failure(f"{path}: outputs.{name}: an output may not have an input's name")
    constraints = d.get("constraints")
    if constraints is not None:
        if not isinstance(constraints, list) or not all(_text(c) for c in constraints):
            raise Failure(f"{path}: 'constraints' is not a list of expressions")
        for c in constraints:
            try:
                ast.parse(c, mode="eval")
            except SyntaxError:
                raise Failure(f"{path}: constraints: '{c}' is not an expression")
    entry = d.get("custom_inputs_entrypoint")
    if entry is not None and (not isinstance(entry, str) or not entry.isidentifier()):
        raise Failure(f"{path}: custom_inputs_entrypoint: {entry!r} is not a function name")
    ref = d.get("reference")
    if not _text(ref):
        raise Failure(
            f"{path}: 'reference' is missing or not a string (SOL-ExecBench runs the definition's "
            "reference; a reference.py beside it is not read)"
        )
    try:
        tree = ast.parse(ref)
    except SyntaxError as e:
        raise Failure(f"{path}: reference, line {e.lineno}: not Python ({e.msg})")
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if "run" not in funcs:
        raise Failure(f"{path}: reference: defines no top-level function run()")
    args = funcs["run"].args
    params = [x.arg for x in args.posonlyargs + args.args]
    if params != list(d["inputs"]):
        raise Failure(
            f"{path}: reference: run({', '.join(params)}) does not take the inputs in the definition's "
            f"order ({', '.join(d['inputs'])})"
        )
    if entry is not None and entry not in funcs:
        raise Failure(f"{path}: reference: defines no top-level {entry}() (the custom_inputs_entrypoint)")
    return d, ref


def _safetensors_header(path: str, where: str) -> dict:
    """The JSON header of a .safetensors file: {key: {"dtype", "shape", "data_offsets"}, ...}."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else -1
            if n < 2 or n > (100 << 20):
                raise Failure(f"{where}: {path}: not a safetensors file")
            meta = json.loads(f.read(n).decode("utf-8"))
    except OSError as e:
        raise Failure(f"{where}: {path}: cannot read: {e.strerror}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise Failure(f"{where}: {path}: not a safetensors file (its header is not JSON)")
    if not isinstance(meta, dict):
        raise Failure(f"{where}: {path}: not a safetensors file")
    return meta


def _find_blob(pdir: str, rel: str, where: str) -> str:
    """A safetensors input's file: an absolute path as it is; a relative one under the problem
    folder (SOL-ExecBench's examples resolve it there), else under $FLASHINFER_TRACE_DIR (its
    evaluator's root for FlashInfer-Trace blobs)."""
    if _URI.match(rel):
        raise Failure(f"{where}: '{rel}' is a URI; only a local file can be read")
    if os.path.isabs(rel):
        looked = [rel]
    else:
        looked = [os.path.join(pdir, rel)]
        if os.environ.get("FLASHINFER_TRACE_DIR"):
            looked.append(os.path.join(os.environ["FLASHINFER_TRACE_DIR"], rel))
    for p in looked:
        if os.path.isfile(p):
            return os.path.abspath(p)
    hint = (
        "" if os.path.isabs(rel) or len(looked) > 1 else " ($FLASHINFER_TRACE_DIR, the other place looked, is not set)"
    )
    raise Failure(f"{where}: no such file: {' nor '.join(looked)}{hint}")


def load_anchors(path: str) -> dict:
    """--sol-anchors: {workload uuid: {"sol_latency_ms": T, ...} or T}."""
    return _read_json(path)


def _anchor_ms(anchors: dict, anchors_path: str, uuid: str):
    if uuid not in anchors:
        return None
    a = anchors[uuid]
    t = a.get("sol_latency_ms") if isinstance(a, dict) else a
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t) or t <= 0:
        raise Failure(f"{anchors_path}: {uuid}: sol_latency_ms {t!r} is not a positive number of milliseconds")
    return float(t)


def _resolve_axes(d: dict, given: dict, where: str, dpath: str) -> dict:
    axes, values = d["axes"], {}
    for a, v in given.items():
        if a not in axes:
            raise Failure(f"{where}: axes names '{a}', which is not an axis of {d['name']}")
        if not _is_int(v) or v < 0:
            raise Failure(f"{where}: axes.{a} is {v!r}, not a non-negative integer")
        if axes[a]["type"] == "const" and v != axes[a]["value"]:
            raise Failure(f"{where}: axes.{a} is {v}, but the definition fixes it at {axes[a]['value']}")
        if axes[a]["type"] != "expr":  # an expr axis's value, if given, must be its expression's
            values[a] = v
    for a, spec in axes.items():
        if spec["type"] == "const":
            values[a] = spec["value"]
        elif spec["type"] == "var" and a not in values:
            raise Failure(f"{where}: axes.{a}: the var axis has no value")
    pending = [a for a, s in axes.items() if s["type"] == "expr"]
    while pending:  # expressions may name other expressions: resolve in dependency order
        ready = [a for a in pending if all(x in values for x in _names(axes[a]["expression"]))]
        if not ready:
            raise Failure(f"{dpath}: axes: the expr axes {', '.join(pending)} name each other in a circle")
        for a in ready:
            values[a] = _eval_expr(axes[a]["expression"], values, f"{where}: axis {a}")
            pending.remove(a)
    for a, v in given.items():
        if v != values[a]:
            raise Failure(f"{where}: axes.{a} is {v}, but its expression '{axes[a]['expression']}' gives {values[a]}")
    return values


def _shape(spec: dict, values: dict):
    if spec.get("shape") is None:
        return None
    return [int(a) if a.isdigit() else values[a] for a in spec["shape"]]


def load_workloads(pdir: str, d: dict, anchors: dict, anchors_path: str = "") -> list[dict]:
    """workload.jsonl, every line checked against the definition: a list of {line, uuid, axes (all
    of them, const and expr included), inputs (name -> (type, resolved shape, descriptor)),
    tolerance, sol_ms}."""
    path = os.path.join(pdir, "workload.jsonl")
    dpath = os.path.join(pdir, "definition.json")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise Failure(f"{path}: missing (a SOL-ExecBench problem has definition.json and workload.jsonl)")
    except OSError as e:
        raise Failure(f"{path}: cannot read: {e.strerror}")
    entry = d.get("custom_inputs_entrypoint")
    out, seen = [], {}
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        where = f"{path}:{n}"
        try:
            w = json.loads(text)
        except json.JSONDecodeError as e:
            raise Failure(f"{where}: not JSON ({e.msg}, column {e.colno})")
        if not isinstance(w, dict):
            raise Failure(f"{where}: expected a JSON object")
        if "workload" in w and "uuid" not in w:  # a FlashInfer Trace holding the workload
            if w.get("definition") != d["name"]:
                raise Failure(f"{where}: definition is {w.get('definition')!r}, not this folder's {d['name']!r}")
            w = w["workload"]
            if not isinstance(w, dict):
                raise Failure(f"{where}: workload is not an object")
        uuid = w.get("uuid")
        if not _text(uuid):
            raise Failure(f"{where}: 'uuid' is missing or not a string")
        if uuid in seen:
            raise Failure(f"{where}: uuid '{uuid}' is also the uuid on line {seen[uuid]}")
        seen[uuid] = n
        given = w.get("axes")
        if not isinstance(given, dict):
            raise Failure(f"{where}: 'axes' is missing or not an object")
        values = _resolve_axes(d, given, where, dpath)
        inputs = w.get("inputs")
        if not isinstance(inputs, dict):
            raise Failure(f"{where}: 'inputs' is missing or not an object")
        for name in inputs:
            if name not in d["inputs"]:
                raise Failure(f"{where}: inputs names '{name}', which is not an input of {d['name']}")
        specs = {}
        for name, tensor in d["inputs"].items():
            field = f"{where}: inputs.{name}"
            shape = _shape(tensor, values)
            if name not in inputs:
                if entry:  # the entrypoint makes every input whatever the line says
                    specs[name] = ("custom", shape, {"type": "custom"})
                    continue
                raise Failure(f"{field}: missing (every input of {d['name']} needs a descriptor)")
            src = inputs[name]
            t = src.get("type") if isinstance(src, dict) else None
            if t not in INPUT_TYPES:
                raise Failure(f"{field}: type {t!r} is not one of {', '.join(INPUT_TYPES)}")
            if t == "scalar":
                v = src.get("value")
                if not isinstance(v, (int, float, bool)) or (isinstance(v, float) and not math.isfinite(v)):
                    raise Failure(f"{field}: a scalar input needs a finite number or a boolean 'value', not {v!r}")
            elif t == "custom" and not entry:
                raise Failure(f"{field}: type custom, but the definition has no custom_inputs_entrypoint")
            elif t == "safetensors":
                if not _text(src.get("path")) or not _text(src.get("tensor_key")):
                    raise Failure(f"{field}: a safetensors input needs 'path' and 'tensor_key'")
                if shape is None:
                    raise Failure(f"{field}: a scalar (shape null) cannot come from a safetensors file")
                p = _find_blob(pdir, src["path"], f"{field}.path")
                meta = _safetensors_header(p, f"{field}.path")
                key = src["tensor_key"]
                if key == "__metadata__" or not isinstance(meta.get(key), dict):
                    raise Failure(f"{field}.tensor_key: {p} holds no tensor '{key}'")
                got_dt = SAFETENSORS_DTYPES.get(meta[key].get("dtype"), meta[key].get("dtype"))
                if got_dt != tensor["dtype"]:
                    raise Failure(f"{field}: '{key}' in {p} is {got_dt}, the definition wants {tensor['dtype']}")
                if meta[key].get("shape") != shape:
                    raise Failure(
                        f"{field}: '{key}' in {p} has shape {meta[key].get('shape')}, the definition wants {shape}"
                    )
                src = dict(src, path=p)
            specs[name] = (t, shape, src)
        if len({specs[name][0] == "custom" for name in inputs}) > 1:
            raise Failure(f"{where}: custom inputs cannot be mixed with others (SOL-ExecBench's rule)")
        tol = w.get("tolerance", w.get("correctness"))
        if tol is not None and not isinstance(tol, dict):
            raise Failure(f"{where}: 'tolerance' is not an object")
        sol = _anchor_ms(anchors, anchors_path, uuid)
        out.append({"line": n, "uuid": uuid, "axes": values, "inputs": specs, "tolerance": tol, "sol_ms": sol})
    if not out:
        raise Failure(f"{path}: no workloads in it")
    return out


_RUNTIME = '''

def _mblast_random(shape, dtype, generator=None):
    """A random input as SOL-ExecBench's evaluator draws one: floats standard normal, int8
    uniform in [-128, 128), other integers in [-1024, 1024), bool a fair coin; shape None: a
    Python scalar."""
    dt = getattr(_mblast_torch, dtype)
    size = () if shape is None else tuple(shape)
    if dt.is_floating_point:
        t = _mblast_torch.randn(size, dtype=dt, generator=generator)
    elif dt == _mblast_torch.bool:
        t = _mblast_torch.randint(0, 2, size, dtype=dt, generator=generator)
    else:
        lo, hi = (-128, 128) if dt == _mblast_torch.int8 else (-1024, 1024)
        t = _mblast_torch.randint(lo, hi, size, dtype=dt, generator=generator)
    return t.item() if shape is None else t


def _mblast_outputs(out):
    """run()'s result as the evaluator reads it: a tensor or a scalar (one output), a tuple or
    list (one item per output), or a dict by output name; Python scalars become 0-d tensors of
    the output's dtype."""
    names = [o[0] for o in MBLAST_SOL_OUTPUTS]
    if isinstance(out, dict):
        missing = [n for n in names if n not in out]
        if missing:
            raise ValueError(f"run() returned a dict without the output(s) {missing}")
        out = [out[n] for n in names]
    elif isinstance(out, (tuple, list)):
        if len(out) != len(names):
            raise ValueError(f"run() returned {len(out)} values for the {len(names)} outputs {names}")
        out = list(out)
    else:
        if len(names) != 1:
            raise ValueError(f"run() returned one value for the {len(names)} outputs {names}")
        out = [out]
    done = []
    for (name, dtype), v in zip(MBLAST_SOL_OUTPUTS, out):
        if isinstance(v, (bool, int, float)):
            v = _mblast_torch.tensor(v, dtype=getattr(_mblast_torch, dtype))
        done.append(v)
    return done[0] if len(done) == 1 else tuple(done)
'''

_EXPLICIT_INPUTS = """
def get_inputs():
    out, files = [], {}
    for k, (name, kind, shape, dtype, src) in enumerate(MBLAST_SOL_INPUTS):
        if kind == "scalar":
            out.append(src["value"])
        elif kind == "safetensors":
            if src["path"] not in files:
                import safetensors.torch

                files[src["path"]] = safetensors.torch.load_file(src["path"])
            out.append(files[src["path"]][src["tensor_key"]].contiguous())
        elif shape is None:  # a random scalar: drawn once, the same under every seed (a constant)
            g = _mblast_torch.Generator()
            g.manual_seed(k)
            out.append(_mblast_random(None, dtype, g))
        else:
            out.append(_mblast_random(shape, dtype))
    return out
"""

_CUSTOM_INPUTS = """
def get_inputs():
    scalars = {i[0]: i[4]["value"] for i in MBLAST_SOL_INPUTS if i[1] == "scalar"}
    made = _mblast_custom_inputs(dict(MBLAST_SOL_AXES, **scalars), _mblast_torch.device("cpu"))
    if not isinstance(made, dict):
        raise TypeError(f"{MBLAST_SOL_ENTRY}() returned a {type(made).__name__}, not a dict of inputs")
    out = []
    for name, kind, shape, dtype, src in MBLAST_SOL_INPUTS:
        if name not in made:
            raise KeyError(f"{MBLAST_SOL_ENTRY}() made no input '{name}'")
        v = made[name]
        if shape is not None and (not isinstance(v, _mblast_torch.Tensor) or list(v.shape) != shape):
            got = list(v.shape) if isinstance(v, _mblast_torch.Tensor) else type(v).__name__
            raise ValueError(f"{MBLAST_SOL_ENTRY}() made '{name}' as {got}; the definition wants {shape}")
        out.append(v)
    return out
"""


def kernelbench_text(d: dict, ref: str, w: dict, pdir: str, bound: dict | None) -> str:
    """The workload as a KernelBench-format file: the definition's reference first, unchanged."""
    inputs = [(name, kind, shape, d["inputs"][name]["dtype"], src) for name, (kind, shape, src) in w["inputs"].items()]
    outputs = [(name, t["dtype"]) for name, t in d["outputs"].items()]
    doc = (d.get("description") or d["name"]).strip().splitlines()[0].replace('"""', "'''").replace("\\", "/")
    source = {
        "kind": "sol-execbench",
        "definition": d["name"],
        "workload": w["uuid"],
        "dir": os.path.abspath(pdir),
        "line": w["line"],
    }
    if d.get("op_type"):
        source["op_type"] = d["op_type"]
    if w.get("tolerance") is not None:  # recorded, not applied: mblast calibrates its own
        source["tolerance"] = w["tolerance"]
    names = ", ".join(d["inputs"])
    entry = d.get("custom_inputs_entrypoint")
    lines = [
        f"# mblast: the SOL-ExecBench problem {d['name']}, workload {w['uuid']}, as a KernelBench-format file",
        "# (written by `mblast import sol-execbench`; the definition's reference comes first, unchanged).",
        ref.rstrip(),
        "",
        "",
        "# --- mblast: the workload ---",
        "import torch as _mblast_torch  # noqa: E402",
        "",
        f"MBLAST_SOL_AXES = {w['axes']!r}",
        f"MBLAST_SOL_INPUTS = {inputs!r}",
        f"MBLAST_SOL_OUTPUTS = {outputs!r}",
        f"MBLAST_SOL_ENTRY = {entry!r}",
        f"MBLAST_BOUND = {bound!r}",
        f"MBLAST_SOURCE = {source!r}",
    ]
    if entry:  # the reference may call its entrypoint get_inputs: keep it before ours takes the name
        lines.append(f"_mblast_custom_inputs = {entry}")
    lines += [
        _RUNTIME,
        "",
        "class Model(_mblast_torch.nn.Module):",
        f'    """{doc}"""',
        "",
        f"    def forward(self, {names}):",
        f"        return _mblast_outputs(run({names}))",
        "",
        _CUSTOM_INPUTS if entry else _EXPLICIT_INPUTS,
        "",
        "def get_init_inputs():",
        "    return []",
        "",
    ]
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
    anchors, anchors_path = {}, a.sol_anchors or ""
    if anchors_path:
        if not os.path.isfile(anchors_path):
            die(f"{anchors_path}: --sol-anchors: no such file")
        try:
            anchors = load_anchors(anchors_path)
        except Failure as e:
            die(f"--sol-anchors: {e}")
    ok, failed, results, with_sol, n_workloads = 0, 0, [], 0, 0
    stems = {}  # OUT/<stem>/ -> the problem folder that has it
    events = getattr(a, "progress_events", False)  # mblast's live progress line: the count, then each start
    if events:
        print(f"{PROG}: progress: total {len(problems)}", flush=True)
    for pdir in problems:
        if events:
            print(f"{PROG}: progress: start {pdir}", flush=True)
        try:
            d, ref = load_definition(pdir)
            level = _stem(d["name"])
            if level in stems:
                raise Failure(
                    f"{os.path.join(pdir, 'definition.json')}: name '{d['name']}' is also the name in "
                    f"{os.path.join(stems[level], 'definition.json')}; both would be imported to {level}/"
                )
            stems[level] = pdir
            workloads = load_workloads(pdir, d, anchors, anchors_path)
        except Failure as e:
            failed += 1
            results.append({"dir": os.path.abspath(pdir), "ok": False, "reason": str(e)})
            print(f"{PROG}: {e}", file=sys.stderr, flush=True)
            continue
        root = os.path.join(a.out, level)
        os.makedirs(root, exist_ok=True)
        for i, w in enumerate(workloads):
            t0 = time.perf_counter()
            stem = f"{level}_w{i}"
            n_workloads += 1
            bound = None
            if w["sol_ms"] is not None:
                with_sol += 1
                bound = {
                    "time_us": w["sol_ms"] * 1000.0,
                    "source": f"--sol-anchors {os.path.basename(anchors_path)}: sol_latency_ms of workload "
                    f"{w['uuid']} (SOL-ExecBench's data set carries no SOL time; its own are SOLAR's, for a B200)",
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
    if anchors_path:
        print(
            f"{PROG}: --sol-anchors {anchors_path}: a speed-of-light time for {with_sol} of {n_workloads} workloads",
            flush=True,
        )
    print(f"{PROG}: imported {ok}, failed {failed}", flush=True)
    if a.json_out:
        try:
            write_bytes_atomic(a.json_out, json_bytes({"imported": ok, "failed": failed, "workloads": results}))
        except OSError as e:
            die(f"cannot write {a.json_out}: {e.strerror}")
    return 0 if failed == 0 else 1
