"""The PyTorch side shared by import and baseline: loading a KernelBench file, the dtype
mapping of the ABI, the Model of one parameter init with its parameter snapshot."""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import random
import re
import sys

import torch

from . import compat
from .common import Failure, one_line, sha256_bytes

compat.install()

PARAM_SEED_BASE = 1_000_003  # torch.manual_seed(PARAM_SEED_BASE + I) builds the Model of init I


def torch_version():
    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def dtype_tables():
    t = torch
    to_mb = {
        t.float32: "f32",
        t.float16: "f16",
        t.bfloat16: "bf16",
        t.float64: "f64",
        t.int32: "i32",
        t.int64: "i64",
        t.int8: "i8",
        t.uint8: "u8",
        t.bool: "bool",
    }
    return to_mb, {v: k for k, v in to_mb.items()}


def mb_dtype(dt, what: str):
    """torch dtype -> (mblast dtype, torch_dtype note or None)."""
    to_mb, _ = dtype_tables()
    if dt in to_mb:
        return to_mb[dt], None
    raise Failure(
        f"{what} has dtype {str(dt).replace('torch.', '')}, which the mblast ABI "
        "cannot carry (f32, f16, bf16, f64, i32, i64, i8, u8, bool)"
    )


def to_storable(t):
    """A tensor as it is stored and handed to candidates: C-contiguous, CPU, 0-dim -> [1]
    (bool stays bool: safetensors' BOOL, the ABI's MBLAST_BOOL, one byte 0 or 1)."""
    t = t.detach()
    if t.dim() == 0:
        t = t.reshape(1)
    return t.to("cpu").contiguous()


def tensor_entry(name: str, t, what: str) -> dict:
    dt, note = mb_dtype(t.dtype, what)
    if t.dim() > 8:
        raise Failure(f"{what} has {t.dim()} dimensions (the ABI carries at most 8)")
    if t.numel() == 0:
        raise Failure(f"{what} is empty (shape {list(t.shape)}); problems need non-empty tensors")
    e = {"name": name, "dtype": dt, "shape": list(t.shape) if t.dim() else [1]}
    if t.dim() == 0:
        e["torch_shape"] = []
    if note:
        e["torch_dtype"] = note
    return e


def seed_all(s: int) -> None:
    torch.manual_seed(s)
    random.seed(s)
    try:
        import numpy as np

        np.random.seed(s % (2**32))
    except ImportError:
        pass


def load_kernelbench_module(path: str, text: bytes, check: bool = True):
    """Executes TEXT (the file's bytes, or them rewritten) as a fresh module of file PATH;
    returns it. Raises Failure."""
    name = (
        "mblast_kb_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0]) + "_" + sha256_bytes(text)[:12]
    )
    try:
        # TEXT, not the file: an import at --max-bytes runs the file with its sizes rewritten.
        spec = importlib.util.spec_from_loader(name, loader=None, origin=path)
        mod = importlib.util.module_from_spec(spec)
        mod.__file__ = path
        sys.modules[name] = mod
        code = compile(text, path, "exec")  # tracebacks and inspect still name the file
        with contextlib.redirect_stdout(sys.stderr):
            exec(code, mod.__dict__)
    except Failure:
        raise
    except BaseException as e:  # user code: SyntaxError, ImportError, SystemExit, anything
        if isinstance(e, KeyboardInterrupt):
            raise
        raise Failure(f"loading failed: {one_line(e)}")
    if not check:
        return mod
    for fn in ("Model", "get_inputs", "get_init_inputs"):
        if not callable(getattr(mod, fn, None)):
            raise Failure(
                f"defines no {fn} (a KernelBench file defines class Model(nn.Module), "
                "get_inputs() and get_init_inputs())"
            )
    if not (isinstance(mod.Model, type) and issubclass(mod.Model, torch.nn.Module)):
        raise Failure("Model is not a torch.nn.Module subclass")
    return mod


def call_user(what: str, fn, *args):
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return fn(*args)
    except Failure:
        raise
    except Exception as e:
        raise Failure(f"{what} raised {one_line(e)}")


def as_arg_list(v, what: str) -> list:
    if isinstance(v, (list, tuple)):
        return list(v)
    raise Failure(f"{what} returned a {type(v).__name__}, not a list")


