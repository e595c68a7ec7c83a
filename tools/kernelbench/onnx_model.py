"""ONNX models as torch modules, for `mblast optimize-model model.onnx`.

mblast imports a model as a KernelBench-style Python module: it builds `Model`, traces its forward
with make_fx and lowers the traced aten graph. An ONNX file reaches that pipeline through a small
wrapper module whose Model holds an OnnxModule: an nn.Module that evaluates the ONNX graph with
torch ops, with the graph's float initializers as its parameters, so that the importer sees them
as the model's weights rather than as constants baked into the graph.

ONNX graphs carry shapes as tensors (Shape -> Gather -> Concat -> Reshape). make_fx records what
tensors do; it cannot record a Python decision taken from a traced tensor's values, and .item()
of one fails. So everything that depends only on initializers, Constant nodes and the input
*shapes* is evaluated once in __init__ (the input shapes are fixed there) and kept as constants;
forward runs only the nodes that depend on the input values, and every shape-like argument of
those (Reshape's shape, Slice's bounds, Pad's pads...) must be one of the constants.

Also here: example_inputs (seeded inputs that fit the graph) and check_against_onnxruntime (the
reader's outputs next to onnxruntime's, so that a model the reader gets wrong can be refused).
Errors the user can act on are OnnxImportError, one line each.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import torch
import torch.nn.functional as F


class OnnxImportError(Exception):
    """A model this reader cannot take, and why, in one line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


# ONNX TensorProto element types -> torch. The unsigned types above 8 bits have no torch 1.13 dtype.
_DTYPES = {
    1: torch.float32,
    2: torch.uint8,
    3: torch.int8,
    5: torch.int16,
    6: torch.int32,
    7: torch.int64,
    9: torch.bool,
    10: torch.float16,
    11: torch.float64,
    16: torch.bfloat16,
}
_DTYPE_NAMES = {
    4: "uint16",
    8: "string",
    12: "uint32",
    13: "uint64",
    14: "complex64",
    15: "complex128",
    17: "float8e4m3fn",
    18: "float8e4m3fnuz",
    19: "float8e5m2",
    20: "float8e5m2fnuz",
    21: "uint4",
    22: "int4",
    23: "float4e2m1",
}


def _torch_dtype(elem_type: int, what: str) -> torch.dtype:
    dt = _DTYPES.get(elem_type)
    if dt is None:
        name = _DTYPE_NAMES.get(elem_type, f"type {elem_type}")
        raise OnnxImportError(f"{what} has element type {name}, which mblast's ONNX reader does not support")
    return dt


def _is_float(dt: torch.dtype) -> bool:
    return dt.is_floating_point


def _load(path, external_data: bool = True):
    import onnx

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise OnnxImportError(f"{path}: no such file")
    try:
        model = onnx.load(path, load_external_data=external_data)
    except FileNotFoundError as e:
        missing = e.filename or str(e)
        raise OnnxImportError(f"{path}: its external data file {missing} is missing") from None
    except Exception as e:  # protobuf's DecodeError, a truncated file, an unreadable external file
        missing = _missing_external_data(path) if external_data else None
        if missing:
            raise OnnxImportError(f"{path}: its external data file {missing} is missing") from None
        raise OnnxImportError(f"{path}: not a readable ONNX model ({_one_line(e)})") from None
    # protobuf parses many non-ONNX byte strings into an empty message without complaint.
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.output:
        raise OnnxImportError(f"{path}: not an ONNX model (no graph with outputs in it)")
    return model


def _missing_external_data(path: str) -> str | None:
    """The first external data file the model at PATH names that is not there, or None. (onnx's
    own error for it speaks of a TensorProto "not a regular file".)"""
    import onnx

    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:
        return None
    base = os.path.dirname(os.path.abspath(path))
    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            location = next((e.value for e in t.external_data if e.key == "location"), "")
            if not os.path.isfile(os.path.join(base, location)):
                return os.path.join(base, location)
    return None


def _opset(model) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 21


def _initializer_names(graph) -> set:
    return {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}


def _input_specs(graph, shapes) -> list:
    """[(name, torch dtype, shape)] of the graph inputs that are not initializers, in graph order.
    SHAPES overrides (and must fill in) the graph's dimensions."""
    inits = _initializer_names(graph)
    inputs = [vi for vi in graph.input if vi.name not in inits]
    names = [vi.name for vi in inputs]
    shapes = dict(shapes or {})
    for n in shapes:
        if n not in names:
            raise OnnxImportError(
                f"--input-shape names '{n}', which is not an input of the model (its inputs: {', '.join(names) or 'none'})"
            )
    specs = []
    for vi in inputs:
        name = vi.name
        if not vi.type.HasField("tensor_type"):
            raise OnnxImportError(
                f"input '{name}' is not a tensor (sequence, map and optional inputs are not supported)"
            )
        tt = vi.type.tensor_type
        dtype = _torch_dtype(tt.elem_type, f"input '{name}'")
        dims = list(tt.shape.dim) if tt.HasField("shape") else None
        given = shapes.get(name)
        if given is not None:
            given = [int(d) for d in given]
            if dims is not None and len(dims) != len(given):
                raise OnnxImportError(
                    f"input '{name}': --input-shape gives {len(given)} dimensions, the model's input has {len(dims)}"
                )
            for i, (d, g) in enumerate(zip(dims or [], given)):
                if d.HasField("dim_value") and d.dim_value != g:
                    raise OnnxImportError(
                        f"input '{name}': dimension {i} is {d.dim_value} in the model; --input-shape gives {g}"
                    )
            specs.append((name, dtype, given))
            continue
        if dims is None:
            raise OnnxImportError(f"input '{name}' has no shape in the model: give --input-shape {name}=1x3x224x224")
        hint = "x".join(str(d.dim_value) if d.HasField("dim_value") else "1" for d in dims)
        shape = []
        for d in dims:
            if d.HasField("dim_value"):
                shape.append(int(d.dim_value))
            elif d.dim_param:
                raise OnnxImportError(
                    f"input '{name}' has a symbolic dimension '{d.dim_param}': give --input-shape {name}={hint}"
                )
            else:
                raise OnnxImportError(
                    f"input '{name}' has a dimension of unknown size: give --input-shape {name}={hint}"
                )
        specs.append((name, dtype, shape))
    return specs


class _Node:
    """One ONNX node with its attributes as Python values (the protobuf is not kept: the module is
    deep-copied by the importer)."""

    def __init__(self, proto, index: int):
        from onnx import helper, numpy_helper

        self.op = proto.op_type
        self.domain = proto.domain
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.label = proto.name or (proto.output[0] if proto.output else f"#{index}")
        self.attrs = {}
        self.has_subgraph = False
        for a in proto.attribute:
            v = helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode("utf-8", "replace")
            elif isinstance(v, list) and v and isinstance(v[0], bytes):
                v = [s.decode("utf-8", "replace") for s in v]
            elif a.type == a.TENSOR:
                v = (numpy_helper.to_array(v), v.data_type)
            elif a.type in (a.GRAPH, a.GRAPHS):
                self.has_subgraph = True
            self.attrs[a.name] = v

    def where(self) -> str:
        return f"node {self.label} ({self.op})"


# The importer's lowering takes a constant of the traced graph up to this many elements (graph.py's
# CONSTANT_VALUES_MAX): a larger constant tensor forward uses is a buffer instead. Nor is a larger
# static float input kept as a numpy copy in the plan: no op reads a float tensor's values on the
# Python side (only shapes, scalars and small tables).
_SMALL = 64


class _Big:
    """Stands for a large constant float input in a forward step (its tensor is a parameter)."""


_BIG = _Big()


