"""`import`: a KernelBench file becomes a problem directory (docs/kernelbench.md "Import")."""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import inspect
import json
import math
import os
import platform
import re
import shutil
import sys
import time

import torch

from . import common, sizes
from .common import (
    FLOAT_DTYPES,
    FORMAT,
    GENERATOR,
    PROG,
    VERSION,
    Failure,
    die,
    fsync_path,
    json_bytes,
    nbytes,
    one_line,
    sha256_bytes,
    sha256_file,
    write_bytes_atomic,
)
from .baseline import settings_kept, tf32_off
from .graph import count_flops, guess_op_class, trace_graph, with_aten
from .tensors import (
    PARAM_SEED_BASE,
    Reference,
    all_finite,
    as_arg_list,
    call_user,
    flatten_outputs,
    json_constant,
    load_kernelbench_module,
    seed_all,
    tensor_entry,
    to_storable,
)

# The fixed relative tolerance and the floor of the absolute one, per output dtype (see
# docs/kernelbench.md "Tolerance"): atol = max(floor, CALIBRATION_MARGIN x the absolute error
# the model's own-dtype reference shows against the same model run in float64, beyond rtol),
# at most KernelBench's 1e-2.
TOL_RTOL = {"f32": 1e-4, "f16": 1e-2, "bf16": 1e-2, "f64": 1e-8}
TOL_ATOL_FLOOR = {"f32": 1e-5, "f16": 1e-3, "bf16": 1e-2, "f64": 1e-8}
CALIBRATION_MARGIN = 10.0
KERNELBENCH_TOL = 1e-2  # KernelBench's own atol = rtol, used when calibration is impossible


def _signed_variant(args, mild: bool = False):
    """Float tensor inputs whose values are all >= 0 made signed. Returns (args, changes).
    By default centred on zero (half the values negative); `mild` shifts by half the mean
    instead (about a quarter negative), for models that a zero mean makes ill-conditioned
    (x / x.sum(): row sums near zero)."""
    new, changes = list(args), []
    for i, v in enumerate(args):
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() > 0:
            lo, hi = float(v.min()), float(v.max())
            if lo >= 0:
                if mild:
                    new[i] = v - (v.float().mean() / 2).to(v.dtype)
                    changes.append(f"in{i}: x-mean(x)/2 (the file draws it from [0, {hi:.3g}])")
                elif hi <= 1:
                    new[i] = v * 2 - 1
                    changes.append(f"in{i}: 2x-1 (the file draws it from [0, 1])")
                else:
                    new[i] = v - v.float().mean().to(v.dtype)
                    changes.append(f"in{i}: x-mean(x) (the file draws it from [0, {hi:.3g}])")
    return new, changes


def _capped(need: dict) -> bool:
    """Whether calibrated atols (_calibrate's first result) exceed KernelBench's tolerance."""
    return any(_round_up_125(CALIBRATION_MARGIN * v) > KERNELBENCH_TOL for v in need.values())


def _calibrate(ref: Reference, args, outs, decl_outs):
    """Error of the own-dtype reference against the same Model in float64, per output dtype:
    ({dtype: atol needed beside the fixed rtol}, {dtype: max |error|}). Raises on failure."""
    model64 = copy.deepcopy(ref.model)
    with torch.no_grad():
        for (_, t), s in zip(list(model64.named_parameters()) + list(model64.named_buffers()), ref.snapshot):
            t.copy_(s)
    model64 = model64.double()
    args64 = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
            out64, _ = flatten_outputs(model64(*args64), "forward in float64")
    finally:
        torch.set_default_dtype(old)
    if len(out64) != len(outs):
        raise Failure("float64 run returned another number of outputs")
    need, raw = {}, {}
    for o, o64, d in zip(outs, out64, decl_outs):
        if d["dtype"] not in FLOAT_DTYPES:
            continue
        if list(o64.shape) != list(o.shape):
            raise Failure("float64 run gave other shapes")
        if not all_finite([o64]):
            raise Failure("float64 run is not finite")
        excess, err = _max_errors(o, o64, TOL_RTOL[d["dtype"]])
        need[d["dtype"]] = max(need.get(d["dtype"], 0.0), excess)
        raw[d["dtype"]] = max(raw.get(d["dtype"], 0.0), err)
    return need, raw


