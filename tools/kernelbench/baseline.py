"""`baseline`: PyTorch eager and torch.compile timed by the runner's rules
(docs/kernelbench.md "Baselines")."""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import platform
import sys
import time

import torch

from . import common
from .common import FLOAT_DTYPES, Failure, die, nbytes, one_line, read_problem, write_bytes_atomic
from .tensors import (
    Reference,
    as_arg_list,
    call_user,
    flatten_outputs,
    load_kernelbench_module,
    seed_all,
    to_storable,
    torch_version,
)


def _quantile(sorted_v, q):
    pos = q * (len(sorted_v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_v) - 1)
    return sorted_v[lo] + (pos - lo) * (sorted_v[hi] - sorted_v[lo])


def _summary(samples_us, includes: str) -> dict:
    v = sorted(samples_us)
    med = _quantile(v, 0.5)
    p25, p75 = _quantile(v, 0.25), _quantile(v, 0.75)
    return {
        "median_us": med,
        "p25_us": p25,
        "p75_us": p75,
        "min_us": v[0],
        "max_us": v[-1],
        "spread_pct": 100.0 * (p75 - p25) / med if med > 0 else 0.0,
        "samples": len(v),
        "includes": includes,
    }


def _cpu_cache_bytes() -> int:
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in os.listdir(base):
            try:
                with open(os.path.join(base, d, "size")) as f:
                    s = f.read().strip()
                mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
                best = max(best, int(s.rstrip("KMG")) * mult)
            except (OSError, ValueError):
                pass
    except OSError:
        pass
    return best or (32 << 20)


# Debian's alternatives put the reference (netlib) libblas.so.3 in .../blas/; an optimised one
# in openblas-pthread/, openblas-openmp/, blis-*/ (or PyTorch is built with MKL).
_REFERENCE_BLAS_DIR = "/blas/"
_BLAS_NAMES = ("libblas.so", "libopenblas", "libmkl_rt", "libmkl_core", "libblis", "libcblas.so")


def blas_info(mapped_paths, torch_openmp: bool = False) -> dict:
    """Which BLAS libraries are mapped, and a note when the libblas.so.3 resolved is Debian's
    reference (netlib) one: that makes every eager matmul and linear a weak baseline. Another
    BLAS may be mapped beside it for LAPACK's sake; the libblas.so that was resolved decides.
    Also a note when OpenBLAS's pthread build runs beside PyTorch's OpenMP threads
    (`torch_openmp`): the two thread sets oversubscribe the cores (mblast_kernelbench.py picks the
    OpenMP build when it is installed)."""
    libs = []
    for path in mapped_paths:
        if path.startswith("/") and any(n in os.path.basename(path) for n in _BLAS_NAMES) and path not in libs:
            libs.append(path)
    info = {"blas": libs}
    if any(os.path.basename(p).startswith("libblas.so") and _REFERENCE_BLAS_DIR in p for p in libs):
        info["blas_note"] = (
            "PyTorch runs on the reference (netlib) BLAS, so eager matrix products are far slower "
            "than an optimised BLAS makes them; install one (Debian: libopenblas0-openmp)"
        )
    elif any("openblas-pthread/" in p for p in libs) and torch_openmp:
        info["blas_note"] = (
            "PyTorch's OpenMP threads run beside OpenBLAS's own pthreads, which makes eager matrix "
            "products erratic and slow; install libopenblas0-openmp (the helper then uses it)"
        )
    return info