class _Call:
    """One node's evaluation: its inputs as tensors, and the constant ones also as numpy values,
    which is what the shape-like arguments are read from (never from a tensor: under make_fx
    reading a tensor's values is what must not happen)."""

    def __init__(self, node: _Node, opset: int, vals: list, consts: list, cache: dict, module=None):
        self.node, self.opset, self.vals, self.consts, self.cache = node, opset, vals, consts, cache
        self.module = module  # the OnnxModule of a step forward runs; None while folding

    def fail(self, msg: str):
        raise OnnxImportError(f"{self.node.where()}: {msg}")

    def has(self, i: int) -> bool:
        return i < len(self.vals) and self.vals[i] is not None

    def x(self, i: int) -> torch.Tensor:
        if not self.has(i):
            self.fail(f"its input {i} is missing")
        return self.vals[i]

    def opt(self, i: int):
        return self.vals[i] if self.has(i) else None

    def attr(self, name: str, default=None):
        return self.node.attrs.get(name, default)

    def const(self, i: int, what: str) -> np.ndarray:
        v = self.consts[i] if i < len(self.consts) else None
        if isinstance(v, np.ndarray):
            return v
        if v is _BIG:
            self.fail(f"its {what} is a large float tensor, where a short list of values is expected")
        self.fail(
            f"its {what} ('{self.node.inputs[i]}') is computed at run time from the model's input values; "
            "mblast needs it constant (known from the initializers and the input shapes)"
        )

    def ints(self, i: int, what: str) -> list:
        return [int(v) for v in self.const(i, what).reshape(-1).tolist()]

    def floats(self, i: int, what: str) -> list:
        return [float(v) for v in self.const(i, what).reshape(-1).tolist()]

    def scalar(self, i: int, what: str):
        a = self.const(i, what)
        if a.size != 1:
            self.fail(f"its {what} has {a.size} elements; expected one")
        return a.reshape(()).item()

    def right(self, i: int, other: int):
        """Input I as the right operand of a binary op with input OTHER: a Python number when it is
        a one-element constant that does not widen the result, which traces as a scalar op."""
        v = self.consts[i] if i < len(self.consts) else None
        o = self.vals[other] if other < len(self.vals) else None
        dynamic_other = other >= len(self.consts) or self.consts[other] is None
        if isinstance(v, np.ndarray) and v.size == 1 and o is not None and dynamic_other and v.ndim <= o.ndim:
            return v.reshape(()).item()
        return self.x(i)

    def cached(self, key: str, make):
        # Tensors an op derives from constants are made once (in __init__'s pass) and reused: made
        # inside a traced forward they would be recorded as factory calls. A large one is a buffer,
        # as a large constant inside the traced graph is refused by the lowering.
        if key not in self.cache:
            t = make()
            if self.module is not None and t.numel() > _SMALL:
                t = ("attr", self.module._new_state(f"{self.node.label}_{key}", t, parameter=False))
            self.cache[key] = t
        v = self.cache[key]
        return getattr(self.module, v[1]) if isinstance(v, tuple) else v


_OPS = {}


def _op(*names):
    def deco(fn):
        for n in names:
            _OPS[n] = fn
        return fn

    return deco


def _axis(c: _Call, a: int, rank: int) -> int:
    if not -rank <= a < max(rank, 1):
        c.fail(f"axis {a} is out of range for a tensor of rank {rank}")
    return a + rank if a < 0 else a


def _axes(c: _Call, axes, rank: int) -> list:
    return sorted({_axis(c, int(a), rank) for a in axes})


def _torch_pad(begin: list, end: list) -> list:
    """ONNX-style per-axis begin/end pads (first axis first) -> F.pad's list (last axis first)."""
    out = []
    for b, e in zip(reversed(begin), reversed(end)):
        out += [int(b), int(e)]
    return out


# ---- elementwise ----------------------------------------------------------------------------

_UNARY = {
    "Neg": torch.neg,
    "Abs": torch.abs,
    "Sqrt": torch.sqrt,
    "Reciprocal": torch.reciprocal,
    "Exp": torch.exp,
    "Log": torch.log,
    "Erf": torch.erf,
    "Sin": torch.sin,
    "Cos": torch.cos,
    "Tan": torch.tan,
    "Asin": torch.asin,
    "Acos": torch.acos,
    "Atan": torch.atan,
    "Sinh": torch.sinh,
    "Cosh": torch.cosh,
    "Tanh": torch.tanh,
    "Sigmoid": torch.sigmoid,
    "Relu": torch.relu,
    "Floor": torch.floor,
    "Ceil": torch.ceil,
    "Round": torch.round,  # half to even, as ONNX says
    "Sign": torch.sign,
    "Not": torch.logical_not,
    "IsNaN": torch.isnan,
    "Softsign": F.softsign,
    "Softplus": F.softplus,
    "Mish": F.mish,
    "HardSwish": F.hardswish,
}
for _name, _fn in _UNARY.items():
    _OPS[_name] = lambda c, fn=_fn: fn(c.x(0))


def _is_int(dt: torch.dtype) -> bool:
    return not dt.is_floating_point and not dt.is_complex and dt != torch.bool


def _commutative(fn):
    def impl(c: _Call):
        # A constant scalar on the left goes to the right, where it traces as a scalar operand.
        if isinstance(c.consts[0], np.ndarray) and c.consts[1] is None:
            return fn(c.x(1), c.right(0, 1))
        return fn(c.x(0), c.right(1, 0))

    return impl


_OPS["Add"] = _commutative(lambda a, b: a + b)
_OPS["Mul"] = _commutative(lambda a, b: a * b)
_OPS["Equal"] = _commutative(torch.eq)
_OPS["And"] = lambda c: torch.logical_and(c.x(0), c.x(1))
_OPS["Or"] = lambda c: torch.logical_or(c.x(0), c.x(1))
_OPS["Xor"] = lambda c: torch.logical_xor(c.x(0), c.x(1))
_OPS["Sub"] = lambda c: c.x(0) - c.right(1, 0)
_OPS["Less"] = lambda c: torch.lt(c.x(0), c.right(1, 0))
_OPS["Greater"] = lambda c: torch.gt(c.x(0), c.right(1, 0))
_OPS["LessOrEqual"] = lambda c: torch.le(c.x(0), c.right(1, 0))
_OPS["GreaterOrEqual"] = lambda c: torch.ge(c.x(0), c.right(1, 0))


@_op("Div")
def _div(c: _Call):
    a = c.x(0)
    if _is_int(a.dtype):  # integer division truncates toward zero in ONNX runtimes
        return torch.div(a, c.x(1), rounding_mode="trunc")
    return a / c.right(1, 0)


@_op("Mod")
def _mod(c: _Call):
    a, b = c.x(0), c.x(1)
    if c.attr("fmod", 0) or not _is_int(a.dtype):
        return torch.fmod(a, b)
    return torch.remainder(a, b)  # integer Mod takes the divisor's sign, as Python's %


@_op("Pow")
def _pow(c: _Call):
    a = c.x(0)
    y = torch.pow(a, c.right(1, 0))
    return y if y.dtype == a.dtype else y.to(a.dtype)  # the result has the base's type


def _variadic(pair, scalar=None):
    def impl(c: _Call):
        n = len([v for v in c.vals if v is not None])
        if n == 2 and scalar is not None:
            for i, j in ((1, 0), (0, 1)):
                s = c.right(i, j)
                if not isinstance(s, torch.Tensor):
                    return scalar(c.x(j), s)
        y = c.x(0)
        for i in range(1, len(c.vals)):
            if c.has(i):
                y = pair(y, c.x(i))
        return y

    return impl


_OPS["Max"] = _variadic(torch.maximum, lambda t, s: torch.clamp(t, min=s))
_OPS["Min"] = _variadic(torch.minimum, lambda t, s: torch.clamp(t, max=s))
_OPS["Sum"] = _variadic(lambda a, b: a + b)


@_op("Mean")
def _mean(c: _Call):
    n = len([v for v in c.vals if v is not None])
    y = _OPS["Sum"](c)
    return y / n if n > 1 else y


@_op("Where")
def _where(c: _Call):
    return torch.where(c.x(0), c.x(1), c.x(2))


