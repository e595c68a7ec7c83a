"""The traced graph of a module (torch.fx, else torch.export), its op class, and its FLOPs."""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import os
import sys

import torch

from . import recurrent
from .common import Failure, one_line
from .tensors import Reference, dtype_tables, json_constant, torch_version


def _qualified(target) -> str:
    if isinstance(target, str):
        return target
    try:
        from torch.fx.node import _get_qualified_name

        return _get_qualified_name(target)
    except Exception:
        mod = getattr(target, "__module__", None) or ""
        name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)
        return f"{mod}.{name}" if mod else name


def _meta_json(m):
    """TensorMetadata / FakeTensor / nested tuple -> {"shape", "dtype"} or a list of them."""
    if m is None:
        return None
    shape = getattr(m, "shape", None)
    dtype = getattr(m, "dtype", None)
    if shape is None or dtype is None:  # TensorMetadata is a namedtuple: test it first
        if isinstance(m, (tuple, list)):
            return [_meta_json(x) for x in m]
        return None
    try:
        shape = [int(d) for d in shape]
    except Exception:
        shape = [str(d) for d in shape]
    to_mb, _ = dtype_tables()
    return {"shape": shape, "dtype": to_mb.get(dtype, str(dtype).replace("torch.", ""))}


def _arg_json(a):
    fx = torch.fx
    if isinstance(a, fx.Node):
        return {"node": a.name}
    if isinstance(a, (list, tuple)):
        return [_arg_json(x) for x in a]
    if isinstance(a, dict):
        return {str(k): _arg_json(v) for k, v in a.items()}
    if isinstance(a, slice):
        return {"slice": [_arg_json(a.start), _arg_json(a.stop), _arg_json(a.step)]}
    if a is Ellipsis:
        return "..."
    if a is None or isinstance(a, (bool, int, str)):
        return a
    if isinstance(a, float):
        return a if math.isfinite(a) else str(a)
    if isinstance(a, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
        return str(a)
    if isinstance(a, torch.Size):
        return list(a)
    return repr(a)


def _module_attributes(m) -> dict:
    out = {}
    for k, v in vars(m).items():
        if k.startswith("_") or k == "training":
            continue
        if isinstance(v, (bool, int, float, str)) or (
            isinstance(v, tuple) and all(isinstance(x, (bool, int, float, str)) for x in v)
        ):
            out[k] = list(v) if isinstance(v, tuple) else v
    for k in ("weight", "bias"):
        if hasattr(m, k) and isinstance(getattr(m, k, None), (torch.Tensor, type(None))):
            out.setdefault(f"has_{k}", getattr(m, k) is not None)
    return out


def trace_graph(model, args, tensor_names, param_names):
    """Returns (graph dict | None, note | None). `args` are the forward arguments as the
    file gives them (tensors on the device, constants as values). torch.fx comes first (a
    module-level graph with nn.Module attributes); torch.export (torch >= 2.1) when fx fails.
    MBLAST_KB_TRACER=fx|export restricts to one of them (for tests)."""
    only = os.environ.get("MBLAST_KB_TRACER", "")
    notes = []
    if only in ("", "fx"):
        try:
            return _trace_fx(model, args, tensor_names, param_names), None
        except Exception as e:
            notes.append(f"torch.fx.symbolic_trace: {one_line(e)}")
    if only in ("", "export"):
        if torch_version() >= (2, 1) and hasattr(torch, "export"):
            try:
                return _trace_export(model, args, tensor_names), None
            except Exception as e:
                notes.append(f"torch.export: {one_line(e)}")
        else:
            notes.append(f"torch.export is not available in torch {torch.__version__}")
    return None, "; ".join(notes)


def _trace_fx(model, args, tensor_names, param_names):
    import torch.fx as fx
    from torch.fx.passes.shape_prop import ShapeProp

    model = copy.deepcopy(model)
    concrete = {}
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            if i >= len(positional):
                raise Failure("forward takes its constants through *args; cannot specialise them")
            concrete[positional[i].name] = a
    gm = fx.symbolic_trace(model, concrete_args=concrete or None)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    feed = list(args) if len(placeholders) == len(args) else [a for a in args if isinstance(a, torch.Tensor)]
    with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
        ShapeProp(gm).propagate(*feed)
    modules = dict(gm.named_modules())
    nodes = []
    ph_index = 0
    for n in gm.graph.nodes:
        e = {"name": n.name, "op": n.op, "target": _qualified(n.target)}
        if n.op == "placeholder":
            if ph_index < len(args):
                e["argument"] = f"in{ph_index}"
                if not isinstance(args[ph_index], torch.Tensor):
                    e["constant"] = json_constant(args[ph_index], "a constant")
                elif f"in{ph_index}" in tensor_names:
                    e["tensor"] = f"in{ph_index}"
            ph_index += 1
        elif n.op == "get_attr":
            if n.target in param_names:
                e["tensor"] = n.target
        elif n.op == "call_module":
            m = modules.get(n.target)
            if m is not None:
                e["module"] = type(m).__module__ + "." + type(m).__qualname__
                e["attributes"] = _module_attributes(m)
        e["args"] = _arg_json(n.args)
        e["kwargs"] = _arg_json(dict(n.kwargs))
        meta = _meta_json(n.meta.get("tensor_meta"))
        if isinstance(meta, dict):
            e.update(meta)
        elif isinstance(meta, list):
            e["outputs"] = meta
        nodes.append(e)
    return {"format": 1, "method": "torch.fx.symbolic_trace + ShapeProp", "torch": torch.__version__, "nodes": nodes}


def _trace_export(model, args, tensor_names):
    copied = copy.deepcopy(model)
    recurrent.as_one_op(copied)
    ep = torch.export.export(copied, tuple(args))
    sig = ep.graph_signature
    p_map = dict(getattr(sig, "inputs_to_parameters", {}) or {})
    p_map.update(dict(getattr(sig, "inputs_to_buffers", {}) or {}))
    user_inputs = list(getattr(sig, "user_inputs", []) or [])
    nodes = []
    for n in ep.graph_module.graph.nodes:
        e = {"name": n.name, "op": n.op, "target": _qualified(n.target) if n.op != "call_function" else str(n.target)}
        if n.op == "placeholder":
            if n.name in p_map:
                e["tensor"] = p_map[n.name]
            elif n.name in user_inputs:
                i = user_inputs.index(n.name)
                tensor_positions = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor)]
                if i < len(tensor_positions):
                    e["tensor"] = f"in{tensor_positions[i]}"
        e["args"] = _arg_json(n.args)
        e["kwargs"] = _arg_json(dict(n.kwargs))
        meta = _meta_json(n.meta.get("val", n.meta.get("tensor_meta")))
        if isinstance(meta, dict):
            e.update(meta)
        elif isinstance(meta, list):
            e["outputs"] = meta
        nodes.append(e)
    return {"format": 1, "method": "torch.export (aten level)", "torch": torch.__version__, "nodes": nodes}