def _cpu_blas() -> dict:
    """blas_info of this process, after one product (so a lazily loaded library is mapped)."""
    a = torch.ones(64, 64)
    torch.mm(a, a)
    try:
        with open("/proc/self/maps") as f:
            return blas_info(
                (ln.split()[-1] for ln in f if len(ln.split()) >= 6), "OpenMP" in torch.__config__.parallel_info()
            )
    except OSError:
        return {"blas": []}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _evictor(mode: str, library: str | None, cache: int):
    """The function that makes a CPU's caches cold by evicting this process's memory (mblast's
    libmblast_evict.so, the code the runner's worker uses for an OpenCL CPU device, see
    include/mblast/cache_evict.h), or None for a sweep: where eviction is not available, `mode`
    (the target's device.cache_flush: auto, evict or sweep) is sweep, or it is auto and the
    library's rule for this cache size (the worker's) says sweep."""
    if mode == "sweep" or not library:
        return None
    try:
        lib = ctypes.CDLL(library)
    except OSError:
        return None
    if not lib.mblast_eviction_available():
        return None
    if mode == "auto" and not lib.mblast_prefer_eviction(ctypes.c_ulonglong(cache)):
        return None
    fn = lib.mblast_evict_process_data
    fn.argtypes = [ctypes.c_void_p]
    fn.restype = ctypes.c_int
    lib.mblast_busy_after_eviction.restype = ctypes.c_double
    return (lambda: fn(None), lib.mblast_busy_after_eviction())


class _Timer:
    def __init__(self, device: str, cache_flush: str = "auto", evict_library: str | None = None):
        self.device = device
        self.evict = None
        if device == "cuda":
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            l2 = int(getattr(props, "L2_cache_size", 0) or 0)
            self.flush_bytes = max(2 * l2, 16 << 20)
            self.info = {
                "type": "cuda",
                "name": props.name,
                "capability": f"{props.major}.{props.minor}",
                "l2_bytes": l2,
                "memory_bytes": int(props.total_memory),
                "allow_tf32": {
                    "matmul": bool(torch.backends.cuda.matmul.allow_tf32),
                    "cudnn": bool(torch.backends.cudnn.allow_tf32),
                },
            }
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)
        else:
            cache = _cpu_cache_bytes()
            self.flush_bytes = max(2 * cache, 8 << 20)
            # PyTorch gets every core this process may use, as an OpenCL CPU device does: an
            # OpenMP runtime that starts with one thread would make the baseline look slow.
            # MBLAST_TORCH_THREADS overrides it.
            want = int(os.environ.get("MBLAST_TORCH_THREADS", "0") or 0) or len(os.sched_getaffinity(0))
            if want > 0 and torch.get_num_threads() != want:
                torch.set_num_threads(want)
            self.info = {
                "type": "cpu",
                "name": _cpu_name(),
                "cache_bytes": cache,
                "torch_threads": torch.get_num_threads(),
                **_cpu_blas(),
            }
            self.evict = _evictor(cache_flush, evict_library, cache)  # (evict, seconds busy after it)
        self.flush_buf = None if self.evict else torch.empty(self.flush_bytes, dtype=torch.uint8, device=device)
        # 256 KiB: large enough that PyTorch splits sin over its threads, small next to any L2.
        self.busy = torch.ones(1 << 16, dtype=torch.float32) if self.evict else None
        self.flushes = 0
        self.method = (
            "CUDA events on the current stream: start event before the call; after it "
            "torch.cuda.synchronize() (device-wide), then the end event; L2 flushed before "
            f"each timed call by reading and writing {self.flush_bytes >> 20} MiB (2x L2)"
            if device == "cuda"
            else "time.perf_counter() around the call (CPU ops are synchronous); caches cold before "
            "each timed call: every cache line of the process's resident data memory flushed "
            f"(CLFLUSHOPT, libmblast_evict), then {round(self.evict[1] * 1000)} ms of arithmetic on "
            "PyTorch's threads"
            if self.evict
            else "time.perf_counter() around the call (CPU ops are synchronous); caches flushed "
            f"before each timed call by reading and writing {self.flush_bytes >> 20} MiB (2x the largest "
            "CPU cache)"
        )

    def flush(self):
        self.flushes += 1
        if self.evict:
            evict, busy = self.evict
            evict()
            # Then arithmetic on PyTorch's threads on a small tensor, as the runner's worker keeps
            # an OpenCL CPU device busy after its eviction (for the library's figure): the timed
            # call starts on threads that were just working, not on threads that idled meanwhile.
            end = time.perf_counter() + busy
            while time.perf_counter() < end:
                torch.sin(self.busy, out=self.busy)
            return
        # Read and write every byte: a plain fill may be done with non-temporal stores on a
        # CPU, which evict nothing (the OpenCL runner flushes the same way, with a kernel).
        self.flush_buf.add_(1)
        if self.device == "cuda":
            torch.cuda.synchronize()

    def time_call(self, fn, args) -> float:
        """Microseconds of one call."""
        if self.device == "cuda":
            torch.cuda.synchronize()
            self.start.record()
            fn(*args)
            torch.cuda.synchronize()
            self.end.record()
            self.end.synchronize()
            return self.start.elapsed_time(self.end) * 1e3
        t0 = time.perf_counter()
        fn(*args)
        return (time.perf_counter() - t0) * 1e6