def _max_errors(o, o64, rtol: float, chunk: int = 1 << 22):
    """(max of |o - o64| beyond rtol * |o64|, max |o - o64|), in float64 on the CPU. In chunks:
    whole-tensor temporaries (five of 1 GiB for a 512 MiB float32 output) cost 8-13 s of page
    faults on a 2-vCPU VM, the chunks 3.3 s."""
    a, b = o.detach().reshape(-1), o64.detach().reshape(-1)
    excess = err = 0.0
    for i in range(0, a.numel(), chunk):
        ac, bc = a[i : i + chunk].cpu().double(), b[i : i + chunk].cpu().double()
        e = (ac - bc).abs()
        err = max(err, float(e.max()))
        excess = max(excess, float((e - rtol * bc.abs()).clamp(min=0).max()))
    return excess, err


def _pick_signed_variant(s, args, refs, inits, calibrate, own_calibration):
    """The signed variant for seed `s` (docs/kernelbench.md "Seeds"): (args, {init: (outs,
    kind)}, its calibration or None, note) when one is kept, else (None, {}, None, note) with why
    the seed keeps the file's distribution. The zero-centred variant goes first; the milder one
    when that makes the reference NaN/Inf, or ill-conditioned where the file's inputs
    (`own_calibration()`) are not: its float32 error against float64 needs an atol beyond
    KernelBench's (x / x.sum() with row sums near zero); no kernel could match it there."""
    notes = []
    for mild in (False, True):
        sargs, changes = _signed_variant(args, mild)
        if not changes:
            break
        done = {}
        for i in inits:
            outs, kind = refs[i].forward(sargs, f"forward (seed {s}, signed variant, init {i})")
            if not all_finite(outs):
                notes.append(
                    f"the signed variant ({'; '.join(changes)}) makes the reference " f"NaN/Inf under init {i}"
                )
                break
            done[i] = (outs, kind)
        else:
            calib = None
            if not mild:
                calib, own = calibrate(sargs, done[inits[0]][0]), own_calibration()
                if (
                    not isinstance(own, Exception)
                    and not isinstance(calib, Exception)
                    and _capped(calib[0])
                    and not _capped(own[0])
                ):
                    notes.append(
                        f"the signed variant ({'; '.join(changes)}) makes the model "
                        f"ill-conditioned (the reference's own error against float64 "
                        f"needs atol {max(calib[0].values()):.3g}, the file's inputs do not)"
                    )
                    continue
            return sargs, done, calib, "; ".join(notes + changes)
    if notes:
        return None, {}, None, "; ".join(notes) + ": this seed keeps the file's own distribution"
    if any(isinstance(a, torch.Tensor) and a.is_floating_point() for a in args):
        return (
            None,
            {},
            None,
            ("every float input already takes negative values: " "this seed keeps the file's own distribution"),
        )
    return None, {}, None, "no float input: nothing to make signed"