# op classes, by the name of what a node calls (fx functions, methods, module types, aten
# ops), lower-cased without leading/trailing underscores: (class, exact names, substrings)
_SHAPE_OPS = {
    "view",
    "reshape",
    "permute",
    "transpose",
    "t",
    "flatten",
    "unflatten",
    "squeeze",
    "unsqueeze",
    "contiguous",
    "getitem",
    "size",
    "expand",
    "expand_as",
    "getattr",
    "to",
    "type",
    "float",
    "half",
    "double",
    "clone",
    "detach",
    "chunk",
    "split",
    "cat",
    "stack",
    "narrow",
    "select",
    "slice",
    "assert",
    "eq",
    "dim",
    "numel",
    "identity",
    "dropout",
    "alias",
    "to_copy",
    "empty_like",
    "zeros_like",
    "ones_like",
    "repeat",
    "tile",
    "flip",
    "roll",
    "pad",
    "movedim",
    "view_as",
    "reshape_as",
    "sym_size",
    "lift_fresh_copy",
    "copy",
    "cpu",
    "cuda",
    "unbind",
    "split_with_sizes",
    "unsafe_view",
    "clone",
    "empty",
    "zeros",
    "ones",
    "arange",
    "full",
    "scalar_tensor",
    "item",
    "len",
}
_CLASS_RULES = [
    ("attention", (), ("scaled_dot_product_attention", "multiheadattention", "efficient_attention", "flash_attention")),
    ("conv", (), ("conv",)),
    (
        "matmul",
        ("mm", "bmm", "dot", "mv", "outer", "einsum", "addmm", "baddbmm", "addbmm", "addmv", "tensordot"),
        ("linear", "matmul", "bilinear", "lstm", "gru", "rnn"),
    ),
    (
        "norm",
        (),
        (
            "batch_norm",
            "batchnorm",
            "layer_norm",
            "layernorm",
            "group_norm",
            "groupnorm",
            "instance_norm",
            "instancenorm",
            "rms_norm",
            "rmsnorm",
            "normalize",
            "local_response_norm",
            "localresponsenorm",
        ),
    ),
    ("softmax", ("softmin",), ("softmax",)),
    ("pooling", (), ("pool",)),
    (
        "reduction",
        (
            "sum",
            "mean",
            "amax",
            "amin",
            "max",
            "min",
            "argmax",
            "argmin",
            "prod",
            "cumsum",
            "cumprod",
            "var",
            "std",
            "norm",
            "logsumexp",
            "all",
            "any",
            "var_mean",
            "std_mean",
            "cummax",
            "cummin",
            "nll",
            "kl_div",
            "cross_entropy",
            "cosine_similarity",
            "pairwise_distance",
            "dist",
        ),
        ("loss",),
    ),
    (
        "activation",
        (
            "relu",
            "gelu",
            "sigmoid",
            "tanh",
            "silu",
            "elu",
            "selu",
            "leaky_relu",
            "leakyrelu",
            "hardtanh",
            "softplus",
            "softsign",
            "hardsigmoid",
            "hardswish",
            "mish",
            "relu6",
            "threshold",
            "prelu",
            "celu",
            "glu",
            "logsigmoid",
            "tanhshrink",
            "softshrink",
            "hardshrink",
            "swish",
            "rrelu",
            "relu_",
            "sigmoid_",
            "tanh_",
        ),
        (),
    ),
]
_HEAVY = ("attention", "conv", "matmul")