def _measure(timer, fn, sets, warmup, repeats, min_seconds):
    n = len(sets)
    for k in range(warmup):
        fn(*sets[k % n])
    if timer.device == "cuda":
        torch.cuda.synchronize()
    # The runner's rule: at least `repeats` timed calls, and the loop (calls and the cache
    # flushes between them) runs `min_seconds` of wall time; a call much shorter than a flush
    # would otherwise spend most of the baseline's time flushing.
    samples, k = [], 0
    wall0 = time.perf_counter()
    while True:
        timer.flush()
        samples.append(timer.time_call(fn, sets[k % n]))
        k += 1
        if len(samples) >= repeats and time.perf_counter() - wall0 >= min_seconds:
            break
        if len(samples) >= 100000:
            break
    return samples


def tf32_settings():
    """PyTorch's TF32 switches for FP32 convolutions and matrix products: (label, object,
    attribute, the value that turns TF32 off). torch >= 2.9 has the fp32_precision settings
    ("ieee": no TF32), which the older allow_tf32 flags give way to; older torch has only the
    flags."""
    b = torch.backends
    if hasattr(getattr(b.cudnn, "conv", None), "fp32_precision"):
        return [
            ("cudnn.conv.fp32_precision", b.cudnn.conv, "fp32_precision", "ieee"),
            ("cuda.matmul.fp32_precision", b.cuda.matmul, "fp32_precision", "ieee"),
        ]
    return [
        ("cudnn.allow_tf32", b.cudnn, "allow_tf32", False),
        ("cuda.matmul.allow_tf32", b.cuda.matmul, "allow_tf32", False),
    ]


@contextlib.contextmanager
def tf32_off():
    """PyTorch's FP32 convolutions and matrix products without TF32 tensor cores, restored after.
    PyTorch's default lets cuDNN convolutions use TF32, whose error the problems' strict FP32
    tolerance refuses."""
    settings = tf32_settings()
    saved = [(obj, name, getattr(obj, name)) for _, obj, name, _ in settings]
    try:
        for _, obj, name, value in settings:
            setattr(obj, name, value)
        yield
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)


def process_settings() -> dict:
    """PyTorch's process-wide settings that a model file may change when it is loaded or run (at
    module level, in its constructor or forward): label -> (get, set). settings_kept() puts them
    back after each file an import reads and after each request `serve` runs, so what one
    problem's file did does not carry into the next problem's import or timing. (The CPU
    baseline sets its thread count itself on every request.)"""
    cudnn = torch.backends.cudnn
    out = {
        "default dtype": (torch.get_default_dtype, torch.set_default_dtype),
        "grad mode": (torch.is_grad_enabled, torch.set_grad_enabled),
        "deterministic algorithms": (torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms),
        "cudnn.benchmark": (lambda: cudnn.benchmark, lambda v: setattr(cudnn, "benchmark", v)),
        "cudnn.deterministic": (lambda: cudnn.deterministic, lambda v: setattr(cudnn, "deterministic", v)),
    }
    for label, obj, name, _ in tf32_settings():
        out[label] = (lambda o=obj, n=name: getattr(o, n), lambda v, o=obj, n=name: setattr(o, n, v))
    return out


