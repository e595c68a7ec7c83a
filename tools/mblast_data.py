#!/usr/bin/env python3
"""mblast_data -- deterministic reference-data generator for mblast problem directories.

Usage:
    python3 tools/mblast_data.py PROBLEM_DIR [PROBLEM_DIR ...] [--force] [--check]
                                 [--quiet-if-fresh]

For every problem directory this reads problem.json, imports the directory's reference.py
and writes into PROBLEM_DIR/data/:

    inputs.seed<S>.safetensors            one per entry of "seeds"  (keys: input names)
    params.init<I>.safetensors            one per entry of "inits"  (keys: parameter names)
    expected.seed<S>.init<I>.safetensors  one per seed x init       (keys: output names)
    MANIFEST.json                         generator, version, problem hash, file hashes

Inputs for seed S come from numpy.random.default_rng(S); parameters for init I from
numpy.random.default_rng(1_000_003 + I). Expected outputs are computed by the reference in
float64 and then cast to each output's declared dtype.

--force  regenerate even when MANIFEST.json says the data is current.
--check  only verify that the data on disk matches problem.json, reference.py and the
         manifest; write nothing. Exit 1 when anything is stale or missing.
--quiet-if-fresh  print nothing for a problem whose data is already up to date.

Exit status: 0 success, 1 stale data (--check only), 2 a problem could not be processed
(the reason is printed as "mblast_data: <problem>: <reason>" on stderr). A failed or
interrupted run never leaves a half-written file: every file is written to a temporary name
and renamed into place, and MANIFEST.json is removed first and written last.

reference.py files import the sampling helper from this module:

    from mblast_data import sample
    x = sample(rng, (512, 1024), distribution, "f32")
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import re
import sys

sys.dont_write_bytecode = True  # never leave __pycache__ in tools/ or in problem dirs

try:
    import numpy as np  # noqa: E402
except ImportError:  # pragma: no cover - depends on the machine
    if __name__ == "__main__":
        sys.stderr.write(
            f"mblast_data: numpy is missing for {sys.executable} " "(install python3-numpy, or use a venv with numpy)\n"
        )
        sys.exit(2)
    raise

GENERATOR = "tools/mblast_data.py"
VERSION = 1
FORMAT = 1
PARAM_SEED_BASE = 1_000_003

# mblast dtype name -> (numpy dtype, safetensors dtype name)
DTYPES = {
    "f32": (np.dtype(np.float32), "F32"),
    "f16": (np.dtype(np.float16), "F16"),
    "f64": (np.dtype(np.float64), "F64"),
    "i32": (np.dtype(np.int32), "I32"),
    "i64": (np.dtype(np.int64), "I64"),
    "i8": (np.dtype(np.int8), "I8"),
    "u8": (np.dtype(np.uint8), "U8"),
}
FLOAT_DTYPES = ("f32", "f16", "f64")
DISTRIBUTIONS = ("uniform01", "signed_uniform", "normal")


class ProblemError(Exception):
    """A one-line reason why a problem directory cannot be processed."""


# --------------------------------------------------------------------------------------
# Sampling helper used by reference.py files
# --------------------------------------------------------------------------------------


def _numpy_dtype(dtype) -> np.dtype:
    if isinstance(dtype, str):
        if dtype == "bf16":
            raise ValueError("dtype bf16 is not supported by the numpy generator")
        if dtype in DTYPES:
            return DTYPES[dtype][0]
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    dt = np.dtype(dtype)
    if dt not in [v[0] for v in DTYPES.values()]:
        raise ValueError(f"unsupported numpy dtype {dt}")
    return dt


def sample(rng: np.random.Generator, shape, distribution: str, dtype="f32", scale: float = 1.0) -> np.ndarray:
    """Draw a C-contiguous array of `shape` and `dtype` from `distribution`.

    Float dtypes (values are drawn in float64, multiplied by `scale`, then cast once):
      uniform01       uniform on [0, 1)
      signed_uniform  uniform on (-1, 1)
      normal          standard normal N(0, 1)
    Integer dtypes get small integers (`scale` is ignored):
      uniform01 -> [0, 16), signed_uniform -> [-16, 16) ([0, 16) for u8),
      normal -> round(4 * N(0, 1)) clipped to the dtype's range.
    """
    dt = _numpy_dtype(dtype)
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(d) for d in shape)
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {distribution!r} " f"(known: {', '.join(DISTRIBUTIONS)})")
    if dt.kind == "f":
        if distribution == "uniform01":
            v = rng.random(shape)
        elif distribution == "signed_uniform":
            v = rng.random(shape) * 2.0 - 1.0
        else:
            v = rng.standard_normal(shape)
        out = (v * float(scale)).astype(dt)
        if distribution in ("uniform01", "signed_uniform") and scale == 1.0:
            # keep the interval open at 1 (and at -1) after rounding to a narrower dtype
            below_one = np.nextafter(dt.type(1), dt.type(0))
            lo = dt.type(0) if distribution == "uniform01" else -below_one
            np.clip(out, lo, below_one, out=out)
        return np.ascontiguousarray(out)
    info = np.iinfo(dt)
    if distribution == "uniform01":
        v = rng.integers(0, 16, size=shape)
    elif distribution == "signed_uniform":
        v = rng.integers(0 if info.min == 0 else -16, 16, size=shape)
    else:
        v = np.rint(rng.standard_normal(shape) * 4.0)
    return np.ascontiguousarray(np.clip(v, info.min, info.max).astype(dt))


# --------------------------------------------------------------------------------------
# problem.json
# --------------------------------------------------------------------------------------


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_tensor_list(spec: dict, key: str) -> list:
    lst = spec.get(key)
    if not isinstance(lst, list):
        raise ProblemError(f"problem.json: '{key}' must be a list")
    names = set()
    for i, t in enumerate(lst):
        where = f"problem.json: {key}[{i}]"
        if not isinstance(t, dict):
            raise ProblemError(f"{where} must be an object")
        name = t.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
            raise ProblemError(f"{where}: 'name' must be an identifier")
        if name in names:
            raise ProblemError(f"{where}: duplicate name '{name}'")
        names.add(name)
        dt = t.get("dtype")
        if dt == "bf16":
            raise ProblemError(f"{where} ('{name}'): dtype bf16 is not supported by the " "numpy generator")
        if dt not in DTYPES:
            raise ProblemError(f"{where} ('{name}'): unknown dtype {dt!r} " f"(known: {', '.join(DTYPES)})")
        shape = t.get("shape")
        if not isinstance(shape, list) or len(shape) > 8 or not all(_is_int(d) and d >= 1 for d in shape):
            raise ProblemError(f"{where} ('{name}'): 'shape' must be a list of at most 8 " "positive integers")
    return lst


def load_problem(pdir: str) -> tuple[dict, bytes, bytes]:
    pj = os.path.join(pdir, "problem.json")
    rp = os.path.join(pdir, "reference.py")
    if not os.path.isdir(pdir):
        raise ProblemError("not a directory")
    try:
        with open(pj, "rb") as f:
            pj_bytes = f.read()
    except OSError as e:
        raise ProblemError(f"cannot read problem.json: {e.strerror}")
    try:
        with open(rp, "rb") as f:
            rp_bytes = f.read()
    except OSError as e:
        raise ProblemError(f"cannot read reference.py: {e.strerror}")
    try:
        spec = json.loads(pj_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProblemError(f"problem.json is not valid JSON: {e}")
    if not isinstance(spec, dict):
        raise ProblemError("problem.json must hold an object")
    if spec.get("format") != FORMAT:
        raise ProblemError(f"problem.json: 'format' must be {FORMAT}, " f"got {spec.get('format')!r}")
    if not isinstance(spec.get("name"), str) or not spec["name"]:
        raise ProblemError("problem.json: 'name' must be a non-empty string")
    ins = _check_tensor_list(spec, "inputs")
    prs = _check_tensor_list(spec, "parameters")
    outs = _check_tensor_list(spec, "outputs")
    if not outs:
        raise ProblemError("problem.json: 'outputs' must not be empty")
    names = [t["name"] for t in ins + prs + outs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ProblemError(f"problem.json: tensor name used twice: {sorted(dup)[0]}")

    tol = spec.get("tolerance")
    if not isinstance(tol, dict):
        raise ProblemError("problem.json: 'tolerance' must be an object keyed by dtype")
    for dt, t in tol.items():
        if dt not in DTYPES:
            raise ProblemError(f"problem.json: tolerance for unknown dtype {dt!r}")
        if not isinstance(t, dict):
            raise ProblemError(f"problem.json: tolerance.{dt} must be an object")
        for k in ("atol", "rtol", "min_match"):
            v = t.get(k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ProblemError(f"problem.json: tolerance.{dt}.{k} must be a number")
        if t["atol"] < 0 or t["rtol"] < 0:
            raise ProblemError(f"problem.json: tolerance.{dt}: atol and rtol must be >= 0")
        if not 0 < t["min_match"] <= 1:
            raise ProblemError(f"problem.json: tolerance.{dt}.min_match must be in (0, 1]")
    for o in outs:
        if o["dtype"] in FLOAT_DTYPES and o["dtype"] not in tol:
            raise ProblemError(
                f"problem.json: output '{o['name']}' is {o['dtype']} but " f"'tolerance' has no entry for {o['dtype']}"
            )

    for k in ("flops", "bytes"):
        v = spec.get(k)
        if not _is_int(v) or v < 0:
            raise ProblemError(f"problem.json: '{k}' must be a non-negative integer")

    seeds = spec.get("seeds")
    if not isinstance(seeds, list) or not seeds:
        raise ProblemError("problem.json: 'seeds' must be a non-empty list")
    seen = set()
    for i, s in enumerate(seeds):
        if (
            not isinstance(s, dict)
            or not _is_int(s.get("seed"))
            or s["seed"] < 0
            or not isinstance(s.get("distribution"), str)
        ):
            raise ProblemError(f"problem.json: seeds[{i}] must be " '{"seed": <int >= 0>, "distribution": <string>}')
        if s["seed"] in seen:
            raise ProblemError(f"problem.json: seed {s['seed']} listed twice")
        seen.add(s["seed"])
    inits = spec.get("inits")
    if not isinstance(inits, list) or not inits or not all(_is_int(i) and i >= 0 for i in inits):
        raise ProblemError("problem.json: 'inits' must be a non-empty list of integers >= 0")
    if len(set(inits)) != len(inits):
        raise ProblemError("problem.json: 'inits' lists an init twice")
    return spec, pj_bytes, rp_bytes


def file_plan(spec: dict) -> list[str]:
    seeds = [s["seed"] for s in spec["seeds"]]
    inits = spec["inits"]
    names = [f"inputs.seed{s}.safetensors" for s in seeds]
    names += [f"params.init{i}.safetensors" for i in inits]
    names += [f"expected.seed{s}.init{i}.safetensors" for s in seeds for i in inits]
    return names


# Files this generator owns inside data/ (stale ones are removed on regeneration).
_OWNED = re.compile(r"(inputs\.seed\d+|params\.init\d+|expected\.seed\d+\.init\d+)" r"\.safetensors")


# --------------------------------------------------------------------------------------
# Manifest
# --------------------------------------------------------------------------------------


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def problem_hash(pj_bytes: bytes, rp_bytes: bytes) -> str:
    return hashlib.sha256(pj_bytes + rp_bytes).hexdigest()


def manifest_status(data_dir: str, spec: dict, phash: str) -> str | None:
    """None when the data is current, else a one-line reason why it is not."""
    mpath = os.path.join(data_dir, "MANIFEST.json")
    try:
        with open(mpath, "rb") as f:
            man = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        return "no data/MANIFEST.json"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "data/MANIFEST.json is unreadable"
    if not isinstance(man, dict) or man.get("version") != VERSION or man.get("generator") != GENERATOR:
        return "data/MANIFEST.json was written by another generator version"
    if man.get("problem_sha256") != phash:
        return "problem.json or reference.py changed since the data was generated"
    files = man.get("files")
    plan = file_plan(spec)
    if not isinstance(files, dict) or sorted(files) != sorted(plan):
        return "data/MANIFEST.json lists other files than problem.json asks for"
    for name in plan:
        p = os.path.join(data_dir, name)
        if not os.path.isfile(p):
            return f"data/{name} is missing"
        if _sha256_file(p) != files[name]:
            return f"data/{name} does not match its hash in MANIFEST.json"
    return None


# --------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------


def import_reference(pdir: str, phash: str):
    path = os.path.join(pdir, "reference.py")
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    mod_name = f"mblast_reference_{phash[:16]}"
    try:
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise ProblemError("cannot import reference.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except ProblemError:
        raise
    except Exception as e:  # the reference is user code: any failure is a reason
        raise ProblemError(f"importing reference.py failed: {_one_line(e)}")
    for fn in ("make_inputs", "make_params", "reference"):
        if not callable(getattr(mod, fn, None)):
            raise ProblemError(f"reference.py does not define {fn}()")
    return mod


def _one_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0]}" if msg else type(e).__name__


def _call(fn, what: str, *args):
    try:
        out = fn(*args)
    except ProblemError:
        raise
    except Exception as e:
        raise ProblemError(f"{what} raised {_one_line(e)}")
    if not isinstance(out, dict):
        raise ProblemError(f"{what} must return a dict, got {type(out).__name__}")
    return out


def _validate(arrays: dict, decl: list, what: str) -> dict:
    """Check names, dtypes and shapes exactly; return read-only contiguous arrays."""
    want = [t["name"] for t in decl]
    got = list(arrays)
    missing = [n for n in want if n not in arrays]
    extra = [n for n in got if n not in want]
    if missing:
        raise ProblemError(f"{what} did not return '{missing[0]}'")
    if extra:
        raise ProblemError(f"{what} returned undeclared tensor '{extra[0]}'")
    out = {}
    for t in decl:
        a = arrays[t["name"]]
        if not isinstance(a, np.ndarray):
            raise ProblemError(f"{what}: '{t['name']}' is a {type(a).__name__}, " "not a numpy array")
        dt = DTYPES[t["dtype"]][0]
        if a.dtype != dt:
            raise ProblemError(
                f"{what}: '{t['name']}' has dtype {a.dtype}, problem.json " f"declares {t['dtype']} ({dt})"
            )
        if list(a.shape) != t["shape"]:
            raise ProblemError(
                f"{what}: '{t['name']}' has shape {list(a.shape)}, " f"problem.json declares {t['shape']}"
            )
        a = np.ascontiguousarray(a).copy()
        a.setflags(write=False)
        out[t["name"]] = a
    return out


def _expected(raw: dict, decl: list, what: str) -> dict:
    want = [t["name"] for t in decl]
    missing = [n for n in want if n not in raw]
    extra = [n for n in raw if n not in want]
    if missing:
        raise ProblemError(f"{what} did not return '{missing[0]}'")
    if extra:
        raise ProblemError(f"{what} returned undeclared output '{extra[0]}'")
    out = {}
    for t in decl:
        name = t["name"]
        try:
            a = np.asarray(raw[name])
        except Exception as e:
            raise ProblemError(f"{what}: output '{name}' is not an array ({_one_line(e)})")
        if list(a.shape) != t["shape"]:
            raise ProblemError(
                f"{what}: output '{name}' has shape {list(a.shape)}, " f"problem.json declares {t['shape']}"
            )
        if a.dtype.kind not in "fiub":
            raise ProblemError(f"{what}: output '{name}' has non-numeric dtype {a.dtype}")
        dt = DTYPES[t["dtype"]][0]
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            raise ProblemError(f"{what}: output '{name}' has NaN or Inf values")
        if dt.kind == "f":
            with np.errstate(over="ignore"):
                c = a.astype(dt)
            if not np.all(np.isfinite(c)):
                raise ProblemError(f"{what}: output '{name}' overflows {t['dtype']}")
        else:
            if a.dtype.kind == "f":
                a = np.rint(a)
            info = np.iinfo(dt)
            if a.size and (a.min() < info.min or a.max() > info.max):
                raise ProblemError(f"{what}: output '{name}' does not fit {t['dtype']}")
            c = a.astype(dt)
        out[name] = np.ascontiguousarray(c)
    return out


def _has_negative_float(arrays: dict, decl: list) -> bool:
    for t in decl:
        if t["dtype"] in FLOAT_DTYPES and bool(np.any(arrays[t["name"]] < 0)):
            return True
    return False


class _Writer:
    """Writes files under temporary names; rename_all() moves them into place."""

    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        self.pending: list[tuple[str, str]] = []  # (tmp path, final path)

    def _tmp(self, name: str) -> str:
        return os.path.join(self.data_dir, f".{name}.tmp{os.getpid()}")

    def safetensors(self, name: str, arrays: dict) -> None:
        from safetensors.numpy import save_file

        tmp = self._tmp(name)
        self.pending.append((tmp, os.path.join(self.data_dir, name)))
        try:
            save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, tmp)
        except OSError:
            raise
        except Exception as e:
            raise ProblemError(f"writing data/{name} failed: {_one_line(e)}")
        _fsync_path(tmp)

    def hashes(self) -> dict:
        return {os.path.basename(final): _sha256_file(tmp) for tmp, final in self.pending}

    def rename_all(self) -> None:
        for tmp, final in self.pending:
            os.replace(tmp, final)
        self.pending = []

    def cleanup(self) -> None:
        for tmp, _ in self.pending:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        self.pending = []


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json_atomic(path: str, obj) -> None:
    tmp = f"{os.path.join(os.path.dirname(path), '.' + os.path.basename(path))}" f".tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def generate(pdir: str, spec: dict, phash: str) -> int:
    """Generate all data for one problem; returns the number of files written."""
    mod = import_reference(pdir, phash)
    data_dir = os.path.join(pdir, "data")
    created = not os.path.isdir(data_dir)
    try:
        os.makedirs(data_dir, exist_ok=True)
    except OSError as e:
        raise ProblemError(f"cannot create data/: {e.strerror}")

    w = _Writer(data_dir)
    done = False
    try:
        params = {}
        for i in spec["inits"]:
            rng = np.random.default_rng(PARAM_SEED_BASE + i)
            raw = _call(mod.make_params, f"make_params (init {i})", rng)
            params[i] = _validate(raw, spec["parameters"], f"make_params (init {i})")
            w.safetensors(f"params.init{i}.safetensors", params[i])

        signed = False
        has_float_input = any(t["dtype"] in FLOAT_DTYPES for t in spec["inputs"])
        for s in spec["seeds"]:
            seed, dist = s["seed"], s["distribution"]
            rng = np.random.default_rng(seed)
            what = f"make_inputs (seed {seed}, {dist})"
            inputs = _validate(_call(mod.make_inputs, what, rng, dist), spec["inputs"], what)
            signed = signed or _has_negative_float(inputs, spec["inputs"])
            w.safetensors(f"inputs.seed{seed}.safetensors", inputs)
            for i in spec["inits"]:
                what = f"reference (seed {seed}, init {i})"
                with np.errstate(all="ignore"):
                    raw = _call(mod.reference, what, inputs, params[i])
                exp = _expected(raw, spec["outputs"], what)
                w.safetensors(f"expected.seed{seed}.init{i}.safetensors", exp)
            del inputs
        if has_float_input and not signed:
            raise ProblemError(
                "no seed produces a negative value in any float input " "(add a seed with a signed distribution)"
            )

        files = w.hashes()
        man_path = os.path.join(data_dir, "MANIFEST.json")
        # The manifest goes first and comes back last: a run interrupted in between leaves
        # no manifest, so the data reads as stale rather than as current.
        if os.path.exists(man_path):
            os.unlink(man_path)
        w.rename_all()
        keep = set(files)
        for name in os.listdir(data_dir):
            if _OWNED.fullmatch(name) and name not in keep:
                os.unlink(os.path.join(data_dir, name))
        _write_json_atomic(
            man_path,
            {
                "generator": GENERATOR,
                "version": VERSION,
                "problem_sha256": phash,
                "files": files,
            },
        )
        done = True
        return len(files)
    except OSError as e:
        raise ProblemError(f"writing data/ failed: {e.strerror or e}")
    finally:
        w.cleanup()
        if created and not done:
            try:
                os.rmdir(data_dir)  # only if still empty
            except OSError:
                pass


def process(pdir: str, label: str, force: bool, check: bool, quiet_fresh: bool) -> int:
    """Returns 0 ok, 1 stale (--check), raises ProblemError otherwise."""
    spec, pj_bytes, rp_bytes = load_problem(pdir)
    phash = problem_hash(pj_bytes, rp_bytes)
    data_dir = os.path.join(pdir, "data")
    if check:
        why = manifest_status(data_dir, spec, phash)
        if why is None:
            if not quiet_fresh:
                print(f"mblast_data: {label}: up to date")
            return 0
        print(f"mblast_data: {label}: stale: {why}", file=sys.stderr)
        return 1
    if not force and manifest_status(data_dir, spec, phash) is None:
        if not quiet_fresh:
            print(f"mblast_data: {label}: up to date")
        return 0
    n = generate(pdir, spec, phash)
    print(f"mblast_data: {label}: wrote {n} files to {data_dir}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="mblast_data.py",
        description="Generate deterministic reference data (safetensors) for mblast " "problem directories.",
    )
    ap.add_argument("dirs", nargs="+", metavar="PROBLEM_DIR")
    ap.add_argument("--force", action="store_true", help="regenerate even when current")
    ap.add_argument("--check", action="store_true", help="only verify existing data; exit 1 when stale or missing")
    ap.add_argument(
        "--quiet-if-fresh", action="store_true", help="print nothing for a problem whose data is up to date"
    )
    args = ap.parse_args(argv)
    if not args.check:
        try:
            import safetensors.numpy  # noqa: F401
        except ImportError:
            print(
                "mblast_data: the 'safetensors' Python package is missing " "(pip install safetensors)", file=sys.stderr
            )
            return 2
    rc = 0
    for d in args.dirs:
        label = os.path.basename(os.path.normpath(d)) or d
        try:
            r = process(d, label, args.force, args.check, args.quiet_if_fresh)
            rc = max(rc, r)
        except ProblemError as e:
            print(f"mblast_data: {label}: {e}", file=sys.stderr)
            rc = 2
        except KeyboardInterrupt:
            print(f"mblast_data: {label}: interrupted", file=sys.stderr)
            return 130
    return rc


if __name__ == "__main__":
    sys.exit(main())