def _node_key(n: dict) -> str | None:
    if n["op"] == "call_module":
        key = n.get("module", n["target"]).rsplit(".", 1)[-1]
    elif n["op"] in ("call_function", "call_method"):
        t = n["target"]
        key = t.split(".")[1] if t.startswith("aten.") else t.rsplit(".", 1)[-1]
    else:
        return None
    return key.lower().strip("_")


def _classify(key: str) -> str | None:
    if key in _SHAPE_OPS:
        return None
    for cls, exact, substrings in _CLASS_RULES:
        if key in exact or any(w in key for w in substrings):
            return cls
    return "elementwise"


def guess_op_class(graph) -> str:
    if graph is None:
        return "model"
    classes = []
    nodes = graph["nodes"] or graph.get("aten", {}).get("nodes", [])
    for n in nodes:
        key = _node_key(n)
        if key is None:
            continue
        c = _classify(key)
        if c:
            classes.append(c)
    if not classes:
        return "elementwise"
    heavy = [c for c in classes if c in _HEAVY]
    if len(heavy) >= 3:
        return "model"
    for c in ("attention", "conv", "matmul", "norm", "softmax", "pooling", "reduction"):
        if c in classes:
            return c
    if all(c == "activation" for c in classes):
        return "activation"
    return "elementwise"