@contextlib.contextmanager
def settings_kept(on_change):
    """Runs the block with PyTorch's process-wide settings (process_settings()) put back
    afterwards, also when it raises; on_change gets "label (changed -> put back)" for each one
    the block changed, if any."""
    settings = process_settings()
    saved = {label: get() for label, (get, _) in settings.items()}
    try:
        yield
    finally:
        changed = []
        for label, (get, put) in settings.items():
            now = get()
            if now != saved[label]:
                put(saved[label])
                changed.append(f"{label} ({now} -> {saved[label]})")
        if changed:
            on_change(changed)


TF32_OFF_NOTE = (
    "timed with TF32 off (cuDNN convolutions and matmuls in IEEE FP32): "
    "PyTorch's default output is outside the problem's tolerance (eager_default)"
)


def _check_against_expected(out, pdir, problem, seed, init) -> dict:
    from safetensors.torch import load_file

    exp = load_file(os.path.join(pdir, "data", f"expected.seed{seed}.init{init}.safetensors"))
    outs, _ = flatten_outputs(out, "forward")
    worst, ok = 0.0, True
    for k, o in enumerate(outs):
        d = problem["outputs"][k]
        e = exp[d["name"]]
        got = to_storable(o)
        if list(got.shape) != list(e.shape):
            return {"within_tolerance": False, "reason": f"{d['name']} has shape {list(got.shape)}"}
        if d["dtype"] in FLOAT_DTYPES:
            t = problem.get("tolerance", {}).get(d["dtype"], {"atol": 0, "rtol": 0})
            diff = (got.double() - e.double()).abs()
            worst = max(worst, float(diff.max()))
            ok = ok and bool((diff <= t["atol"] + t["rtol"] * e.double().abs()).all())
        else:
            ok = ok and bool(torch.equal(got, e))
    return {"within_tolerance": ok, "max_abs_error": worst, "seed": seed, "init": init}