@_op("Clip")
def _clip(c: _Call):
    x = c.x(0)
    if c.opset < 11:
        lo, hi = c.attr("min"), c.attr("max")
    else:
        lo = c.scalar(1, "min") if c.has(1) and isinstance(c.consts[1], np.ndarray) else c.opt(1)
        hi = c.scalar(2, "max") if c.has(2) and isinstance(c.consts[2], np.ndarray) else c.opt(2)
    if isinstance(lo, torch.Tensor):
        x = torch.maximum(x, lo)
        lo = None
    if isinstance(hi, torch.Tensor):
        x = torch.minimum(x, hi)
        hi = None
    if lo is None and hi is None:
        return x
    return torch.clamp(x, min=lo, max=hi)


@_op("LeakyRelu")
def _leaky_relu(c: _Call):
    return F.leaky_relu(c.x(0), c.attr("alpha", 0.01))


@_op("Elu")
def _elu(c: _Call):
    return F.elu(c.x(0), c.attr("alpha", 1.0))


@_op("Celu")
def _celu(c: _Call):
    return F.celu(c.x(0), c.attr("alpha", 1.0))


@_op("Selu")
def _selu(c: _Call):
    alpha, gamma = c.attr("alpha", 1.67326319217681884765625), c.attr("gamma", 1.05070102214813232421875)
    if abs(alpha - 1.6732632) < 1e-6 and abs(gamma - 1.050701) < 1e-6:
        return torch.selu(c.x(0))
    return F.elu(c.x(0), alpha) * gamma


@_op("ThresholdedRelu")
def _thresholded_relu(c: _Call):
    return F.threshold(c.x(0), c.attr("alpha", 1.0), 0.0)


@_op("HardSigmoid")
def _hard_sigmoid(c: _Call):
    return torch.clamp(c.x(0) * c.attr("alpha", 0.2) + c.attr("beta", 0.5), 0.0, 1.0)


@_op("Gelu")
def _gelu(c: _Call):
    approximate = c.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        c.fail(f"approximate={approximate!r} is not a Gelu approximation")
    return F.gelu(c.x(0), approximate=approximate)


@_op("PRelu")
def _prelu(c: _Call):
    x, slope = c.x(0), c.x(1)
    aligned = (1,) * (x.ndim - slope.ndim) + tuple(slope.shape)
    if x.ndim >= 2 and aligned == (1, x.shape[1]) + (1,) * (x.ndim - 2):
        return F.prelu(x, slope.reshape(x.shape[1]))  # one slope per channel: torch's own op
    return torch.where(x < 0, x * slope, x)


@_op("Cast")
def _cast(c: _Call):
    return c.x(0).to(_torch_dtype(c.attr("to", 1), f"{c.node.where()}: the target"))


@_op("CastLike")
def _cast_like(c: _Call):
    return c.x(0).to(c.x(1).dtype)


@_op("Identity")
def _identity(c: _Call):
    return c.x(0)


@_op("Dropout")
def _dropout(c: _Call):
    x = c.x(0)  # inference: the input itself; the mask, when asked for, keeps everything
    if len(c.node.outputs) > 1 and c.node.outputs[1]:
        return [x, torch.ones_like(x, dtype=torch.bool)]
    return x


# ---- linear algebra -------------------------------------------------------------------------


@_op("MatMul")
def _matmul(c: _Call):
    return torch.matmul(c.x(0), c.x(1))


@_op("Gemm")
def _gemm(c: _Call):
    a, b, bias = c.x(0), c.x(1), c.opt(2)
    alpha, beta = c.attr("alpha", 1.0), c.attr("beta", 1.0)
    trans_b = c.attr("transB", 0)
    if c.attr("transA", 0):
        a = a.t()
    if alpha == 1.0 and beta == 1.0 and bias is not None and bias.ndim <= 1:
        # the forms the lowering knows best: linear (addmm) with a row bias
        return F.linear(a, b, bias) if trans_b else torch.addmm(bias, a, b)
    y = F.linear(a, b) if trans_b else torch.matmul(a, b)
    if alpha != 1.0:
        y = y * alpha
    if bias is not None and beta != 0.0:
        y = y + (bias * beta if beta != 1.0 else bias)
    return y


@_op("Einsum")
def _einsum(c: _Call):
    eq = c.attr("equation", "").replace(" ", "")
    return torch.einsum(eq, *[v for v in c.vals if v is not None])


# ---- convolution and pooling ----------------------------------------------------------------


def _spatial_pads(c: _Call, spatial: list, kernel: list, strides: list, dilations: list):
    """(begin, end) pads per spatial axis, auto_pad resolved."""
    n = len(spatial)
    auto = c.attr("auto_pad", "NOTSET") or "NOTSET"
    if auto == "NOTSET":
        p = [int(v) for v in c.attr("pads", [0] * (2 * n))]
        if len(p) != 2 * n:
            c.fail(f"pads has {len(p)} values; expected {2 * n}")
        return p[:n], p[n:]
    if auto == "VALID":
        return [0] * n, [0] * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        c.fail(f"auto_pad {auto!r} is not an auto_pad value")
    begin, end = [], []
    for i in range(n):
        out = -(-spatial[i] // strides[i])
        total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - spatial[i])
        small = total // 2
        begin.append(small if auto == "SAME_UPPER" else total - small)  # SAME_UPPER: the odd one at the end
        end.append(total - small if auto == "SAME_UPPER" else small)
    return begin, end


def _spatial_rank(c: _Call, x: torch.Tensor) -> int:
    n = x.ndim - 2
    if n not in (1, 2, 3):
        c.fail(f"a {x.ndim}-D input; 3-D, 4-D and 5-D (1 to 3 spatial axes) are supported")
    return n


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_MAXPOOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVGPOOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


@_op("Conv")
def _conv(c: _Call):
    x, w, b = c.x(0), c.x(1), c.opt(2)
    n = _spatial_rank(c, x)
    kernel = list(w.shape[2:])
    strides = list(c.attr("strides", [1] * n))
    dil = list(c.attr("dilations", [1] * n))
    begin, end = _spatial_pads(c, list(x.shape[2:]), kernel, strides, dil)
    padding = begin
    if begin != end:  # torch pads both sides alike: pad apart first
        x = F.pad(x, _torch_pad(begin, end))
        padding = [0] * n
    return _CONV[n](x, w, b, strides, padding, dil, c.attr("group", 1))


def _crop_or_pad(y: torch.Tensor, begin: list, end: list) -> torch.Tensor:
    """Removes BEGIN/END elements from each spatial axis of Y (adds zeros where negative)."""
    grow = _torch_pad([max(0, -b) for b in begin], [max(0, -e) for e in end])
    if any(grow):
        y = F.pad(y, grow)
    for i, (b, e) in enumerate(zip(begin, end)):
        b, e = max(0, b), max(0, e)
        if b or e:
            y = y.narrow(2 + i, b, y.shape[2 + i] - b - e)
    return y