def analytic_flops(graph, model) -> int | None:
    """2*M*N*K for matmul/linear/bmm/addmm/baddbmm and 2*N*K*C*R*S*P*Q for convolutions, read
    from the traced fx graph's shapes (what torch's flop counter counts). None without shapes."""
    if graph is None or not graph["method"].startswith("torch.fx"):
        return None
    by_name = {n["name"]: n for n in graph["nodes"]}
    modules = dict(model.named_modules())
    params = dict(model.named_parameters())
    params.update(dict(model.named_buffers()))

    def shape_of(a):
        if isinstance(a, dict) and "node" in a:
            n = by_name.get(a["node"])
            if n is not None and "shape" in n:
                return n["shape"]
            if n is not None and n["op"] == "get_attr" and n["target"] in params:
                return list(params[n["target"]].shape)
        return None

    def conv_flops(x_shape, w_shape, out_shape, transposed):
        spatial = x_shape[2:] if transposed else out_shape[2:]
        return 2 * out_shape[0] * math.prod(w_shape) * math.prod(spatial)

    total = 0
    for n in graph["nodes"]:
        out = n.get("shape")
        if out is None or not all(isinstance(d, int) for d in out):
            continue
        numel = math.prod(out)
        args = n.get("args", [])
        key = _node_key(n) or ""
        if n["op"] == "call_module":
            m = modules.get(n["target"])
            if isinstance(m, torch.nn.Linear):
                total += 2 * numel * m.in_features
            elif isinstance(m, torch.nn.modules.conv._ConvNd) and args:
                xs = shape_of(args[0])
                if xs:
                    total += conv_flops(xs, list(m.weight.shape), out, bool(m.transposed))
            elif isinstance(m, torch.nn.Bilinear):
                total += 2 * numel * m.in1_features * m.in2_features
        elif n["op"] in ("call_function", "call_method"):
            if key in ("matmul", "mm", "bmm") and len(args) >= 2:
                a = shape_of(args[0])
                if a:
                    total += 2 * numel * a[-1]
            elif key in ("addmm", "baddbmm", "addbmm") and len(args) >= 3:
                a = shape_of(args[1])
                if a:
                    total += 2 * numel * a[-1]
            elif key == "linear" and len(args) >= 2:
                w = shape_of(args[1])
                if w:
                    total += 2 * numel * w[-1]
            elif (
                key in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
                and len(args) >= 2
            ):
                xs, ws = shape_of(args[0]), shape_of(args[1])
                if xs and ws:
                    total += conv_flops(xs, ws, out, "transpose" in key)
    return int(total)


def count_flops(model_ref: Reference, args, graph):
    """(flops, method)."""
    if torch_version() >= (2, 1):
        try:
            from torch.utils.flop_counter import FlopCounterMode

            model_ref.restore()
            with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
                with FlopCounterMode(display=False) as fc:
                    model_ref.model(*args)
            model_ref.restore()
            return int(fc.get_total_flops()), "torch.flop_counter"
        except Exception:
            model_ref.restore()
    f = analytic_flops(graph, model_ref.model)
    if f is not None:
        return f, "analytic-fx"
    return 0, "unknown"


# --- ATen-level capture (issue 39): the graph the lowering pipeline (src/lower) reads. ---

# Composite ops the lowering has no rule for are decomposed into primitive aten ops; what
# stays composite on purpose (softmax, convolution, pooling, mm) has a lowering of its own.
_KEEP_COMPOSITE = {
    "_softmax",
    "_log_softmax",
    "convolution",
    "mm",
    "bmm",
    "addmm",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "avg_pool2d",
    "avg_pool3d",
    "embedding",
    "native_dropout",
    "_adaptive_avg_pool2d",
    "_adaptive_avg_pool3d",
}