def run_baseline(
    pdir: str,
    device: str,
    do_compile: bool,
    warmup: int,
    repeats: int,
    min_seconds: float,
    cache_flush: str = "auto",
    evict_library: str | None = None,
) -> dict:
    from safetensors.torch import load_file

    t_start = time.perf_counter()
    # Where the helper's time goes, in seconds (import_torch_s: measured by the entry script).
    phases = {"import_torch_s": common.TORCH_IMPORT_SECONDS}
    problem = read_problem(pdir)
    if device == "cuda" and not torch.cuda.is_available():
        raise Failure("--device cuda, but torch.cuda.is_available() is False here")
    model_path = os.path.join(pdir, problem.get("model") or "model.py")
    with open(model_path, "rb") as f:
        text = f.read()
    mod = load_kernelbench_module(model_path, text)
    seed_all(0)
    init_args = as_arg_list(call_user("get_init_inputs()", mod.get_init_inputs), "get_init_inputs()")
    init = problem["inits"][0]
    ref = Reference(mod, init_args, init, device)
    params = load_file(os.path.join(pdir, "data", f"params.init{init}.safetensors"))
    by_name = dict(ref.named)
    with torch.no_grad():
        for d in problem["parameters"]:
            if d["name"] not in by_name or d["name"] not in params:
                raise Failure(f"parameter '{d['name']}' is missing from model.py's Model or " "from the data")
            t = by_name[d["name"]]
            src = params[d["name"]]
            if d.get("torch_dtype") == "bool":
                src = src.bool()
            t.copy_(src.reshape(t.shape).to(t.dtype))
    ref.snapshot = [t.detach().clone() for _, t in ref.named]
    model = ref.model

    # Rotating argument sets: every seed's inputs, cloned up to 4 distinct sets (the
    # runner's default), within a memory budget.
    seed_sets = []
    for s in problem["seeds"]:
        data = load_file(os.path.join(pdir, "data", f"inputs.seed{s['seed']}.safetensors"))
        seed_sets.append(data)
    consts = {c["name"]: c["value"] for c in problem.get("constants", [])}
    decl = {d["name"]: d for d in problem["inputs"]}

    def make_args(data):
        args = []
        for name in problem["arguments"]:
            if name in consts:
                args.append(consts[name])
            else:
                d = decl[name]
                t = data[name]
                if d.get("torch_dtype") == "bool":
                    t = t.bool()
                if "torch_shape" in d:
                    t = t.reshape(d["torch_shape"])
                args.append(t.to(device).clone())
        return args

    set_bytes = sum(nbytes(d) for d in problem["inputs"])
    budget = (4 << 30) if device == "cuda" else (1 << 30)
    n_sets = max(len(seed_sets), min(4, budget // max(set_bytes, 1)))
    sets = [make_args(seed_sets[k % len(seed_sets)]) for k in range(n_sets)]

    timer = _Timer(device, cache_flush, evict_library)
    phases["setup_s"] = time.perf_counter() - t_start  # model, parameters, inputs on the device
    result = {
        "problem": problem["name"],
        "torch": torch.__version__,
        "phases": phases,
        "python": platform.python_version(),
        "device": timer.info,
        "timing": {
            "method": timer.method,
            "warmup": warmup,
            "min_repeats": repeats,
            "min_seconds": min_seconds,
            "rotating_sets": n_sets,
            "parameters": f"data/params.init{init}.safetensors",
            "module_mode": "train" if model.training else "eval",
        },
    }

    def eager(*args):
        with torch.no_grad():
            return model(*args)

    t_eager = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        try:
            check = _check_against_expected(
                eager(*make_args(seed_sets[0])), pdir, problem, problem["seeds"][0]["seed"], init
            )
            samples = _measure(timer, eager, sets, warmup, repeats, min_seconds)
        except Exception as e:
            raise Failure(f"eager forward raised {one_line(e)}")
    eager_includes = (
        "Python dispatch of every op + one kernel launch per op (per-op CPU kernels on the "
        "CPU) + the kernels; excludes copies to the device; the device is synchronised "
        "before the clock stops"
    )
    result["eager"] = _summary(samples, eager_includes)
    result["eager"]["check"] = check

    # On CUDA, PyTorch's default runs FP32 convolutions on TF32 tensor cores, outside a strict
    # FP32 tolerance: the baseline that a correct candidate is compared with is then PyTorch
    # with TF32 off, when that is within the tolerance (the default's figures are kept).
    strict = False
    if device == "cuda" and not check.get("within_tolerance", True):
        try:  # a failure here keeps the default's figures, with the reason
            with contextlib.redirect_stdout(sys.stderr), tf32_off():
                check32 = _check_against_expected(
                    eager(*make_args(seed_sets[0])), pdir, problem, problem["seeds"][0]["seed"], init
                )
                if check32["within_tolerance"]:
                    samples32 = _measure(timer, eager, sets, warmup, repeats, min_seconds)
                    result["eager_default"] = result["eager"]
                    result["eager"] = _summary(samples32, eager_includes)
                    result["eager"]["check"] = check32
                    result["eager"]["tf32"] = TF32_OFF_NOTE
                    strict = True
                else:
                    result["eager"]["tf32_off_check"] = check32
        except Exception as e:
            result["eager"]["tf32_off_failed"] = one_line(e)
    phases["eager_s"] = time.perf_counter() - t_eager  # checks and timing, TF32 retry included

    onnx_path = getattr(mod, "MBLAST_ONNX_PATH", None)
    if onnx_path:  # an ONNX model (mblast optimize-model's wrapper): onnxruntime is its own baseline
        t_ort = time.perf_counter()
        try:
            with contextlib.redirect_stdout(sys.stderr):
                result["onnxruntime"] = _time_onnxruntime(
                    onnx_path,
                    make_args,
                    seed_sets,
                    pdir,
                    problem,
                    init,
                    timer,
                    device,
                    warmup,
                    repeats,
                    min_seconds,
                    sets,
                )
        except Exception as e:
            result["onnxruntime"] = {"unavailable": f"onnxruntime failed: {one_line(e)}"}
        phases["onnxruntime_s"] = time.perf_counter() - t_ort

    if not do_compile:
        result["compile"] = {"unavailable": "not requested (pass --compile)"}
    elif not hasattr(torch, "compile"):
        result["compile"] = {"unavailable": f"torch {'.'.join(map(str, torch_version()))} " "has no torch.compile"}
    else:
        t_compile = time.perf_counter()
        try:
            # the same precision as the eager baseline, for the compilation too
            with tf32_off() if strict else contextlib.nullcontext():
                result["compile"] = _time_compiled(
                    model, make_args, seed_sets, pdir, problem, init, timer, device, warmup, repeats, min_seconds, sets
                )
            if strict:
                result["compile"]["tf32"] = TF32_OFF_NOTE.replace(" (eager_default)", "")
        except Exception as e:
            result["compile"] = {"unavailable": f"torch.compile failed: {one_line(e)}"}
        phases["compile_s"] = time.perf_counter() - t_compile  # compilation, check and timing
    return result


def _time_onnxruntime(
    onnx_path, make_args, seed_sets, pdir, problem, init, timer, device, warmup, repeats, min_seconds, sets
) -> dict:
    """onnxruntime on the ONNX file the model came from: an InferenceSession on the CPU (or CUDA
    where its provider is there and the device is a GPU), fed the same argument sets as numpy."""
    import onnxruntime as ort

    providers = ["CPUExecutionProvider"]
    if device == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            return {"unavailable": "this onnxruntime has no CUDAExecutionProvider"}
        providers = ["CUDAExecutionProvider"]
    session = ort.InferenceSession(onnx_path, providers=providers)
    names = [i.name for i in session.get_inputs()]
    consts = {c["name"] for c in problem.get("constants", [])}
    tensor_args = [a for a in problem["arguments"] if a not in consts]
    if len(tensor_args) != len(names):
        return {"unavailable": f"the problem has {len(tensor_args)} tensor inputs, the ONNX graph {len(names)}"}

    def feed(args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        return {n: t.detach().cpu().numpy() for n, t in zip(names, tensors)}

    def run(*args):
        outs = session.run(None, feed(args))
        outs = [torch.from_numpy(o) for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    check = _check_against_expected(run(*make_args(seed_sets[0])), pdir, problem, problem["seeds"][0]["seed"], init)
    samples = _measure(timer, run, sets, warmup, repeats, min_seconds)
    r = _summary(
        samples,
        "onnxruntime InferenceSession.run with "
        + providers[0]
        + " (default session options, all its threads): the inputs handed over as numpy arrays, "
        "the outputs returned to the host",
    )
    r["check"] = check
    r["version"] = ort.__version__
    return r


def _time_compiled(
    model, make_args, seed_sets, pdir, problem, init, timer, device, warmup, repeats, min_seconds, sets
) -> dict:
    """torch.compile of the model: compiled on the first call (timed apart), checked, timed."""
    compiled = torch.compile(model)

    def comp(*args):
        with torch.no_grad():
            return compiled(*args)

    with contextlib.redirect_stdout(sys.stderr):
        t0 = time.perf_counter()
        out = comp(*make_args(seed_sets[0]))
        if device == "cuda":
            torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        check = _check_against_expected(out, pdir, problem, problem["seeds"][0]["seed"], init)
        samples = _measure(timer, comp, sets, warmup, repeats, min_seconds)
    r = _summary(
        samples,
        (
            "the torch.compile'd module (default mode): Python/guard overhead of the "
            "compiled graph + its generated kernels' launches + the kernels; compilation "
            "itself excluded (first call, reported as compile_seconds); excludes copies to "
            "the device; the device is synchronised before the clock stops"
        ),
    )
    r["compile_seconds"] = compile_s
    r["check"] = check
    return r


def cmd_baseline(a) -> int:
    if a.warmup < 0 or a.repeats < 1 or a.min_seconds < 0:
        die("--warmup >= 0, --repeats >= 1, --min-seconds >= 0")
    try:
        r = run_baseline(
            a.problem, a.device, a.compile, a.warmup, a.repeats, a.min_seconds, a.cache_flush, a.evict_library
        )
    except Failure as e:
        die(f"{a.problem}: {e}")
    text = json.dumps(r, indent=2)
    if a.json_out:
        try:
            write_bytes_atomic(a.json_out, (text + "\n").encode("utf-8"))
        except OSError as e:
            die(f"cannot write {a.json_out}: {e.strerror}")
    print(text)
    return 0