def _round_up_125(x: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is >= x."""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        v = m * 10.0**e
        if v >= x * (1 - 1e-12):
            return float(f"{v:.3g}")
    return float(f"{10.0 ** (e + 1):.3g}")


def _first_doc_line(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    for ln in doc.splitlines():
        if ln.strip():
            return ln.strip()
    return ""


class _Phases:
    """Seconds per step of one import, into a dict (`phases` of the import's JSON summary):
    where an import's time goes. On CUDA the steps synchronize at their ends (the checks read
    results back), so queued work is counted in the step that queued it."""

    def __init__(self, into: dict | None):
        self.d = into if into is not None else {}
        self.t = time.perf_counter()

    def end(self, name: str) -> None:
        now = time.perf_counter()
        self.d[name] = self.d.get(name, 0.0) + (now - self.t)
        self.t = now

    @contextlib.contextmanager
    def apart(self, name: str):
        """Time spent inside, counted under NAME and not in the step around it."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - t0
            self.d[name] = self.d.get(name, 0.0) + took
            self.t += took


def import_file(
    src: str,
    out_root: str,
    n_seeds: int,
    n_inits: int,
    device: str,
    phases: dict | None = None,
    max_bytes: int | None = None,
) -> str:
    """Imports one file into out_root/<stem>/. Returns that directory. Raises Failure. PHASES, if
    given, receives the seconds of each step (_Phases). MAX_BYTES: the file's size constants are
    scaled down until one seed's inputs, parameters and outputs fit (sizes.fit)."""
    ph = _Phases(phases)
    src = os.path.abspath(src)
    stem = os.path.splitext(os.path.basename(src))[0]
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*", stem):
        raise Failure(f"the file name '{stem}' cannot name a problem directory")
    try:
        with open(src, "rb") as f:
            text = f.read()
    except OSError as e:
        raise Failure(f"cannot read: {e.strerror}")
    if device == "cuda" and not torch.cuda.is_available():
        raise Failure("--device cuda, but torch.cuda.is_available() is False here")
    source_sha256, scale = sha256_bytes(text), None
    if max_bytes:
        text, scale = sizes.fit(src, text, max_bytes)  # model.py is the scaled text
        ph.end("scale_s")
    mod = load_kernelbench_module(src, text)
    pdir = os.path.join(out_root, stem)
    if os.path.exists(pdir):
        _check_replaceable(pdir)

    seed_all(0)
    init_args = as_arg_list(call_user("get_init_inputs()", mod.get_init_inputs), "get_init_inputs()")
    init_args_json = []
    for i, a in enumerate(init_args):
        if isinstance(a, torch.Tensor):
            init_args_json.append({"tensor": list(a.shape), "dtype": str(a.dtype)})
        else:
            try:
                init_args_json.append(json_constant(a, f"get_init_inputs()[{i}]"))
            except Failure:
                init_args_json.append(repr(a))

    # Inputs per seed: seed 0 .. n-2 the file's own distribution, the last one signed.
    seeds = list(range(n_seeds))
    seed_args, seed_info = {}, {}
    for s in seeds:
        seed_all(s)
        raw = as_arg_list(call_user("get_inputs()", mod.get_inputs), "get_inputs()")
        seed_args[s] = [a.detach() if isinstance(a, torch.Tensor) else a for a in raw]
        seed_info[s] = {"seed": s, "distribution": "file"}

    # Argument layout from seed 0; every seed must agree.
    layout = []  # per position: tensor entry | constant
    for i, a in enumerate(seed_args[0]):
        if isinstance(a, torch.Tensor):
            layout.append(("tensor", tensor_entry(f"in{i}", a, f"get_inputs()[{i}]")))
        else:
            layout.append(
                ("constant", {"name": f"in{i}", "position": i, "value": json_constant(a, f"get_inputs()[{i}]")})
            )
    if not any(k == "tensor" for k, _ in layout):
        raise Failure("get_inputs() returns no tensor")
    for s in seeds[1:]:
        if len(seed_args[s]) != len(layout):
            raise Failure(
                f"get_inputs() returns {len(seed_args[s])} items under seed {s} but " f"{len(layout)} under seed 0"
            )
        for i, (a, (kind, e)) in enumerate(zip(seed_args[s], layout)):
            if kind == "tensor":
                if not isinstance(a, torch.Tensor):
                    raise Failure(f"get_inputs()[{i}] is a tensor under seed 0 but not under seed {s}")
                if tensor_entry(e["name"], a, f"get_inputs()[{i}]") != e:
                    raise Failure(f"get_inputs()[{i}] changes shape or dtype between seeds")
            elif json_constant(a, f"get_inputs()[{i}]") != e["value"]:
                raise Failure(f"get_inputs()[{i}] (a constant) changes between seeds")
    input_decl = [e for k, e in layout if k == "tensor"]
    constants = [e for k, e in layout if k == "constant"]
    ph.end("load_and_inputs_s")  # the file, get_init_inputs(), get_inputs() per seed

    def on_device(args):
        return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]

    inits = list(range(n_inits))
    refs = {i: Reference(mod, init_args, i, device) for i in inits}
    param_decl = []
    for n, t in refs[0].named:
        param_decl.append(tensor_entry(n, t, f"parameter/buffer '{n}'"))
    for i in inits[1:]:
        other = [tensor_entry(n, t, n) for n, t in refs[i].named]
        if other != param_decl:
            raise Failure(f"Model has other parameters under init {i} than under init 0")
    module_mode = "train" if refs[0].model.training else "eval"
    ph.end("models_s")  # the Model per init, its parameters drawn and kept

    # Expected outputs; the last seed is a signed variant (_pick_signed_variant).
    expected, return_kind, output_decl = {}, None, None
    signed_seed = seeds[-1] if n_seeds >= 2 else None
    calibrated = {}  # seed -> _calibrate's result, or the exception it raised

    def calibrate(args, outs):
        with ph.apart("calibrate_s"):
            try:
                return _calibrate(refs[inits[0]], args, outs, output_decl)
            except Exception as e:  # the model does not run in float64: handled below
                return e

    def calibration_of(s):
        if s not in calibrated:
            calibrated[s] = calibrate(on_device(seed_args[s]), expected[(s, inits[0])])
        return calibrated[s]

    for s in seeds:
        args = on_device(seed_args[s])
        done = {}
        if s == signed_seed:
            sargs, done, calib, note = _pick_signed_variant(
                s, args, refs, inits, calibrate, lambda: calibration_of(seeds[0])
            )
            seed_info[s]["note"] = note
            if sargs is not None:
                args = sargs
                seed_info[s]["distribution"] = "signed-variant"
                seed_args[s] = [a.detach().cpu() if isinstance(a, torch.Tensor) else a for a in sargs]
                if calib is not None:
                    calibrated[s] = calib
        for i in inits:
            what = f"forward (seed {s}, init {i})"
            outs, kind = done[i] if i in done else refs[i].forward(args, what)
            decl = [tensor_entry(f"out{k}", o, f"output {k}") for k, o in enumerate(outs)]
            if return_kind is None:
                return_kind, output_decl = kind, decl
            elif kind != return_kind or decl != output_decl:
                raise Failure(f"{what} returns other outputs (count, shape or dtype) than " "seed 0, init 0")
            if not all_finite(outs):
                raise Failure(f"{what} gives NaN/Inf on the file's own inputs")
            expected[(s, i)] = outs
    ph.end("reference_s")  # every seed and init's outputs, the signed variant's search
    again, _ = refs[inits[0]].forward(on_device(seed_args[seeds[0]]), "forward (run again)")

    # The same inputs twice must give the same result: bit for bit, or within KernelBench's
    # tolerance (CUDA atomics); dropout and other randomness cannot be matched by a kernel.
    deterministic = True
    for k, (a, b) in enumerate(zip(expected[(seeds[0], inits[0])], again)):
        if torch.equal(a, b):
            continue
        deterministic = False
        if output_decl[k]["dtype"] not in FLOAT_DTYPES or not bool(
            ((a.double() - b.double()).abs() <= KERNELBENCH_TOL + KERNELBENCH_TOL * a.double().abs()).all()
        ):
            diff = float((a.double() - b.double()).abs().max())
            raise Failure(
                f"forward is not deterministic: out{k} differs between two runs on "
                f"the same inputs (max |diff| {diff:.3g}); dropout or other "
                "randomness cannot be matched by a kernel"
            )

    ph.end("determinism_s")

    # Tolerance per dtype: a fixed rtol, and an atol calibrated against float64, never looser
    # than KernelBench's atol = rtol = 1e-2 (docs/kernelbench.md "Tolerance").
    tol, calib = {}, {"method": "float64", "margin": CALIBRATION_MARGIN}
    float_dtypes = sorted({d["dtype"] for d in output_decl if d["dtype"] in FLOAT_DTYPES})
    try:
        need, raw = {}, {}
        for s in sorted({seeds[0], seeds[-1]}):
            got = calibration_of(s)
            if isinstance(got, Exception):
                raise got
            n, r = got
            for k, v in n.items():
                need[k] = max(need.get(k, 0.0), v)
            for k, v in r.items():
                raw[k] = max(raw.get(k, 0.0), v)
        for dt in float_dtypes:
            want = max(TOL_ATOL_FLOOR[dt], _round_up_125(CALIBRATION_MARGIN * need.get(dt, 0.0)))
            if want > KERNELBENCH_TOL:
                calib.setdefault("capped", []).append(dt)
            tol[dt] = {"atol": min(want, KERNELBENCH_TOL), "rtol": TOL_RTOL[dt], "min_match": 1.0}
        calib["max_abs_error"] = {dt: raw.get(dt, 0.0) for dt in float_dtypes}
        calib["atol_needed"] = {dt: need.get(dt, 0.0) for dt in float_dtypes}
        if "capped" in calib:
            calib["note"] = (
                "the reference's own float error asks for more than KernelBench's "
                f"atol {KERNELBENCH_TOL}: capped there"
            )
    except Exception as e:
        for dt in float_dtypes:
            tol[dt] = {"atol": KERNELBENCH_TOL, "rtol": KERNELBENCH_TOL, "min_match": 1.0}
        calib = {
            "method": "none",
            "note": f"the model does not run in float64 "
            f"({one_line(e)}): KernelBench's atol = rtol = {KERNELBENCH_TOL} kept",
        }

    # Graph, FLOPs, op class.
    tensor_names = {e["name"] for e in input_decl}
    param_names = {e["name"] for e in param_decl}
    ph.end("calibrate_s")
    refs[inits[0]].restore()
    graph, graph_note = trace_graph(refs[inits[0]].model, on_device(seed_args[seeds[0]]), tensor_names, param_names)
    refs[inits[0]].restore()
    graph, graph_note = with_aten(
        graph, graph_note, refs[inits[0]].model, on_device(seed_args[seeds[0]]), tensor_names, param_names
    )
    refs[inits[0]].restore()
    ph.end("graph_s")
    flops, flops_method = count_flops(refs[inits[0]], on_device(seed_args[seeds[0]]), graph)
    ph.end("flops_s")
    op_class = guess_op_class(graph)
    total_bytes = sum(nbytes(e) for e in input_decl + param_decl + output_decl)
    if scale is not None:
        if total_bytes > max_bytes:  # the estimate missed what the import holds: never exceed N
            raise Failure(
                f"--max-bytes {sizes.format_bytes(max_bytes)}: the scaled problem takes "
                f"{total_bytes} bytes (estimated {scale['bytes_estimated']})"
            )
        scale["bytes"] = total_bytes

    # problem.json
    doc = _first_doc_line(mod.Model).rstrip(".")
    shapes = ", ".join(f"{e['name']} {e['dtype']}{e['shape']}" for e in input_decl)
    oshapes = ", ".join(f"{e['name']} {e['dtype']}{e['shape']}" for e in output_decl)
    description = (
        f"KernelBench-format PyTorch module {stem}"
        + (f": {doc}" if doc else "")
        + f". Inputs {shapes}; outputs {oshapes}; {len(param_decl)} parameter/buffer "
        f"tensors. The reference is the Model itself ({device}, its own dtypes)."
    )
    counting = {
        "torch.flop_counter": "torch.utils.flop_counter.FlopCounterMode over one forward "
        "(matmul-, convolution- and attention-family ops only)",
        "analytic-fx": "2*M*N*K per matmul/linear/bmm/addmm and 2*N*K*C*R*S*P*Q per "
        "convolution, from the fx graph's shapes (the ops torch's flop counter "
        "counts; elementwise work is not counted)",
        "unknown": "no flop counter in this torch and no traced graph: flops not counted",
    }[flops_method] + "; bytes = every input, parameter/buffer and output once"
    problem = {
        "format": FORMAT,
        "name": stem,
        "description": description,
        "op_class": op_class,
        "inputs": input_decl,
        "parameters": param_decl,
        "outputs": output_decl,
        "constants": constants,
        "arguments": [e["name"] for _, e in layout],
        "returns": return_kind,
        "module_mode": module_mode,
        "deterministic": deterministic,
        "tolerance": tol,
        "tolerance_calibration": calib,
        "flops": flops,
        "flops_method": flops_method,
        "bytes": total_bytes,
        "counting": counting,
        "seeds": [seed_info[s] for s in seeds],
        "inits": inits,
        "init_seeds": {str(i): PARAM_SEED_BASE + i for i in inits},
        "model": "model.py",
        "graph": "graph.json" if graph is not None else None,
        "provenance": {
            "kind": "kernelbench",
            "source": src,
            "sha256": source_sha256,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "device": device,
            "init_inputs": init_args_json,
            "reference": (
                f"the Model itself, in its own dtypes, on {device} (torch "
                f"{torch.__version__}); not float64" + ("; TF32 disabled" if device == "cuda" else "")
            ),
            "generator": GENERATOR,
        },
    }
    if scale is not None:
        problem["scale"] = scale
    origin = getattr(mod, "MBLAST_SOURCE", None)
    if isinstance(origin, dict):  # a file written from another format (solexec.py): where it came from
        problem["provenance"]["origin"] = origin
    bound = _speed_of_light(mod)
    if bound is not None:
        if scale is None:
            problem["speed_of_light"] = bound
        else:  # the bound is for the file's own sizes, not the scaled ones
            problem[
                "speed_of_light_note"
            ] = "the file's speed-of-light time is for its own sizes; --max-bytes scaled them"
    if graph is None:
        problem["graph_note"] = graph_note
    else:
        problem["graph_method"] = graph["method"]

    _write_problem(pdir, problem, text, graph, seeds, inits, seed_args, layout, refs, expected)
    ph.end("write_s")  # data files hashed and synced, problem.json
    return pdir