def json_constant(v, what: str):
    """A non-tensor argument as JSON, or Failure."""
    if v is None or isinstance(v, (bool, int, float, str)):
        if isinstance(v, float) and not math.isfinite(v):
            raise Failure(f"{what} is {v}, which JSON cannot record")
        return v
    if isinstance(v, (list, tuple)):
        return [json_constant(x, what) for x in v]
    if torch is not None and isinstance(v, torch.dtype):
        return str(v)
    raise Failure(
        f"{what} is a {type(v).__name__}; only tensors and plain constants (numbers, "
        "strings, lists of them) are supported"
    )


def flatten_outputs(out, what: str):
    """forward's result -> (list of tensors, "tensor" | "tuple" | "list")."""
    if isinstance(out, torch.Tensor):
        return [out], "tensor"
    if isinstance(out, (tuple, list)):
        kind = "tuple" if isinstance(out, tuple) else "list"
        items = list(out)
        if not items:
            raise Failure(f"{what} returned an empty {kind}")
        for i, o in enumerate(items):
            if not isinstance(o, torch.Tensor):
                raise Failure(
                    f"{what} returned a {kind} whose item {i} is a {type(o).__name__}; "
                    "only tensors (or tuples/lists of tensors) are supported"
                )
        return items, kind
    raise Failure(f"{what} returned a {type(out).__name__}; only tensors (or tuples/lists of " "tensors) are supported")


def all_finite(ts) -> bool:
    """Whether every floating-point element of the tensors is finite. A NaN or an infinity makes
    the sum non-finite, so a finite sum settles it in one read; only a non-finite sum (a NaN, an
    infinity, or finite values that overflow the sum) is checked element by element.
    torch.isfinite(t).all() alone took 0.9-1.8 s per 512 MiB tensor on a 2-vCPU VM (torch 1.13:
    temporaries of the tensor's size), the sum 0.04 s; it was a third of a full-size CPU import.
    """
    for t in ts:
        if not t.is_floating_point() or t.numel() == 0:
            continue
        if bool(torch.isfinite(t.sum())):
            continue
        if not bool(torch.isfinite(t).all()):
            return False
    return True


def register_tensor_attributes(model) -> list[str]:
    """Plain tensor attributes of the model's modules (`self.hidden = torch.randn(...)` in
    __init__: state that neither a parameter nor a buffer holds) become buffers, so that they are
    the problem's parameters, restored before every forward like the others, and reach the
    kernel as tensors instead of as constants inside the traced graph. Returns their names."""
    added = []
    for prefix, m in model.named_modules():
        for name, v in list(vars(m).items()):
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter) and not name.startswith("_"):
                delattr(m, name)
                m.register_buffer(name, v)
                added.append(f"{prefix}.{name}" if prefix else name)
    return added


class Reference:
    """The Model of one init on a device, with its parameters and buffers snapshotted so
    every forward starts from the same state (train-mode BatchNorm updates its buffers)."""

    def __init__(self, mod, init_args, init: int, device: str):
        seed_all(PARAM_SEED_BASE + init)
        with contextlib.redirect_stdout(sys.stderr):
            try:
                model = mod.Model(*init_args)
            except Exception as e:
                raise Failure(f"Model(*get_init_inputs()) raised {one_line(e)}")
        register_tensor_attributes(model)
        try:
            self.model = model.to(device)
        except Exception as e:
            raise Failure(f"moving Model to {device} failed: {one_line(e)}")
        self.named = [(n, p) for n, p in self.model.named_parameters()] + [
            (n, b) for n, b in self.model.named_buffers()
        ]
        self.snapshot = [t.detach().clone() for _, t in self.named]

    def restore(self):
        with torch.no_grad():
            for (_, t), s in zip(self.named, self.snapshot):
                t.copy_(s)

    def forward(self, args, what: str):
        """Outputs (on the CPU) and the return kind. The arguments are cloned first: a
        forward that writes into its inputs must not change the stored inputs."""
        self.restore()
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        try:
            with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
                out = self.model(*args)
        except Exception as e:
            raise Failure(f"{what} raised {one_line(e)}")
        outs, kind = flatten_outputs(out, what)
        return [o.detach().cpu() for o in outs], kind