def _loss_reduction(loss, reduction):
    # aten's reduction codes: 0 none, 1 mean, 2 sum (torch.nn._reduction).
    aten = torch.ops.aten
    if reduction == 1:
        return aten.mean.default(loss)
    if reduction == 2:
        return aten.sum.default(loss)
    return loss


def _smooth_l1_loss(input, target, reduction=1, beta=1.0):
    # PyTorch's definition: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta 0: L1).
    aten = torch.ops.aten
    d = aten.abs.default(aten.sub.Tensor(input, target))
    if beta == 0:
        return _loss_reduction(d, reduction)
    quad = aten.div.Tensor(aten.mul.Tensor(aten.mul.Tensor(d, d), 0.5), beta)
    lin = aten.sub.Tensor(d, 0.5 * beta)
    return _loss_reduction(aten.where.self(aten.lt.Scalar(d, beta), quad, lin), reduction)


def _huber_loss(input, target, reduction=1, delta=1.0):
    # PyTorch's definition: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta).
    aten = torch.ops.aten
    d = aten.abs.default(aten.sub.Tensor(input, target))
    quad = aten.mul.Tensor(aten.mul.Tensor(d, d), 0.5)
    lin = aten.mul.Tensor(aten.sub.Tensor(d, 0.5 * delta), delta)
    return _loss_reduction(aten.where.self(aten.lt.Scalar(d, delta), quad, lin), reduction)


# Composite ops that some torch versions keep whole (1.13 has no decomposition for these): ours,
# written from PyTorch's documented definitions, used only where the version's table has none.
def _own_decompositions():
    aten = torch.ops.aten
    own = {}
    for name, fn in (("smooth_l1_loss", _smooth_l1_loss), ("huber_loss", _huber_loss)):
        packet = getattr(aten, name, None)
        if packet is not None:
            own[packet.default] = fn
    return own


def _decomposition_table():
    import torch._decomp as decomp

    core = getattr(decomp, "core_aten_decompositions", None)
    if core is not None:
        table = dict(core())
    else:  # torch 1.13: the aten -> aten decompositions only (torch._refs goes down to prims)
        table = {
            op: fn
            for op, fn in decomp.decomposition_table.items()
            if getattr(fn, "__module__", "") == "torch._decomp.decompositions"
        }
    for op, fn in _own_decompositions().items():
        table.setdefault(op, fn)
    out = {}
    for op, fn in table.items():
        name = getattr(op, "_schema", None)
        base = name.name.split("::")[-1] if name is not None else str(op).split(".")[-2]
        if base in _KEEP_COMPOSITE or "backward" in base:
            continue
        out[op] = fn
    return out


def _aten_target(t) -> str:
    if isinstance(t, torch._ops.OpOverload):
        return str(t)  # "aten.mm.default"
    return _qualified(t)


def _strides_of(m):
    st = getattr(m, "stride", None)
    try:
        return [int(s) for s in (st() if callable(st) else st)]
    except Exception:
        return None


def trace_aten(model, args, tensor_names, param_names):
    """(graph | None, note | None): the module's forward at the ATen level, composite ops
    decomposed. torch.export + run_decompositions on torch >= 2.1, make_fx otherwise.
    Placeholders carry "tensor": the problem's parameter/buffer name or "in<i>"; constants
    given to forward are baked into the graph."""
    try:
        if torch_version() >= (2, 1) and hasattr(torch, "export"):
            return _aten_export(model, args, tensor_names, param_names), None
        return _aten_make_fx(model, args, tensor_names, param_names), None
    except Exception as e:
        return None, f"aten capture: {one_line(e)}"


# A constant tensor inside the graph (torch.tensor(0.5) in forward, a small table) travels with its
# values up to this many elements; a larger one is named by its shape only and refused by the lowering.
CONSTANT_VALUES_MAX = 64