def _speed_of_light(mod) -> dict | None:
    """A file's own speed-of-light bound (MBLAST_BOUND = {"time_us": T, "source": "..."}), or None.
    Raises Failure when it is there but not a positive time."""
    b = getattr(mod, "MBLAST_BOUND", None)
    if b is None:
        return None
    t = b.get("time_us") if isinstance(b, dict) else None
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t) or t <= 0:
        raise Failure(f"MBLAST_BOUND must be {{'time_us': positive number, 'source': text}}, not {b!r}")
    return {"time_us": float(t), "source": str(b.get("source", ""))}


def _check_replaceable(pdir: str) -> None:
    pj = os.path.join(pdir, "problem.json")
    if not os.path.isdir(pdir):
        raise Failure(f"{pdir} exists and is not a directory")
    if not os.listdir(pdir):
        return
    try:
        with open(pj, "rb") as f:
            old = json.loads(f.read().decode("utf-8"))
        if old.get("provenance", {}).get("kind") == "kernelbench":
            return
    except (OSError, ValueError, AttributeError):
        pass
    raise Failure(f"{pdir} exists and is not a KernelBench import (remove it or choose " "another --out)")


def _same_bytes(a, b) -> bool:
    """Whether two lists of output tensors hold the same bytes (torch.equal alone takes -0.0 for
    0.0)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.dtype != y.dtype or x.shape != y.shape or x.device != y.device:
            return False
        if not torch.equal(x.contiguous().reshape(-1).view(torch.uint8), y.contiguous().reshape(-1).view(torch.uint8)):
            return False
    return True


def _write_problem(pdir, problem, text, graph, seeds, inits, seed_args, layout, refs, expected):
    """Writes everything under temporary names, then moves it into place: model.py,
    graph.json, data/ (MANIFEST.json last inside it), problem.json last of all. Candidates
    and other files already in the directory are kept; baselines.json is kept only when
    model.py did not change."""
    from safetensors.torch import save_file

    os.makedirs(pdir, exist_ok=True)
    tag = f".tmp{os.getpid()}"
    new_data = os.path.join(pdir, f".data{tag}")
    old_data = os.path.join(pdir, f".data.old{tag}")
    # Each file is synced and hashed in a thread while the next one is written: hashing ~3 GB
    # of a full-size import one file after another took most of its writing time (hashlib lets
    # go of the GIL).
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1))
    try:
        shutil.rmtree(new_data, ignore_errors=True)
        os.makedirs(new_data)
        files = {}  # name -> the future of its hash, in the order the manifest lists them

        def sync_and_hash(path):
            fsync_path(path)
            return sha256_file(path)

        def save(name, tensors: dict):
            path = os.path.join(new_data, name)
            save_file({k: to_storable(v) for k, v in tensors.items()}, path)
            files[name] = pool.submit(sync_and_hash, path)

        tensor_pos = [(i, e["name"]) for i, (k, e) in enumerate(layout) if k == "tensor"]
        for s in seeds:
            save(f"inputs.seed{s}.safetensors", {n: seed_args[s][i] for i, n in tensor_pos})
        for i in inits:
            save(f"params.init{i}.safetensors", {n: t for (n, _), t in zip(refs[i].named, refs[i].snapshot)})

        def link(first, name):
            """`name` as a hard link to `first` (the same bytes): False where links fail."""
            try:
                os.link(os.path.join(new_data, first), os.path.join(new_data, name))
            except OSError:
                return False
            files[name] = files[first]
            return True

        # A model without parameters usually gives every init the same outputs: those files are
        # links to init 0's, so they cost neither disk (a third of a full-size import) nor time.
        for s in seeds:
            first = f"expected.seed{s}.init{inits[0]}.safetensors"
            for i in inits:
                name = f"expected.seed{s}.init{i}.safetensors"
                if i != inits[0] and _same_bytes(expected[(s, i)], expected[(s, inits[0])]) and link(first, name):
                    continue
                save(name, {f"out{k}": o for k, o in enumerate(expected[(s, i)])})
        files = {name: f.result() for name, f in files.items()}  # an OSError of a thread is raised here
        pj_bytes = json_bytes(problem)
        man = {
            "generator": GENERATOR,
            "version": VERSION,
            "problem_sha256": sha256_bytes(pj_bytes + text),
            "files": files,
        }
        write_bytes_atomic(os.path.join(new_data, "MANIFEST.json"), json_bytes(man))

        old_model = os.path.join(pdir, "model.py")
        same_model = os.path.exists(old_model) and sha256_file(old_model) == sha256_bytes(text)
        write_bytes_atomic(old_model, text)
        gpath = os.path.join(pdir, "graph.json")
        if graph is not None:
            write_bytes_atomic(gpath, json_bytes(graph))
        elif os.path.exists(gpath):
            os.unlink(gpath)
        data = os.path.join(pdir, "data")
        if os.path.exists(data):
            os.replace(data, old_data)
        os.replace(new_data, data)
        shutil.rmtree(old_data, ignore_errors=True)
        if not same_model and os.path.exists(os.path.join(pdir, "baselines.json")):
            os.unlink(os.path.join(pdir, "baselines.json"))
        write_bytes_atomic(os.path.join(pdir, "problem.json"), pj_bytes)
    except OSError as e:
        raise Failure(f"writing {pdir} failed: {e.strerror or e}")
    finally:
        pool.shutdown(wait=True)
        shutil.rmtree(new_data, ignore_errors=True)


def cmd_import(a) -> int:
    if a.seeds < 1 or a.inits < 1:
        die("--seeds and --inits must be at least 1")
    max_bytes = None
    if getattr(a, "max_bytes", None):
        try:
            max_bytes = sizes.parse_bytes(a.max_bytes)
        except ValueError as e:
            die(f"--max-bytes: {e}")
    src = a.src
    if os.path.isdir(src):
        files = sorted(
            os.path.join(src, f) for f in os.listdir(src) if f.endswith(".py") and not f.startswith((".", "_"))
        )
        if not files:
            die(f"{src}: no .py files")
    elif os.path.isfile(src):
        files = [src]
    else:
        die(f"{src}: no such file or directory")
    try:
        os.makedirs(a.out, exist_ok=True)
    except OSError as e:
        die(f"cannot create {a.out}: {e.strerror}")
    ok, failed, results = 0, 0, []
    if getattr(a, "progress_events", False):  # mblast's live progress line: the count, then each start
        print(f"{PROG}: progress: total {len(files)}", flush=True)
    for f in files:
        t0 = time.perf_counter()
        if getattr(a, "progress_events", False):
            print(f"{PROG}: progress: start {f}", flush=True)
        entry = {"file": os.path.abspath(f)}
        phases = {"import_torch_s": common.TORCH_IMPORT_SECONDS or 0.0}
        common.TORCH_IMPORT_SECONDS = 0.0  # paid once, by the first file
        try:
            # A true FP32 reference: no TF32 in matmuls or convolutions. PyTorch's own settings
            # come back afterwards, also those the model file changed (the next file, or a
            # served baseline, must not run in them).
            def changed(what):  # called before this iteration ends: f and entry are this file's
                entry["settings_set_back"] = what
                print(f"{PROG}: {f}: the model file changed PyTorch's {', '.join(what)}; set back", file=sys.stderr)

            with settings_kept(changed), tf32_off() if a.device == "cuda" else contextlib.nullcontext():
                pdir = import_file(f, a.out, a.seeds, a.inits, a.device, phases, max_bytes)
            ok += 1
            with open(os.path.join(pdir, "problem.json"), encoding="utf-8") as fh:
                pj = json.load(fh)
            seconds = time.perf_counter() - t0
            if pj.get("scale"):
                entry["scale"] = pj["scale"]
            entry.update(
                {
                    "ok": True,
                    "problem": os.path.abspath(pdir),
                    "op_class": pj["op_class"],
                    "graph": bool(pj.get("graph")),
                    "graph_note": pj.get("graph_note"),
                    "flops_method": pj["flops_method"],
                    "seconds": seconds,
                }
            )
            graph = "graph" if pj.get("graph") else "no graph"
            print(f"{PROG}: {f}: imported to {pdir} ({pj['op_class']}, {graph}, " f"{seconds:.1f} s)", flush=True)
        except Failure as e:
            failed += 1
            entry.update({"ok": False, "reason": str(e)})
            print(f"{PROG}: {f}: {e}", file=sys.stderr, flush=True)
        except KeyboardInterrupt:
            print(f"{PROG}: {f}: interrupted", file=sys.stderr)
            return 130
        except Exception as e:  # a bug of ours, or torch failing oddly: still one line
            failed += 1
            entry.update({"ok": False, "reason": f"internal error: {one_line(e)}"})
            print(f"{PROG}: {f}: internal error: {one_line(e)}", file=sys.stderr, flush=True)
        entry["phases"] = phases
        results.append(entry)
    if len(files) > 1 or failed:
        print(f"{PROG}: imported {ok}, failed {failed}", flush=True)
    if a.json_out:
        summary = {"imported": ok, "failed": failed, "torch": torch.__version__, "device": a.device, "files": results}
        try:
            write_bytes_atomic(a.json_out, json_bytes(summary))
        except OSError as e:
            die(f"cannot write {a.json_out}: {e.strerror}")
    return 0 if failed == 0 else 1