@_op("ConvTranspose")
def _conv_transpose(c: _Call):
    x, w, b = c.x(0), c.x(1), c.opt(2)
    n = _spatial_rank(c, x)
    spatial, kernel = list(x.shape[2:]), list(w.shape[2:])
    strides = list(c.attr("strides", [1] * n))
    dil = list(c.attr("dilations", [1] * n))
    out_pad = list(c.attr("output_padding", [0] * n))
    group = c.attr("group", 1)
    auto = c.attr("auto_pad", "NOTSET") or "NOTSET"
    full = [(spatial[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(n)]
    output_shape = c.attr("output_shape")
    if output_shape is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [spatial[i] * strides[i] for i in range(n)]
    if output_shape is not None:
        output_shape = list(output_shape)[-n:]
        total = [full[i] + out_pad[i] - output_shape[i] for i in range(n)]
        if auto == "SAME_UPPER":
            begin, end = [t // 2 for t in total], [t - t // 2 for t in total]
        else:
            begin, end = [t - t // 2 for t in total], [t // 2 for t in total]
    elif auto == "VALID":
        begin, end = [0] * n, [0] * n
    elif auto == "NOTSET":
        p = [int(v) for v in c.attr("pads", [0] * (2 * n))]
        begin, end = p[:n], p[n:]
    else:
        c.fail(f"auto_pad {auto!r} is not an auto_pad value")
    if begin == end and all(b >= 0 for b in begin) and all(o < max(s, d) for o, s, d in zip(out_pad, strides, dil)):
        return _CONV_T[n](x, w, b, strides, begin, out_pad, group, dil)
    # The general case: the full result, then cropped (or grown: the output_padding rows see no input).
    y = _CONV_T[n](x, w, None, strides, 0, 0, group, dil)
    y = _crop_or_pad(y, begin, [e - o for e, o in zip(end, out_pad)])
    return y if b is None else y + b.reshape([1, -1] + [1] * n)


@_op("MaxPool")
def _max_pool(c: _Call):
    x = c.x(0)
    n = _spatial_rank(c, x)
    if len(c.node.outputs) > 1 and c.node.outputs[1]:
        c.fail("its Indices output is not supported")
    kernel = list(c.attr("kernel_shape", []))
    if len(kernel) != n:
        c.fail("kernel_shape is missing or has the wrong length")
    strides = list(c.attr("strides", [1] * n))
    dil = list(c.attr("dilations", [1] * n))
    ceil = bool(c.attr("ceil_mode", 0))
    begin, end = _spatial_pads(c, list(x.shape[2:]), kernel, strides, dil)
    if begin == end and all(2 * p <= k for p, k in zip(begin, kernel)):
        return _MAXPOOL[n](x, kernel, strides, begin, dil, ceil_mode=ceil)
    # torch pads symmetrically and by at most half the kernel: pad apart with -inf
    x = F.pad(x, _torch_pad(begin, end), value=float("-inf"))
    return _MAXPOOL[n](x, kernel, strides, 0, dil, ceil_mode=ceil)


@_op("AveragePool")
def _avg_pool(c: _Call):
    x = c.x(0)
    n = _spatial_rank(c, x)
    kernel = list(c.attr("kernel_shape", []))
    if len(kernel) != n:
        c.fail("kernel_shape is missing or has the wrong length")
    strides = list(c.attr("strides", [1] * n))
    dil = list(c.attr("dilations", [1] * n))
    if any(d != 1 for d in dil):
        c.fail("dilations other than 1 are not supported for AveragePool")
    ceil = bool(c.attr("ceil_mode", 0))
    include = bool(c.attr("count_include_pad", 0))
    begin, end = _spatial_pads(c, list(x.shape[2:]), kernel, strides, dil)
    pool = _AVGPOOL[n]
    if begin == end and all(2 * p <= k for p, k in zip(begin, kernel)):
        return pool(x, kernel, strides, begin, ceil, include)
    pads = _torch_pad(begin, end)
    y = pool(F.pad(x, pads), kernel, strides, 0, ceil, True)
    if include:
        return y
    # divide by the number of real (not padded) elements under each window
    ones = torch.ones([1, 1] + list(x.shape[2:]), dtype=x.dtype, device=x.device)
    return y / pool(F.pad(ones, pads), kernel, strides, 0, ceil, True)


@_op("GlobalAveragePool")
def _global_avg_pool(c: _Call):
    x = c.x(0)
    return x.mean(dim=list(range(2, x.ndim)), keepdim=True)


@_op("GlobalMaxPool")
def _global_max_pool(c: _Call):
    x = c.x(0)
    return x.amax(dim=list(range(2, x.ndim)), keepdim=True)


# ---- normalization --------------------------------------------------------------------------


@_op("BatchNormalization")
def _batch_norm(c: _Call):
    if c.attr("training_mode", 0) or len([o for o in c.node.outputs if o]) > 1:
        c.fail("training mode (running statistics as outputs) is not supported; export the model in eval mode")
    x, scale, bias, mean, var = (c.x(i) for i in range(5))
    return F.batch_norm(x, mean, var, scale, bias, False, 0.0, c.attr("epsilon", 1e-5))


@_op("InstanceNormalization")
def _instance_norm(c: _Call):
    return F.instance_norm(c.x(0), weight=c.x(1), bias=c.x(2), eps=c.attr("epsilon", 1e-5))


@_op("LayerNormalization")
def _layer_norm(c: _Call):
    if len([o for o in c.node.outputs if o]) > 1:
        c.fail("its Mean and InvStdDev outputs are not supported")
    x, scale, bias = c.x(0), c.x(1), c.opt(2)
    axis = _axis(c, c.attr("axis", -1), x.ndim)
    shape = list(x.shape[axis:])
    # Scale and B may be anything that broadcasts to the normalized shape; layer_norm wants it exactly.
    if list(scale.shape) != shape:
        scale = scale.expand(shape)
    if bias is not None and list(bias.shape) != shape:
        bias = bias.expand(shape)
    return F.layer_norm(x, shape, scale, bias, c.attr("epsilon", 1e-5))


@_op("GroupNormalization")
def _group_norm(c: _Call):
    x, scale, bias = c.x(0), c.x(1), c.x(2)
    groups = c.attr("num_groups")
    if groups is None:
        c.fail("num_groups is missing")
    ch = x.shape[1]
    if ch % groups:
        c.fail(f"{ch} channels do not split into {groups} groups")

    def per_channel(t):
        # opset 18 gives one value per group, opset 21 one per channel
        if t.numel() == ch:
            return t.reshape(ch)
        if t.numel() == groups:
            return t.reshape(groups, 1).expand(groups, ch // groups).reshape(ch)
        c.fail(f"scale/bias of {t.numel()} values fit neither {ch} channels nor {groups} groups")

    return F.group_norm(x, groups, per_channel(scale), per_channel(bias), c.attr("epsilon", 1e-5))


@_op("LRN")
def _lrn(c: _Call):
    size = c.attr("size")
    if size is None or size % 2 == 0:
        c.fail("only an odd size is supported (torch centres an even window differently)")
    return F.local_response_norm(c.x(0), size, c.attr("alpha", 1e-4), c.attr("beta", 0.75), c.attr("bias", 1.0))


@_op("Softmax", "LogSoftmax")
def _softmax(c: _Call):
    x = c.x(0)
    fn = F.softmax if c.node.op == "Softmax" else F.log_softmax
    if c.opset >= 13:
        return fn(x, dim=_axis(c, c.attr("axis", -1), x.ndim))
    # before opset 13: over all axes from AXIS on, as one (the input seen as a 2-D matrix)
    axis = _axis(c, c.attr("axis", 1), x.ndim)
    rows = math.prod(x.shape[:axis])
    return fn(x.reshape(rows, math.prod(x.shape[axis:])), dim=1).reshape(x.shape)


# ---- shapes ---------------------------------------------------------------------------------


@_op("Shape")
def _shape(c: _Call):
    dims = list(c.x(0).shape)
    start, end = c.attr("start", 0), c.attr("end", None)
    return torch.tensor(dims[start:end], dtype=torch.int64)


@_op("Size")
def _size(c: _Call):
    return torch.tensor(c.x(0).numel(), dtype=torch.int64)


@_op("Constant")
def _constant(c: _Call):
    a = c.node.attrs
    if "value" in a:
        arr, elem = a["value"]
        dt = _torch_dtype(elem, f"{c.node.where()}: the value")
        if dt == torch.bfloat16:
            return torch.tensor(np.asarray(arr, dtype=np.float32)).to(dt)
        return torch.tensor(np.asarray(arr)).to(dt)
    if "value_float" in a:
        return torch.tensor(a["value_float"], dtype=torch.float32)
    if "value_floats" in a:
        return torch.tensor(list(a["value_floats"]), dtype=torch.float32)
    if "value_int" in a:
        return torch.tensor(a["value_int"], dtype=torch.int64)
    if "value_ints" in a:
        return torch.tensor(list(a["value_ints"]), dtype=torch.int64)
    c.fail(f"a {'/'.join(a) or 'missing'} value is not supported")


@_op("ConstantOfShape")
def _constant_of_shape(c: _Call):
    shape = c.ints(0, "shape")
    value = c.attr("value")
    if value is None:
        return torch.zeros(shape, dtype=torch.float32)
    arr, elem = value
    dt = _torch_dtype(elem, f"{c.node.where()}: the value")
    return torch.full(shape, np.asarray(arr).reshape(-1)[0].item(), dtype=dt)


@_op("Range")
def _range(c: _Call):
    start, limit, delta = (c.const(i, name) for i, name in enumerate(("start", "limit", "delta")))
    s, l, d = (a.reshape(()).item() for a in (start, limit, delta))
    if d == 0:
        c.fail("delta is 0")
    n = max(math.ceil((l - s) / d), 0)
    return torch.from_numpy(np.array([s + i * d for i in range(n)], dtype=start.dtype).reshape(n))


@_op("Flatten")
def _flatten(c: _Call):
    x = c.x(0)
    axis = c.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


@_op("Reshape")
def _reshape(c: _Call):
    x = c.x(0)
    shape = c.ints(1, "shape")
    allowzero = c.attr("allowzero", 0)
    out = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(shape)]
    return x.reshape(out)


@_op("Transpose")
def _transpose(c: _Call):
    x = c.x(0)
    perm = c.attr("perm")
    return x.permute(list(perm) if perm is not None else list(range(x.ndim))[::-1])


@_op("Squeeze")
def _squeeze(c: _Call):
    x = c.x(0)
    axes = c.ints(1, "axes") if c.has(1) else c.attr("axes")
    if axes is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    axes = _axes(c, axes, x.ndim)
    for a in axes:
        if x.shape[a] != 1:
            c.fail(f"axis {a} has size {x.shape[a]}, not 1")
    return x.reshape([d for i, d in enumerate(x.shape) if i not in axes])


@_op("Unsqueeze")
def _unsqueeze(c: _Call):
    x = c.x(0)
    axes = c.ints(1, "axes") if c.has(1) else c.attr("axes", [])
    axes = _axes(c, axes, x.ndim + len(axes))
    out = list(x.shape)
    for a in axes:
        out.insert(a, 1)
    return x.reshape(out)


@_op("Concat")
def _concat(c: _Call):
    xs = [v for v in c.vals if v is not None]
    return torch.cat(xs, dim=_axis(c, c.attr("axis", 0), xs[0].ndim))


@_op("Split")
def _split(c: _Call):
    x = c.x(0)
    axis = _axis(c, c.attr("axis", 0), x.ndim)
    sizes = c.ints(1, "split") if c.has(1) else c.attr("split")
    dim = x.shape[axis]
    if sizes is None:
        parts = c.attr("num_outputs", len(c.node.outputs))
        each = -(-dim // parts)  # the last part is the smaller one when they do not come out even
        sizes = [each] * (parts - 1) + [dim - each * (parts - 1)]
    if sum(sizes) != dim or any(s < 0 for s in sizes):
        c.fail(f"split sizes {list(sizes)} do not add up to {dim}")
    return list(torch.split(x, list(sizes), dim=axis))


@_op("Slice")
def _slice(c: _Call):
    x = c.x(0)
    if c.opset < 10:
        starts, ends = c.attr("starts", []), c.attr("ends", [])
        axes = c.attr("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = c.ints(1, "starts"), c.ints(2, "ends")
        axes = c.ints(3, "axes") if c.has(3) else list(range(len(starts)))
        steps = c.ints(4, "steps") if c.has(4) else [1] * len(starts)
    for a, start, end, step in zip(axes, starts, ends, steps):
        a = _axis(c, a, x.ndim)
        dim = x.shape[a]
        if step == 0:
            c.fail("a step of 0")
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
            if start == 0 and end == dim and step == 1:
                continue
            index = [slice(None)] * x.ndim
            index[a] = slice(start, max(start, end), step)
            x = x[tuple(index)]
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            if start <= end:
                x = x.narrow(a, 0, 0)
                continue
            # torch slices forward only: flip, then slice forward from the mirrored bounds
            index = [slice(None)] * x.ndim
            index[a] = slice(dim - 1 - start, dim - 1 - end, -step)
            x = x.flip(a)[tuple(index)]
    return x


def _normalized_indices(c: _Call, i: int, dim: int):
    """Input I (indices into an axis of size DIM) with negative entries counted from the end."""
    if isinstance(c.consts[i], np.ndarray):
        idx = c.consts[i].astype(np.int64)
        if ((idx < -dim) | (idx >= dim)).any():
            c.fail(f"an index is out of range for an axis of size {dim}")
        return c.cached(f"index{i}", lambda: torch.from_numpy(np.where(idx < 0, idx + dim, idx)))
    idx = c.x(i)
    if idx.dtype != torch.int64:
        idx = idx.long()
    return torch.where(idx < 0, idx + dim, idx)


@_op("Gather")
def _gather(c: _Call):
    x = c.x(0)
    axis = _axis(c, c.attr("axis", 0), x.ndim)
    dim = x.shape[axis]
    static = isinstance(c.consts[1], np.ndarray)
    if static and c.consts[1].ndim == 0:
        i = int(c.consts[1])
        return x.select(axis, i + dim if i < 0 else i)
    idx = _normalized_indices(c, 1, dim).to(x.device)
    if axis == 0 and x.ndim == 2 and _is_float(x.dtype):
        return F.embedding(idx, x)  # a table lookup: the aten op the lowering knows as one
    out = x.index_select(axis, idx.reshape(-1))
    return out.reshape(list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1 :]))


@_op("GatherElements")
def _gather_elements(c: _Call):
    x = c.x(0)
    axis = _axis(c, c.attr("axis", 0), x.ndim)
    return torch.gather(x, axis, _normalized_indices(c, 1, x.shape[axis]).to(x.device))


@_op("Expand")
def _expand(c: _Call):
    x = c.x(0)
    shape = c.ints(1, "shape")
    try:
        out = np.broadcast_shapes(tuple(x.shape), tuple(shape))
    except ValueError:
        c.fail(f"shape {shape} does not broadcast with {list(x.shape)}")
    return x.expand(list(out))


@_op("Tile")
def _tile(c: _Call):
    x = c.x(0)
    repeats = c.ints(1, "repeats")
    if len(repeats) != x.ndim:
        c.fail(f"{len(repeats)} repeats for a tensor of rank {x.ndim}")
    return x.repeat(repeats)


_PAD_MODES = {"reflect": "reflect", "edge": "replicate", "wrap": "circular"}


@_op("Pad")
def _pad(c: _Call):
    x = c.x(0)
    n = x.ndim
    mode = c.attr("mode", "constant")
    if c.opset < 11:
        pads, value, axes = list(c.attr("pads", [])), c.attr("value", 0.0), list(range(n))
    else:
        pads = c.ints(1, "pads")
        value = c.scalar(2, "constant_value") if c.has(2) else 0
        axes = _axes(c, c.ints(3, "axes"), n) if c.has(3) else list(range(n))
    k = len(axes)
    if len(pads) != 2 * k:
        c.fail(f"{len(pads)} pads for {k} axes")
    begin, end = [0] * n, [0] * n
    for j, a in enumerate(axes):
        begin[a], end[a] = pads[j], pads[j + k]
    if mode == "constant":
        first = next((a for a in range(n) if begin[a] or end[a]), n)
        if first == n:
            return x
        return F.pad(x, _torch_pad(begin[first:], end[first:]), value=value)
    if mode not in _PAD_MODES:
        c.fail(f"mode {mode!r} is not supported (constant, reflect, edge and wrap are)")
    if any(p < 0 for p in begin + end):
        c.fail(f"negative pads in {mode} mode are not supported")
    padded = [a for a in range(n) if begin[a] or end[a]]
    if not padded:
        return x
    first = padded[0]
    if n - first > 3:
        c.fail(f"{mode} mode pads at most the last 3 axes here")
    # torch pads the trailing axes of a (batch, channel, ...) tensor: fold the leading axes into one
    lead = list(x.shape[:first])
    y = x.reshape([1, math.prod(lead)] + list(x.shape[first:]))
    y = F.pad(y, _torch_pad(begin[first:], end[first:]), mode=_PAD_MODES[mode])
    return y.reshape(lead + list(y.shape[2:]))


@_op("DepthToSpace")
def _depth_to_space(c: _Call):
    x = c.x(0)
    b = c.attr("blocksize")
    n, ch, h, w = x.shape
    if c.attr("mode", "DCR") == "DCR":
        y = x.reshape(n, b, b, ch // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, ch // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    return y.reshape(n, ch // (b * b), h * b, w * b)


@_op("SpaceToDepth")
def _space_to_depth(c: _Call):
    x = c.x(0)
    b = c.attr("blocksize")
    n, ch, h, w = x.shape
    y = x.reshape(n, ch, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(n, ch * b * b, h // b, w // b)


@_op("Trilu")
def _trilu(c: _Call):
    k = int(c.scalar(1, "k")) if c.has(1) else 0
    return torch.triu(c.x(0), k) if c.attr("upper", 1) else torch.tril(c.x(0), k)


# ---- reductions -----------------------------------------------------------------------------


def _reduce(fn):
    def impl(c: _Call):
        x = c.x(0)
        axes = c.ints(1, "axes") if c.has(1) else c.attr("axes")
        keep = bool(c.attr("keepdims", 1))
        if not axes:
            if c.attr("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.ndim))
        if x.ndim == 0:
            return x
        return fn(x, _axes(c, axes, x.ndim), keep)

    return impl


def _prod(x, axes, keep):
    for a in sorted(axes, reverse=True):
        x = x.prod(dim=a, keepdim=True)
    return x if keep else x.reshape([d for i, d in enumerate(x.shape) if i not in axes])


_OPS["ReduceMean"] = _reduce(lambda x, a, k: x.mean(dim=a, keepdim=k))
_OPS["ReduceSum"] = _reduce(lambda x, a, k: x.sum(dim=a, keepdim=k))
_OPS["ReduceMax"] = _reduce(lambda x, a, k: x.amax(dim=a, keepdim=k))
_OPS["ReduceMin"] = _reduce(lambda x, a, k: x.amin(dim=a, keepdim=k))
_OPS["ReduceProd"] = _reduce(_prod)
_OPS["ReduceL1"] = _reduce(lambda x, a, k: x.abs().sum(dim=a, keepdim=k))
_OPS["ReduceL2"] = _reduce(lambda x, a, k: torch.sqrt((x * x).sum(dim=a, keepdim=k)))
_OPS["ReduceSumSquare"] = _reduce(lambda x, a, k: (x * x).sum(dim=a, keepdim=k))
_OPS["ReduceLogSum"] = _reduce(lambda x, a, k: torch.log(x.sum(dim=a, keepdim=k)))
_OPS["ReduceLogSumExp"] = _reduce(lambda x, a, k: torch.logsumexp(x, dim=a, keepdim=k))


@_op("ArgMax", "ArgMin")
def _arg(c: _Call):
    x = c.x(0)
    axis = _axis(c, c.attr("axis", 0), x.ndim)
    keep = bool(c.attr("keepdims", 1))
    fn = torch.argmax if c.node.op == "ArgMax" else torch.argmin
    if c.attr("select_last_index", 0):  # torch picks the first of equal values: search the mirror
        return (x.shape[axis] - 1) - fn(x.flip(axis), dim=axis, keepdim=keep)
    return fn(x, dim=axis, keepdim=keep)


@_op("TopK")
def _topk(c: _Call):
    x = c.x(0)
    k = c.ints(1, "k")
    if len(k) != 1:
        c.fail("k must have one value")
    axis = _axis(c, c.attr("axis", -1), x.ndim)
    values, indices = torch.topk(x, k[0], dim=axis, largest=bool(c.attr("largest", 1)), sorted=True)
    return [values, indices]


@_op("CumSum")
def _cumsum(c: _Call):
    x = c.x(0)
    axis = _axis(c, int(c.scalar(1, "axis")), x.ndim)
    reverse = bool(c.attr("reverse", 0))
    y = x.flip(axis) if reverse else x
    s = torch.cumsum(y, dim=axis, dtype=x.dtype)
    if c.attr("exclusive", 0) and x.shape[axis] > 0:
        # shifted by one along AXIS, a zero first: exact, unlike subtracting the input back out
        pad = [0, 0] * (x.ndim - 1 - axis) + [1, 0]
        s = F.pad(s.narrow(axis, 0, x.shape[axis] - 1), pad)
    return s.flip(axis) if reverse else s


# ---- resizing -------------------------------------------------------------------------------


def _nearest_source(c: _Call, size: int, out: int, scale: float, coord: str, mode: str) -> np.ndarray:
    """The input index each output index reads, per the ONNX Resize formulas (in float32, as
    onnxruntime computes them)."""
    f32 = np.float32
    dst, s = np.arange(out, dtype=f32), f32(scale)
    if coord == "half_pixel":
        x = (dst + f32(0.5)) / s - f32(0.5)
    elif coord == "pytorch_half_pixel":
        x = (dst + f32(0.5)) / s - f32(0.5) if out > 1 else np.zeros(out, f32)
    elif coord == "align_corners":
        x = dst * f32(size - 1) / f32(out - 1) if out > 1 else np.zeros(out, f32)
    elif coord == "asymmetric":
        x = dst / s
    elif coord == "half_pixel_symmetric":
        adjustment = f32(out) / (s * f32(size))
        offset = f32(size) / f32(2) * (f32(1) - adjustment)
        x = offset + (dst + f32(0.5)) / s - f32(0.5)
    else:
        c.fail(f"coordinate_transformation_mode {coord!r} is not supported")
    fl = np.floor(x)
    if mode == "round_prefer_floor":
        idx = np.where(x - fl == f32(0.5), fl, np.floor(x + f32(0.5)))
    elif mode == "round_prefer_ceil":
        idx = np.floor(x + f32(0.5))
    elif mode == "floor":
        idx = fl
    elif mode == "ceil":
        idx = np.ceil(x)
    elif mode == "simple":  # Upsample and Resize-10: onnxruntime rounds up when shrinking
        idx = np.ceil(x) if scale < 1 else fl
    else:
        c.fail(f"nearest_mode {mode!r} is not supported")
    return np.clip(idx, 0, size - 1).astype(np.int64)


def _torch_nearest(size: int, out: int, exact: bool) -> np.ndarray:
    """The input index torch's nearest (or nearest-exact) interpolation reads for each output index."""
    f32 = np.float32
    scale = f32(size) / f32(out)
    dst = np.arange(out, dtype=f32)
    src = np.floor(((dst + f32(0.5)) if exact else dst) * scale)
    return np.minimum(src, size - 1).astype(np.int64)


_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}


@_op("Resize", "Upsample")
def _resize(c: _Call):
    x = c.x(0)
    rank, shape = x.ndim, list(x.shape)
    mode = c.attr("mode", "nearest")
    sizes = None
    if c.node.op == "Upsample" or c.opset < 11:
        coord, nearest, axes = "asymmetric", "simple", list(range(rank))
        scales = c.attr("scales")
        if scales is None:
            scales = c.floats(1, "scales")
    else:
        coord = c.attr("coordinate_transformation_mode", "half_pixel")
        nearest = c.attr("nearest_mode", "round_prefer_floor")
        axes = _axes(c, c.attr("axes"), rank) if c.attr("axes") is not None else list(range(rank))
        scales = c.floats(2, "scales") if c.has(2) and c.const(2, "scales").size else None
        if scales is None:
            sizes = c.ints(3, "sizes") if c.has(3) and c.const(3, "sizes").size else None
            if sizes is None:
                c.fail("neither scales nor sizes is given")
    if coord == "tf_crop_and_resize":
        c.fail("coordinate_transformation_mode tf_crop_and_resize is not supported")
    given = scales if scales is not None else sizes
    if len(given) != len(axes):
        c.fail(f"{len(given)} scales/sizes for {len(axes)} axes")
    out, scale = list(shape), [1.0] * rank
    if scales is not None:
        for a, s in zip(axes, scales):
            scale[a] = float(np.float32(s))
            out[a] = int(np.floor(np.float32(shape[a]) * np.float32(s)))  # float32, as onnxruntime
    else:
        policy = c.attr("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            for a, s in zip(axes, sizes):
                out[a], scale[a] = s, float(np.float32(s) / np.float32(shape[a]))
        elif policy in ("not_larger", "not_smaller"):
            ratios = [s / shape[a] for a, s in zip(axes, sizes)]
            r = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                out[a], scale[a] = int(math.floor(r * shape[a] + 0.5)), r
        else:
            c.fail(f"keep_aspect_ratio_policy {policy!r} is not supported")
    resized = [a for a in range(rank) if out[a] != shape[a] or scale[a] != 1.0]
    if not resized:
        return x
    spatial = 3 <= rank <= 5 and all(a >= 2 for a in resized)
    if mode == "nearest":
        tables = {a: _nearest_source(c, shape[a], out[a], scale[a], coord, nearest) for a in resized}
        if spatial:
            # torch's own nearest kernels when they read the same input indices
            for tmode, exact in (("nearest", False), ("nearest-exact", True)):
                if all(np.array_equal(tables[a], _torch_nearest(shape[a], out[a], exact)) for a in resized):
                    return F.interpolate(x, size=out[2:], mode=tmode)
        for a in resized:
            idx = c.cached(f"index_axis{a}", lambda a=a: torch.from_numpy(tables[a]))
            x = x.index_select(a, idx.to(x.device))
        return x
    if mode == "linear":
        if not spatial:
            c.fail("linear mode resizes only the spatial axes of an N x C x D1 ... (1 to 3 spatial axes) tensor here")
        if c.attr("antialias", 0) and any(out[a] < shape[a] for a in resized):
            c.fail("antialias when shrinking is not supported")
        if coord in ("half_pixel", "pytorch_half_pixel"):
            if coord == "pytorch_half_pixel" and any(out[a] == 1 for a in resized):
                c.fail("pytorch_half_pixel to an output size of 1 is not supported")
            align = False
        elif coord == "align_corners":
            align = True
        else:
            c.fail(
                f"linear mode with coordinate_transformation_mode {coord} is not supported "
                "(half_pixel, pytorch_half_pixel and align_corners are)"
            )
        tmode = _LINEAR[rank - 2]
        if scales is not None and not align and any(scale[a] * shape[a] != out[a] for a in range(2, rank)):
            # a scale that is not out/in: torch must map coordinates by the scale, as ONNX does
            y = F.interpolate(x, scale_factor=scale[2:], mode=tmode, align_corners=False, recompute_scale_factor=False)
            if list(y.shape) != out:
                c.fail(f"torch makes {list(y.shape)} of these scales where ONNX makes {out}")
            return y
        return F.interpolate(x, size=out[2:], mode=tmode, align_corners=align)
    c.fail(f"mode {mode!r} is not supported (nearest and linear are)")


# ---- the module -----------------------------------------------------------------------------


def _np(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def _initializer_tensor(t) -> torch.Tensor:
    from onnx import numpy_helper

    dt = _torch_dtype(t.data_type, f"initializer '{t.name}'")
    arr = numpy_helper.to_array(t)
    if dt == torch.bfloat16:
        return torch.tensor(np.asarray(arr, dtype=np.float32)).to(dt)
    return torch.tensor(np.asarray(arr)).to(dt)  # a copy: the protobuf's buffer may be read-only


def _needed_nodes(graph) -> list:
    """The nodes some graph output depends on, in graph order (exporters leave dead ones)."""
    needed = {o.name for o in graph.output}
    keep = []
    for i in range(len(graph.node) - 1, -1, -1):
        n = graph.node[i]
        if any(o in needed for o in n.output):
            keep.append(i)
            needed.update(x for x in n.input if x)
    return [(i, graph.node[i]) for i in reversed(keep)]


class _Step:
    """A node forward runs: where each input comes from, and the constant inputs' small values."""

    def __init__(self, node: _Node, sources: list, consts: list):
        self.node, self.sources, self.consts, self.cache = node, sources, consts, {}


_IDENTITY_LIKE = ("Identity", "Dropout")


class OnnxModule(torch.nn.Module):
    """The ONNX graph at PATH as a torch module for inputs of fixed shapes (the graph's, with SHAPES
    overriding: {input name: [dims]}). forward(*inputs) takes the graph's non-initializer inputs in
    graph order and returns its output, or a tuple of them."""

    def __init__(self, path, shapes: dict | None = None):
        super().__init__()
        model = _load(path)
        graph = model.graph
        self._opset = _opset(model)
        if graph.sparse_initializer:
            raise OnnxImportError(f"{path}: sparse initializers are not supported")
        nodes = [_Node(p, i) for i, p in _needed_nodes(graph)]
        unsupported = {}
        for n in nodes:
            known = n.domain in ("", "ai.onnx") and n.op in _OPS and not n.has_subgraph
            if not known:
                unsupported.setdefault(n.op if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op}", n)
        if unsupported:
            listed = ", ".join(f"node {n.label} ({op})" for op, n in unsupported.items())
            s = "s" if len(unsupported) > 1 else ""
            raise OnnxImportError(f"{listed}: operator{s} not supported by mblast's ONNX reader")

        specs = _input_specs(graph, shapes)
        self._inputs = [name for name, _, _ in specs]
        self._shapes = [list(shape) for _, _, shape in specs]
        self._outputs = [o.name for o in graph.output]
        self._attr_of = {}  # value name -> ("attr", parameter/buffer name) | ("const", key)
        self._consts = {}  # constant tensors forward uses (not state: they are not the model's weights)
        self._plan = []

        static = {t.name: _initializer_tensor(t) for t in graph.initializer}
        initializers = set(static)
        self._alias = {}  # a value that is an initializer passed through Identity -> that initializer
        # The pass over the graph on stand-in inputs (zeros): the static nodes are evaluated for good,
        # the others run once to give the static ones the shapes they read, and to fail here, not later.
        env = {name: torch.zeros(shape, dtype=dt) for name, dt, shape in specs}
        with torch.no_grad():
            for node in nodes:
                for i in node.inputs:
                    if i and i not in static and i not in env:
                        raise OnnxImportError(f"{node.where()}: its input '{i}' is not produced before it")
                is_static = node.op in ("Shape", "Size") or all(not i or i in static for i in node.inputs)
                if is_static:
                    vals = [static[i] if i in static else env[i] if i else None for i in node.inputs]
                    consts = [_np(static[i]) if i in static else None for i in node.inputs]
                    outs = self._run(_Call(node, self._opset, vals, consts, {}))
                    for name, t in zip(node.outputs, outs):
                        if name:
                            static[name] = t.detach().contiguous()
                    if node.op in _IDENTITY_LIKE and node.inputs[0] in static and node.outputs[0]:
                        self._alias[node.outputs[0]] = self._alias.get(node.inputs[0], node.inputs[0])
                    continue
                sources, consts, vals = [], [], []
                for i in node.inputs:
                    if not i:
                        sources.append(None)
                        consts.append(None)
                        vals.append(None)
                    elif i in env:
                        sources.append(("dyn", i))
                        consts.append(None)
                        vals.append(env[i])
                    else:
                        sources.append(self._source(i, static[i], initializers))
                        small = not _is_float(static[i].dtype) or static[i].numel() <= _SMALL
                        consts.append(_np(static[i]) if small else _BIG)
                        vals.append(self._fetch(sources[-1], None))
                step = _Step(node, sources, consts)
                outs = self._run(_Call(node, self._opset, vals, consts, step.cache, self))
                for name, t in zip(node.outputs, outs):
                    if name:
                        env[name] = t
                self._plan.append(step)
        for o in self._outputs:
            if o in static:
                self._attr_of[o] = self._source(o, static[o], initializers)
            elif o not in env:
                raise OnnxImportError(f"{path}: graph output '{o}' is produced by no node")
        del self._alias

    def _new_state(self, name: str, t: torch.Tensor, parameter: bool) -> str:
        """Registers T as a parameter or buffer under NAME made a unique attribute name."""
        base = re.sub(r"\W", "_", name).lstrip("_") or "w"
        if base[0].isdigit():
            base = "w_" + base
        attr, k = base, 1
        while hasattr(self, attr):
            attr, k = f"{base}_{k}", k + 1
        if parameter:
            self.register_parameter(attr, torch.nn.Parameter(t.clone(), requires_grad=False))
        else:
            self.register_buffer(attr, t.clone())
        return attr

    def _source(self, name: str, t: torch.Tensor, initializers: set):
        """Where forward finds the constant NAME. Float tensors of more than one element are the
        module's parameters (initializers) or buffers (values folded from them or from Constant
        nodes), so that the importer takes them as weights; so are other tensors too large to be
        constants of the traced graph (index tables); the rest are plain constants."""
        root = self._alias.get(name, name)
        if root in self._attr_of:
            return self._attr_of[root]
        if (_is_float(t.dtype) and t.numel() > 1) or t.numel() > _SMALL:
            parameter = root in initializers and _is_float(t.dtype)
            src = ("attr", self._new_state(root, t, parameter))
        else:
            self._consts[root] = t.clone()
            src = ("const", root)
        self._attr_of[root] = src
        return src

    def _fetch(self, src, device):
        if src[0] == "attr":
            return getattr(self, src[1])  # through getattr: functional_call swaps what it returns
        t = self._consts[src[1]]
        return t if device is None or t.device == device else t.to(device)

    @staticmethod
    def _run(call: _Call) -> list:
        try:
            out = _OPS[call.node.op](call)
        except OnnxImportError:
            raise
        except Exception as e:
            raise OnnxImportError(f"{call.node.where()}: {_one_line(e)}") from None
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        if len(outs) < len([o for o in call.node.outputs if o]):
            call.fail(f"it has {len(call.node.outputs)} outputs; only {len(outs)} are supported")
        return outs

    def forward(self, *inputs):
        if len(inputs) != len(self._inputs):
            raise TypeError(
                f"the model takes {len(self._inputs)} inputs ({', '.join(self._inputs)}), not {len(inputs)}"
            )
        for name, shape, x in zip(self._inputs, self._shapes, inputs):
            # the folded shapes are those of __init__'s inputs: other shapes would get wrong results
            if list(x.shape) != shape:
                raise ValueError(f"input '{name}' has shape {list(x.shape)}; this module was built for {shape}")
        env = dict(zip(self._inputs, inputs))
        device = inputs[0].device if inputs else None
        for step in self._plan:
            vals = [None if s is None else env[s[1]] if s[0] == "dyn" else self._fetch(s, device) for s in step.sources]
            outs = _OPS[step.node.op](_Call(step.node, self._opset, vals, step.consts, step.cache, self))
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            for name, t in zip(step.node.outputs, outs):
                if name:
                    env[name] = t
        results = [env[o] if o in env else self._fetch(self._attr_of[o], device) for o in self._outputs]
        return results[0] if len(results) == 1 else tuple(results)


def example_inputs(path, shapes: dict | None = None, seed: int = 0) -> list:
    """One tensor per graph input (initializers excepted), of the graph's shapes with SHAPES
    overriding, drawn from a generator seeded with SEED."""
    model = _load(path, external_data=False)  # the weights are not needed for the inputs
    g = torch.Generator().manual_seed(seed)
    out = []
    for _, dtype, shape in _input_specs(model.graph, shapes):
        if _is_float(dtype):
            out.append(torch.randn(shape, generator=g, dtype=torch.float32).to(dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, shape, generator=g).bool())
        else:
            # Integer inputs are most often indices (token ids, positions) or masks, whose values
            # matter: 0 and 1 are valid for any of these, where random ints would index out of range.
            out.append(torch.randint(0, 2, shape, generator=g, dtype=dtype))
    return out


def check_against_onnxruntime(path, shapes=None, seeds=(0, 1, 2), rtol: float = 1e-4, atol: float = 1e-4) -> dict:
    """OnnxModule's outputs next to onnxruntime's (CPUExecutionProvider) on example_inputs of each
    seed. Returns {"max_abs_error", "max_rel_error" (the error over max(|expected|, atol)),
    "outputs" (how many per run), "ok" (every element within atol + rtol * |expected|, NaN where
    onnxruntime has NaN), "detail" (why not ok, else "")}."""
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise OnnxImportError(f"onnxruntime is needed to check the reader's results ({_one_line(e)})") from None
    module = OnnxModule(path, shapes).eval()
    specs = _input_specs(_load(path, external_data=False).graph, shapes)
    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        session = ort.InferenceSession(os.fspath(path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as e:
        return {
            "max_abs_error": math.inf,
            "max_rel_error": math.inf,
            "outputs": 0,
            "ok": False,
            "detail": f"onnxruntime cannot load the model: {_one_line(e)}",
        }
    max_abs, max_rel, ok, detail, n_out = 0.0, 0.0, True, "", 0
    for seed in seeds:
        xs = example_inputs(path, shapes, seed)
        with torch.no_grad():
            ours = module(*xs)
        ours = list(ours) if isinstance(ours, tuple) else [ours]
        feeds = {name: _np(x) for (name, _, _), x in zip(specs, xs)}
        try:
            theirs = session.run(None, feeds)
        except Exception as e:
            return {
                "max_abs_error": math.inf,
                "max_rel_error": math.inf,
                "outputs": len(ours),
                "ok": False,
                "detail": f"onnxruntime cannot run the model: {_one_line(e)}",
            }
        n_out = len(theirs)
        if len(ours) != len(theirs):
            return {
                "max_abs_error": math.inf,
                "max_rel_error": math.inf,
                "outputs": n_out,
                "ok": False,
                "detail": f"{len(ours)} outputs where onnxruntime gives {len(theirs)}",
            }
        for k, (a, b) in enumerate(zip(ours, theirs)):
            b = np.asarray(b)
            if a.dtype != torch.bfloat16 and _np(a).dtype != b.dtype:
                ok = False
                detail = detail or f"output {k} has type {_np(a).dtype}; onnxruntime's has {b.dtype}"
            a, b = _np(a).astype(np.float64), b.astype(np.float64)
            if a.shape != b.shape:
                ok = False
                detail = detail or f"output {k} has shape {list(a.shape)}; onnxruntime's has {list(b.shape)}"
                max_abs = max_rel = math.inf
                continue
            if a.size == 0:
                continue
            with np.errstate(invalid="ignore"):
                err = np.where(a == b, 0.0, np.abs(a - b))  # equal infinities are no error
            err = np.where(np.isnan(a) & np.isnan(b), 0.0, err)
            err = np.where(np.isnan(err), math.inf, err)  # NaN on one side only
            rel = err / np.maximum(np.abs(b), atol)
            max_abs, max_rel = max(max_abs, float(err.max())), max(max_rel, float(np.nan_to_num(rel).max()))
            bad = err > atol + rtol * np.abs(np.nan_to_num(b))
            if bad.any():
                ok = False
                i = int(np.argmax(np.where(bad, err, -1.0)))
                detail = detail or (
                    f"seed {seed}, output {k}: {int(bad.sum())} of {a.size} elements differ, the largest "
                    f"by {float(err.reshape(-1)[i]):.3g} (ours {a.reshape(-1)[i]:.6g}, onnxruntime's {b.reshape(-1)[i]:.6g})"
                )
    return {"max_abs_error": max_abs, "max_rel_error": max_rel, "outputs": n_out, "ok": ok, "detail": detail}