def _constant_json(t) -> dict:
    e = _meta_json(t) or {}
    if isinstance(t, torch.Tensor) and t.numel() <= CONSTANT_VALUES_MAX:
        # JSON has no infinities or NaN: those go as the strings the lowering reads elsewhere too.
        e["value"] = [
            x if not isinstance(x, float) or math.isfinite(x) else ("nan" if x != x else "inf" if x > 0 else "-inf")
            for x in t.detach().cpu().flatten().tolist()
        ]
    return e


def _aten_nodes(graph, placeholder_tensor, meta_key_order=("val", "tensor_meta"), constant=None):
    """CONSTANT(node) -> the tensor behind a get_attr node or a lifted constant's placeholder, or None."""
    nodes = []
    for n in graph.nodes:
        e = {
            "name": n.name,
            "op": n.op,
            "target": _aten_target(n.target) if n.op == "call_function" else _qualified(n.target),
        }
        if n.op == "placeholder":
            t = placeholder_tensor(n)
            if t is not None:
                e["tensor"] = t
        held = constant(n) if constant is not None and n.op in ("get_attr", "placeholder") else None
        if isinstance(held, tuple):  # (name, tensor): a constant that is one of the problem's parameters
            e["tensor"] = held[0]
            e.update(_meta_json(held[1]) or {})
        elif isinstance(held, torch.Tensor):
            e.update(_constant_json(held))
        e["args"] = _arg_json(n.args)
        e["kwargs"] = _arg_json(dict(n.kwargs))
        m = None
        for k in meta_key_order:
            if k in n.meta:
                m = n.meta[k]
                break
        meta = _meta_json(m)
        if isinstance(meta, dict):
            e.update(meta)
            st = _strides_of(m)
            if st is not None:
                e["strides"] = st
        elif isinstance(meta, list):
            e["outputs"] = meta
        nodes.append(e)
    return nodes


def _aten_make_fx(model, args, tensor_names, param_names):
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.utils import stateless

    original, model = model, copy.deepcopy(model)
    recurrent.as_one_op(model)
    named = [(n, p) for n, p in model.named_parameters()] + [(n, b) for n, b in model.named_buffers()]
    named = [(n, t) for n, t in named if n in param_names]
    tensor_pos = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    n_par = len(named)

    def f(*flat):
        state = {n: flat[k] for k, (n, _) in enumerate(named)}
        call = list(args)
        for k, i in enumerate(tensor_pos):
            call[i] = flat[n_par + k]
        return stateless.functional_call(model, state, tuple(call))

    flat = [t.detach() for _, t in named] + [args[i] for i in tensor_pos]
    with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
        gm = make_fx(f, decomposition_table=_decomposition_table(), tracing_mode="real")(*flat)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = [n for n, _ in named] + [f"in{i}" for i in tensor_pos]
    by_node = {p.name: names[k] for k, p in enumerate(placeholders) if k < len(names)}

    def ph(n):
        t = by_node.get(n.name)
        return t if t is not None and (t in param_names or t in tensor_names) else None

    # A module that reads its parameters through a list of its own (nn.LSTM's _flat_weights)
    # bypasses functional_call: they are traced as constants. The same storage is the parameter
    # (the copy's, or the original's that a closure in forward still holds).
    storage = {**_storage_names(original, param_names), **_storage_names(model, param_names)}

    def constant(n):
        if n.op != "get_attr":
            return None
        t = getattr(gm, n.target, None)
        if isinstance(t, torch.Tensor) and t.numel() > 0:
            name = storage.get((t.data_ptr(), tuple(t.shape), tuple(t.stride())))
            if name is not None:
                return name, t
        return t

    return {
        "format": 1,
        "method": "make_fx + torch._decomp (aten level)",
        "torch": torch.__version__,
        "nodes": _aten_nodes(gm.graph, ph, constant=constant),
    }


