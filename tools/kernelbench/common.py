"""Shared by the KernelBench import, baseline and export (no torch here: export runs without
it). Errors are Failure: one line, printed as "mblast_kernelbench: <what>: <reason>"."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys

# Seconds the entry script spent importing torch (None: not measured), for the baseline's
# phases (where a baseline's time goes: on the H100 each took 28-32 s whatever its size).
TORCH_IMPORT_SECONDS = None

PROG = "mblast_kernelbench"
GENERATOR = "tools/mblast_kernelbench.py"
VERSION = 1
FORMAT = 1
FLOAT_DTYPES = ("f32", "f16", "bf16", "f64")
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i32": 4, "i64": 8, "i8": 1, "u8": 1, "bool": 1}


class Failure(Exception):
    """A one-line reason why a file, problem or candidate cannot be processed."""


def one_line(e: BaseException) -> str:
    if isinstance(e, SyntaxError):
        where = f" (line {e.lineno})" if e.lineno else ""
        return f"SyntaxError: {e.msg}{where}"
    msg = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {msg[0]}" if msg else type(e).__name__


def die(msg: str, code: int = 2):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(code)


def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: str, data: bytes) -> None:
    tmp = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


_SHORT_LIST = re.compile(r"\[\s*([-+0-9.eE]+(?:,\s*[-+0-9.eE]+)*)?\s*\]")


def json_bytes(obj) -> bytes:
    """Indented JSON with lists of numbers (shapes) kept on one line."""
    text = json.dumps(obj, indent=2)
    text = _SHORT_LIST.sub(lambda m: "[" + re.sub(r"\s+", " ", m.group(1) or "").strip() + "]", text)
    return (text + "\n").encode("utf-8")


def nbytes(entry: dict) -> int:
    return DTYPE_BYTES[entry["dtype"]] * math.prod(entry["shape"])


def read_problem(pdir: str) -> dict:
    try:
        with open(os.path.join(pdir, "problem.json"), "rb") as f:
            p = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise Failure(f"cannot read problem.json: {e.strerror}")
    except ValueError as e:
        raise Failure(f"problem.json is not valid JSON: {e}")
    if not isinstance(p, dict) or p.get("format") != FORMAT:
        raise Failure("problem.json is not a format-1 problem")
    if not os.path.isfile(os.path.join(pdir, p.get("model") or "model.py")):
        raise Failure(
            "has no model.py (only problems made by `mblast import kernelbench` " "carry their PyTorch module)"
        )
    return p