def _storage_names(model, param_names) -> dict:
    """(data_ptr, shape, strides) -> the problem's name, for the module's parameters and buffers."""
    named = list(model.named_parameters()) + list(model.named_buffers())
    return {(t.data_ptr(), tuple(t.shape), tuple(t.stride())): n for n, t in named if n in param_names}


def _aten_export(model, args, tensor_names, param_names):
    copied = copy.deepcopy(model)
    recurrent.as_one_op(copied)
    ep = torch.export.export(copied, tuple(args))
    ep = ep.run_decompositions(_decomposition_table())
    sig = ep.graph_signature
    p_map = dict(getattr(sig, "inputs_to_parameters", {}) or {})
    p_map.update(dict(getattr(sig, "inputs_to_buffers", {}) or {}))
    user_inputs = list(getattr(sig, "user_inputs", []) or [])
    tensor_positions = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor)]

    # Constants lifted to inputs (torch.tensor(...) in forward) are held by the exported program.
    c_map = dict(getattr(sig, "inputs_to_lifted_tensor_constants", {}) or {})
    held = dict(getattr(ep, "constants", {}) or {})

    # Parameters that forward reaches through a closure (a lambda over a ModuleDict, as minGPT's
    # MLP) are lifted as constants: export traced a copy, and the closure still holds the original's
    # tensors. The same storage is the parameter, as under make_fx.
    # The same for the copy's own parameters read through a list (nn.LSTM's _flat_weights).
    storage = {**_storage_names(model, param_names), **_storage_names(copied, param_names)}

    def lifted(n):
        if n.op == "get_attr":
            t = getattr(ep.graph_module, n.target, None)
        else:
            t = held.get(c_map.get(n.name)) if n.name in c_map else None
        if isinstance(t, torch.Tensor) and t.numel() > 0:
            name = storage.get((t.data_ptr(), tuple(t.shape), tuple(t.stride())))
            if name is not None:
                return name, t
        return t

    def ph(n):
        if n.name in p_map:
            return p_map[n.name]
        if n.name in user_inputs:
            i = user_inputs.index(n.name)
            if i < len(tensor_positions):
                return f"in{tensor_positions[i]}"
        return None

    nodes = _aten_nodes(ep.graph_module.graph, ph, constant=lambda n: lifted(n))
    # The output node returns the buffers forward updates (batch norm's running statistics in
    # training mode) before the user's outputs: only the user's are the problem's outputs, as under
    # make_fx, where the updates go to buffers no one reads back.
    user = _user_outputs(sig)
    for e in nodes:
        if e["op"] == "output" and user is not None:
            outs = e["args"][0] if len(e["args"]) == 1 and isinstance(e["args"][0], list) else e["args"]
            kept = [a for a in outs if not (isinstance(a, dict) and "node" in a) or a["node"] in user]
            e["args"] = [kept]
    return {
        "format": 1,
        "method": "torch.export + run_decompositions (aten level)",
        "torch": torch.__version__,
        "nodes": nodes,
    }


def _user_outputs(sig):
    """The names of the exported graph's outputs that are forward's own (not buffer or input
    mutations), or None when the signature does not say."""
    specs = getattr(sig, "output_specs", None)
    if specs is None:
        return None
    names = set()
    for o in specs:
        if getattr(o.kind, "name", str(o.kind)) == "USER_OUTPUT":
            names.add(getattr(o.arg, "name", None))
    return names


def with_aten(graph, note, model, args, tensor_names, param_names):
    """(graph, note) with the ATen-level graph under graph["aten"] (a graph of no fx nodes
    when only the ATen capture worked, so that the lowering pipeline still has it)."""
    aten, aten_note = trace_aten(model, args, tensor_names, param_names)
    if aten is None:
        return graph, "; ".join(x for x in (note, aten_note) if x) or None
    if graph is None:
        graph = {"format": 1, "method": f"none ({note})", "torch": torch.__version__, "nodes": []}
    graph["aten"] = aten
    return graph, note
