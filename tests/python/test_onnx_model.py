"""Tests of tools/kernelbench/onnx_model.py, the ONNX reader behind `mblast optimize-model model.onnx`:
models exported from torch and graphs written with onnx.helper, each run by OnnxModule and by
onnxruntime on the same inputs, and traced with make_fx the way the importer traces a model (its
parameters as inputs, the importer's decompositions), the traced graph run again; then the
errors a user meets (not an ONNX file, an operator the reader lacks, a symbolic dimension).

Run from the repository root:  .venv/bin/python3 -m unittest -v tests/python/test_onnx_model.py
Needs torch, numpy, onnx and onnxruntime for this interpreter (skipped without them).
"""

import os
import sys
import tempfile
import textwrap
import unittest
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

SKIP = None
try:
    import numpy as np
    import onnx
    import onnxruntime  # noqa: F401  (check_against_onnxruntime imports it)
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from onnx import TensorProto, helper, numpy_helper

    from kernelbench.onnx_model import OnnxImportError, OnnxModule, check_against_onnxruntime, example_inputs
except Exception as e:  # ImportError, or a broken install
    SKIP = f"torch, onnx and onnxruntime are needed for {sys.executable}: {type(e).__name__}: {e}"

FLOAT, INT64, BOOL = 1, 7, 9  # TensorProto element types


def decompositions():
    try:
        from kernelbench.graph import _decomposition_table

        return _decomposition_table()
    except Exception:  # the importer's table is a refinement; plain make_fx still shows traceability
        return None


def trace(module, xs):
    """The module traced as the importer traces a model (kernelbench/graph.py _aten_make_fx): the
    parameters and buffers are inputs of the traced function, through functional_call."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.utils import stateless

    named = list(module.named_parameters()) + list(module.named_buffers())

    def f(*flat):
        state = {n: flat[k] for k, (n, _) in enumerate(named)}
        return stateless.functional_call(module, state, tuple(flat[len(named) :]))

    flat = [t.detach() for _, t in named] + list(xs)
    with torch.no_grad():
        gm = make_fx(f, decomposition_table=decompositions(), tracing_mode="real")(*flat)
    return gm, flat


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def save(model, path):
    onnx.save(model, path)  # onnxruntime validates it when it loads it
    return path


def graph_model(nodes, inputs, outputs, inits=(), opset=17):
    """A model of NODES. INPUTS and OUTPUTS: (name, element type, shape or None); INITS: name -> array."""
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in dict(inits).items()],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@unittest.skipIf(SKIP, SKIP or "")
class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def check(self, path, shapes=None):
        """OnnxModule against onnxruntime (3 seeds), and the make_fx trace against OnnxModule."""
        r = check_against_onnxruntime(path, shapes)
        self.assertTrue(r["ok"], f"{os.path.basename(path)}: {r}")
        self.assertGreaterEqual(r["outputs"], 1)
        module = OnnxModule(path, shapes).eval()
        xs = example_inputs(path, shapes, seed=5)
        with torch.no_grad():
            want = as_list(module(*xs))
        gm, flat = trace(module, xs)
        got = as_list(gm(*flat))
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertEqual(g.dtype, w.dtype)
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, equal_nan=True)
        targets = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
        self.assertFalse([t for t in targets if "_local_scalar_dense" in t], "a value was read while tracing")
        # Weights reach the graph as parameters (placeholders), not as constants baked into it:
        # the lowering refuses a constant of more than 64 elements.
        big = [n.target for n in gm.graph.nodes if n.op == "get_attr" and getattr(gm, n.target).numel() > 64]
        self.assertFalse(big, "large constants in the traced graph")
        return module, r

    def export(self, model, args, name, opset, **kw):
        path = self.path(f"{name}_{opset}.onnx")
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's tracer warnings
            torch.onnx.export(model.eval(), args, path, opset_version=opset, **kw)
        return path

    def op_types(self, path):
        return {n.op_type for n in onnx.load(path).graph.node}


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=1, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)  # after the ReLU: the exporter cannot fold it into the conv
        self.fc = nn.Linear(16 * 4 * 4, 10)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 3, stride=2, padding=1, ceil_mode=True)
        x = self.bn(F.relu(self.conv2(x)))
        x = F.avg_pool2d(x, 2)
        return self.fc(torch.flatten(x, 1))


class BasicBlock(nn.Module):
    def __init__(self, cin=8, cout=16):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=2, bias=False), nn.BatchNorm2d(cout))
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                with torch.no_grad():
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.down(x))


class EncoderBlock(nn.Module):
    """A transformer encoder block written out: pre-norm attention and a GELU MLP."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)

        def split(y):
            return y.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / (d // self.heads) ** 0.5, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.o(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ViewFlatten(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        y = self.conv(x)
        return self.fc(y.view(y.size(0), -1))


class Deconv(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.grouped = nn.ConvTranspose2d(4, 6, 4, stride=2, padding=1, groups=2)

    def forward(self, x):
        return self.grouped(F.relu(self.up(x)))


class Conv1dGroupNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 12, 5, padding=2)
        self.gn = nn.GroupNorm(3, 12)
        with torch.no_grad():
            self.gn.weight.uniform_(0.5, 1.5)
            self.gn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return F.silu(self.gn(self.conv(x)))


class Upsample(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x):
        y = self.up(self.conv(x))
        return y, F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)


class ExportedModels(Base):
    def run_exported(self, model, args, name, expect_ops=(), shapes=None, **kw):
        for opset in (13, 17):
            with self.subTest(opset=opset):
                path = self.export(model, args, name, opset, **kw)
                ops = self.op_types(path)
                for op in expect_ops:
                    self.assertIn(op, ops, f"the export has no {op}: the test would not test it")
                self.check(path, shapes)

    def test_mlp(self):
        torch.manual_seed(0)
        self.run_exported(Mlp(), (torch.randn(4, 32),), "mlp", ("Gemm", "Relu", "Tanh"))

    def test_small_cnn(self):
        torch.manual_seed(0)
        ops = ("Conv", "BatchNormalization", "Relu", "MaxPool", "AveragePool", "Flatten", "Gemm")
        self.run_exported(SmallCnn(), (torch.randn(2, 3, 16, 16),), "cnn", ops)

    def test_resnet_basic_block(self):
        torch.manual_seed(0)
        self.run_exported(BasicBlock(), (torch.randn(2, 8, 16, 16),), "block", ("Conv", "Add", "Relu"))

    def test_transformer_encoder_block(self):
        torch.manual_seed(0)
        ops = ("MatMul", "Softmax", "Transpose", "Reshape", "Erf")
        self.run_exported(EncoderBlock(), (torch.randn(2, 8, 32),), "encoder", ops)
        self.assertIn("LayerNormalization", self.op_types(self.path("encoder_17.onnx")))

    def test_view_batch_is_folded(self):
        torch.manual_seed(0)
        shapes = {"x": [3, 3, 8, 8]}
        kw = dict(input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        self.run_exported(
            ViewFlatten(), (torch.randn(2, 3, 8, 8),), "view", ("Shape", "Gather", "Concat"), shapes, **kw
        )

    def test_conv_transpose(self):
        torch.manual_seed(0)
        self.run_exported(Deconv(), (torch.randn(1, 8, 5, 7),), "deconv", ("ConvTranspose",))

    def test_conv1d_group_norm(self):
        torch.manual_seed(0)
        self.run_exported(Conv1dGroupNorm(), (torch.randn(2, 4, 20),), "gn", ("Conv", "InstanceNormalization"))

    def test_upsample(self):
        torch.manual_seed(0)
        self.run_exported(Upsample(), (torch.randn(1, 3, 5, 6),), "up", ("Resize",))

    def test_parameters_are_the_initializers(self):
        torch.manual_seed(0)
        path = self.export(SmallCnn(), (torch.randn(2, 3, 16, 16),), "cnn", 13)
        m = OnnxModule(path)
        params = dict(m.named_parameters())
        self.assertTrue(params)
        self.assertFalse(any(p.requires_grad for p in params.values()))
        want = sum(
            numpy_helper.to_array(t).size
            for t in onnx.load(path).graph.initializer
            if t.data_type == TensorProto.FLOAT and numpy_helper.to_array(t).size > 1
        )
        self.assertEqual(sum(p.numel() for p in params.values()), want)
        conv = [p for p in params.values() if p.ndim == 4]
        self.assertEqual(sorted(tuple(p.shape) for p in conv), [(8, 3, 3, 3), (16, 8, 3, 3)])
        # the traced graph reads them as inputs (placeholders), as it does a module's own weights
        gm, _ = trace(m, example_inputs(path))
        self.assertEqual(len([n for n in gm.graph.nodes if n.op == "placeholder"]), len(params) + 1)


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name=f"{op.lower()}_{outputs[0]}", **attrs)


class HandWrittenGraphs(Base):
    """Ops and attributes that the exported models above do not produce."""

    def graph(self, name, nodes, inputs, outputs, inits=(), opset=17, shapes=None):
        path = save(graph_model(nodes, inputs, outputs, inits, opset), self.path(name + ".onnx"))
        with self.subTest(graph=name):
            self.check(path, shapes)
        return path

    def test_gemm(self):
        self.graph(
            "gemm_transb",
            [node("Gemm", ["a", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
            [("a", FLOAT, [4, 6])],
            [("y", FLOAT, None)],
            {"w": rnd(5, 6), "c": rnd(5, seed=1)},
        )
        self.graph(
            "gemm_transa",
            [node("Gemm", ["a", "w", "c"], ["y"], transA=1, beta=0.5)],
            [("a", FLOAT, [6, 4])],
            [("y", FLOAT, None)],
            {"w": rnd(6, 5), "c": rnd(4, 5, seed=1)},
        )
        self.graph(
            "gemm_plain",
            [node("Gemm", ["a", "w", "c"], ["y"])],
            [("a", FLOAT, [3, 5])],
            [("y", FLOAT, None)],
            {"w": rnd(5, 5), "c": rnd(5, seed=1)},
        )
        self.graph(
            "gemm_linear",
            [node("Gemm", ["a", "w", "c"], ["y"], transB=1)],
            [("a", FLOAT, [3, 6])],
            [("y", FLOAT, None)],
            {"w": rnd(5, 6), "c": rnd(5, seed=1)},
        )

    def test_clip(self):
        self.graph(
            "clip",
            [node("Clip", ["x", "lo", "hi"], ["y"]), node("Clip", ["x", "", "hi"], ["z"])],
            [("x", FLOAT, [3, 7])],
            [("y", FLOAT, None), ("z", FLOAT, None)],
            {"lo": np.float32(-0.5), "hi": np.float32(0.7)},
        )
        self.graph(
            "clip6",
            [node("Clip", ["x"], ["y"], min=-0.2, max=0.3)],
            [("x", FLOAT, [3, 7])],
            [("y", FLOAT, None)],
            opset=10,
        )

    def test_pad(self):
        pads = np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)
        for mode in ("reflect", "edge", "constant", "wrap"):
            ins = ["x", "pads"] + (["v"] if mode == "constant" else [])
            self.graph(
                f"pad_{mode}",
                [node("Pad", ins, ["y"], mode=mode)],
                [("x", FLOAT, [2, 3, 5, 6])],
                [("y", FLOAT, None)],
                {"pads": pads, "v": np.float32(1.5)},
                opset=19,
            )
        self.graph(
            "pad_axes_negative",
            [node("Pad", ["x", "pads", "", "axes"], ["y"])],
            [("x", FLOAT, [2, 3, 5, 6])],
            [("y", FLOAT, None)],
            {"pads": np.array([2, -1, 1, 3], np.int64), "axes": np.array([1, -1], np.int64)},
            opset=18,
        )

    def test_slice(self):
        inits = {
            "starts": np.array([-1, 10, 1], np.int64),
            "ends": np.array([-1000, 0, 100], np.int64),
            "axes": np.array([1, 2, -1], np.int64),
            "steps": np.array([-1, -2, 2], np.int64),
        }
        self.graph(
            "slice_negative_steps",
            [node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
            [("x", FLOAT, [2, 5, 7, 9])],
            [("y", FLOAT, None)],
            inits,
        )
        self.graph(
            "slice_default_axes",
            [node("Slice", ["x", "s", "e"], ["y"])],
            [("x", FLOAT, [6, 7])],
            [("y", FLOAT, None)],
            {"s": np.array([1, -3], np.int64), "e": np.array([-1, 9223372036854775807], np.int64)},
        )

    def test_split(self):
        self.graph(
            "split_sizes",
            [node("Split", ["x", "s"], ["a", "b", "c"], axis=1)],
            [("x", FLOAT, [2, 6, 3])],
            [("a", FLOAT, None), ("b", FLOAT, None), ("c", FLOAT, None)],
            {"s": np.array([2, 3, 1], np.int64)},
            opset=13,
        )
        self.graph(
            "split_uneven",
            [node("Split", ["x"], ["a", "b", "c"], axis=-1, num_outputs=3)],
            [("x", FLOAT, [2, 3, 7])],
            [("a", FLOAT, None), ("b", FLOAT, None), ("c", FLOAT, None)],
            opset=18,
        )
        self.graph(
            "split_attr",
            [node("Split", ["x"], ["a", "b"], axis=0, split=[1, 3])],
            [("x", FLOAT, [4, 3])],
            [("a", FLOAT, None), ("b", FLOAT, None)],
            opset=11,
        )

    def test_einsum(self):
        self.graph(
            "einsum",
            [
                node("Einsum", ["a", "b"], ["y"], equation="bhqd, bhkd -> bhqk"),
                node("Einsum", ["y"], ["t"], equation="ij...->ji..."),
            ],
            [("a", FLOAT, [2, 3, 4, 5]), ("b", FLOAT, [2, 3, 6, 5])],
            [("y", FLOAT, None), ("t", FLOAT, None)],
        )

    def test_cumsum(self):
        for ex, rev in ((0, 0), (1, 0), (0, 1), (1, 1)):
            self.graph(
                f"cumsum_{ex}{rev}",
                [node("CumSum", ["x", "axis"], ["y"], exclusive=ex, reverse=rev)],
                [("x", FLOAT, [3, 5, 4])],
                [("y", FLOAT, None)],
                {"axis": np.array(-2, np.int64)},
            )

    def test_reductions(self):
        self.graph(
            "reduce_l2",
            [node("ReduceL2", ["x"], ["y"], axes=[1], keepdims=0)],
            [("x", FLOAT, [3, 5, 4])],
            [("y", FLOAT, None)],
            opset=13,
        )
        ops = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceLogSumExp")
        self.graph(
            "reduce18",
            [node(op, ["x", "axes"], [f"y{i}"], keepdims=i % 2) for i, op in enumerate(ops)]
            + [
                node("ReduceSum", ["x", "none"], ["all"], keepdims=0),
                node("ReduceMax", ["x", "none"], ["same"], noop_with_empty_axes=1),
            ],
            [("x", FLOAT, [3, 5, 4])],
            [(f"y{i}", FLOAT, None) for i in range(len(ops))] + [("all", FLOAT, None), ("same", FLOAT, None)],
            {"axes": np.array([0, -1], np.int64), "none": np.array([], np.int64)},
            opset=18,
        )
        self.graph(
            "reduce_sum13",
            [node("ReduceSum", ["x", "axes"], ["y"], keepdims=0), node("ReduceMean", ["x"], ["m"], axes=[2])],
            [("x", FLOAT, [3, 5, 4])],
            [("y", FLOAT, None), ("m", FLOAT, None)],
            {"axes": np.array([1], np.int64)},
            opset=13,
        )

    def test_where_and_logic(self):
        self.graph(
            "where",
            [
                node("Greater", ["x", "zero"], ["pos"]),
                node("Where", ["pos", "x", "w"], ["y"]),
                node("Less", ["x", "w"], ["lt"]),
                node("LessOrEqual", ["x", "half"], ["le"]),
                node("GreaterOrEqual", ["w", "x"], ["ge"]),
                node("Equal", ["lt", "le"], ["eq"]),
                node("And", ["lt", "pos"], ["and"]),
                node("Or", ["ge", "pos"], ["or"]),
                node("Not", ["or"], ["not"]),
                node("Cast", ["eq"], ["eqf"], to=FLOAT),
                node("Xor", ["and", "not"], ["xor"]),
            ],
            [("x", FLOAT, [4, 6])],
            [("y", FLOAT, None), ("eqf", FLOAT, None), ("xor", BOOL, None), ("le", BOOL, None)],
            {"w": rnd(6), "zero": np.float32(0.0), "half": np.float32(0.5)},
        )

    def test_tile_expand_argmax_topk(self):
        self.graph(
            "tile",
            [node("Tile", ["x", "r"], ["y"])],
            [("x", FLOAT, [2, 3, 4])],
            [("y", FLOAT, None)],
            {"r": np.array([1, 2, 3], np.int64)},
        )
        self.graph(
            "expand",
            [node("Expand", ["x", "s"], ["y"])],
            [("x", FLOAT, [3, 1])],
            [("y", FLOAT, None)],
            {"s": np.array([2, 1, 4], np.int64)},
        )
        self.graph(
            "argmax",
            [
                node("ArgMax", ["x"], ["a"], axis=1, keepdims=0),
                node("ArgMin", ["x"], ["b"], axis=-1, select_last_index=1),
                node("ArgMax", ["x"], ["c"]),
            ],
            [("x", FLOAT, [3, 5, 4])],
            [("a", INT64, None), ("b", INT64, None), ("c", INT64, None)],
        )
        self.graph(
            "arg_ties",
            [
                node("Mul", ["x", "two"], ["x2"]),
                node("Round", ["x2"], ["r"]),
                node("ArgMin", ["r"], ["last"], axis=1, select_last_index=1),
                node("ArgMax", ["r"], ["first"], axis=-1, keepdims=0),
            ],
            [("x", FLOAT, [4, 9, 8])],
            [("last", INT64, None), ("first", INT64, None)],
            {"two": np.float32(2.0)},
        )
        self.graph(
            "topk",
            [node("TopK", ["x", "k"], ["v", "i"], axis=1)],
            [("x", FLOAT, [3, 7])],
            [("v", FLOAT, None), ("i", INT64, None)],
            {"k": np.array([3], np.int64)},
        )

    def test_conv_auto_pad_and_pools(self):
        w = rnd(4, 3, 3, 3)
        for auto in ("SAME_UPPER", "SAME_LOWER", "VALID"):
            self.graph(
                f"conv_{auto}",
                [node("Conv", ["x", "w"], ["y"], auto_pad=auto, strides=[2, 2])],
                [("x", FLOAT, [1, 3, 8, 7])],
                [("y", FLOAT, None)],
                {"w": w},
            )
        self.graph(
            "conv_asym_dilated_group",
            [node("Conv", ["x", "w", "b"], ["y"], pads=[0, 1, 2, 1], dilations=[2, 1], group=3)],
            [("x", FLOAT, [1, 3, 9, 8])],
            [("y", FLOAT, None)],
            {"w": rnd(6, 1, 3, 2), "b": rnd(6, seed=2)},
        )
        self.graph(
            "conv1d_3d",
            [
                node("Conv", ["x1", "w1"], ["y1"], pads=[1, 1]),
                node("Conv", ["x3", "w3"], ["y3"], strides=[1, 2, 2], pads=[1, 0, 1, 1, 0, 1]),
            ],
            [("x1", FLOAT, [2, 3, 10]), ("x3", FLOAT, [1, 2, 4, 6, 6])],
            [("y1", FLOAT, None), ("y3", FLOAT, None)],
            {"w1": rnd(4, 3, 3), "w3": rnd(3, 2, 3, 3, 3)},
        )
        self.graph(
            "pools",
            [
                node(
                    "AveragePool",
                    ["x"],
                    ["a"],
                    kernel_shape=[3, 3],
                    strides=[2, 2],
                    pads=[1, 1, 1, 1],
                    count_include_pad=1,
                ),
                node("AveragePool", ["x"], ["b"], kernel_shape=[3, 2], pads=[1, 0, 1, 0], ceil_mode=1, strides=[2, 2]),
                node("AveragePool", ["x"], ["c"], kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
                node("MaxPool", ["x"], ["d"], kernel_shape=[3, 3], auto_pad="SAME_UPPER", strides=[2, 2]),
                node("MaxPool", ["x"], ["e"], kernel_shape=[2, 2], dilations=[2, 2]),
                node("GlobalAveragePool", ["x"], ["f"]),
                node("GlobalMaxPool", ["x"], ["g"]),
            ],
            [("x", FLOAT, [1, 2, 7, 8])],
            [(n, FLOAT, None) for n in "abcdefg"],
        )

    def test_conv_transpose_forms(self):
        w = rnd(4, 2, 3, 3)
        self.graph(
            "convt_same",
            [node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], auto_pad="SAME_UPPER")],
            [("x", FLOAT, [1, 4, 5, 6])],
            [("y", FLOAT, None)],
            {"w": w, "b": rnd(2, seed=3)},
        )
        self.graph(
            "convt_asym",
            [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 3], pads=[0, 1, 1, 0], output_padding=[1, 0])],
            [("x", FLOAT, [1, 4, 5, 6])],
            [("y", FLOAT, None)],
            {"w": w},
        )
        self.graph(
            "convt_output_shape",
            [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[10, 13])],
            [("x", FLOAT, [1, 4, 5, 6])],
            [("y", FLOAT, None)],
            {"w": w},
        )

    def test_activations(self):
        acts = [
            ("Relu", {}),
            ("LeakyRelu", {"alpha": 0.2}),
            ("Elu", {"alpha": 0.7}),
            ("Selu", {}),
            ("Selu", {"alpha": 1.5, "gamma": 1.1}),
            ("Celu", {"alpha": 0.5}),
            ("HardSigmoid", {}),
            ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
            ("HardSwish", {}),
            ("Softplus", {}),
            ("Softsign", {}),
            ("Mish", {}),
            ("Sigmoid", {}),
            ("Tanh", {}),
            ("Erf", {}),
            ("Sin", {}),
            ("Cos", {}),
            ("Exp", {}),
            ("Neg", {}),
            ("Abs", {}),
            ("Floor", {}),
            ("Ceil", {}),
            ("ThresholdedRelu", {"alpha": 0.3}),
            ("Gelu", {}),
            ("Gelu", {"approximate": "tanh"}),
        ]
        self.graph(
            "activations",
            [node(op, ["x"], [f"y{i}"], **a) for i, (op, a) in enumerate(acts)],
            [("x", FLOAT, [3, 8])],
            [(f"y{i}", FLOAT, None) for i in range(len(acts))],
            opset=20,
        )
        self.graph(
            "prelu",
            [node("PRelu", ["x", "s"], ["y"]), node("PRelu", ["x", "s1"], ["z"])],
            [("x", FLOAT, [2, 3, 4, 5])],
            [("y", FLOAT, None), ("z", FLOAT, None)],
            {"s": rnd(3, 1, 1), "s1": rnd(5, seed=1)},
        )

    def test_arithmetic(self):
        self.graph(
            "arith",
            [
                node("Abs", ["x"], ["ax"]),
                node("Add", ["ax", "one"], ["ax1"]),
                node("Sqrt", ["ax"], ["sq"]),
                node("Log", ["ax1"], ["lg"]),
                node("Reciprocal", ["ax1"], ["rc"]),
                node("Pow", ["x", "two"], ["p2"]),
                node("Pow", ["ax1", "w"], ["pw"]),
                node("Div", ["x", "w"], ["dv"]),
                node("Div", ["one", "ax1"], ["dv1"]),
                node("Sub", ["one", "x"], ["sb"]),
                node("Mul", ["two", "x"], ["ml"]),
                node("Max", ["x", "w", "sq"], ["mx"]),
                node("Min", ["x", "zero"], ["mn"]),
                node("Sum", ["x", "w", "lg"], ["sm"]),
                node("Mean", ["x", "w"], ["me"]),
                node("Mod", ["x", "w"], ["md"], fmod=1),
            ],
            [("x", FLOAT, [4, 6])],
            [
                (n, FLOAT, None)
                for n in ("sq", "lg", "rc", "p2", "pw", "dv", "dv1", "sb", "ml", "mx", "mn", "sm", "me", "md")
            ],
            {"w": rnd(6) + 3, "one": np.float32(1.0), "two": np.float32(2.0), "zero": np.array([0.0], np.float32)},
        )

    def test_integer_arithmetic(self):
        # negative operands: Div truncates toward zero, Mod takes the divisor's sign
        self.graph(
            "ints",
            [
                node("Add", ["i", "k"], ["a"]),
                node("Div", ["a", "three"], ["d"]),
                node("Mod", ["a", "three"], ["r"]),
                node("Mod", ["a", "minus3"], ["rn"]),
                node("Mul", ["d", "k"], ["m"]),
                node("Sub", ["m", "k"], ["s"]),
                node("Neg", ["s"], ["n"]),
            ],
            [("i", INT64, [3, 4])],
            [("n", INT64, None), ("r", INT64, None), ("rn", INT64, None)],
            {"k": np.array([-7, 3, 5, -2], np.int64), "three": np.array(3, np.int64), "minus3": np.array(-3, np.int64)},
        )

    def test_shape_folding(self):
        # Everything from Shape on is known from the input's shape: evaluated once, in __init__.
        path = self.graph(
            "folding",
            [
                node("Shape", ["x"], ["s"]),
                node("Gather", ["s", "one"], ["n"], axis=0),
                node("Range", ["zero", "n", "one"], ["r"]),
                node("Cast", ["r"], ["rf"], to=FLOAT),
                node("ConstantOfShape", ["s"], ["ones"], value=numpy_helper.from_array(np.array([2.0], np.float32))),
                node("Mul", ["x", "ones"], ["x2"]),
                node("Slice", ["s", "one1", "two"], ["tail"]),
                node("Concat", ["minus1", "tail"], ["shape"], axis=0),
                node("Reshape", ["x2", "shape"], ["flat"]),
                node("Unsqueeze", ["rf", "zeros1"], ["rf2"]),
                node("Add", ["flat", "rf2"], ["y"]),
                node("Size", ["x"], ["size"]),
                node("Cast", ["size"], ["sizef"], to=FLOAT),
                node("Div", ["y", "sizef"], ["z"]),
                node("Shape", ["x"], ["last"], start=-1),
                node("Expand", ["x", "s"], ["e"]),
                node("Equal", ["s", "s"], ["same"]),
                node("Where", ["same", "s", "s"], ["s2"]),
                node("Reshape", ["e", "s2"], ["e2"]),
            ],
            [("x", FLOAT, ["batch", 5])],
            [("z", FLOAT, None), ("last", INT64, None), ("e2", FLOAT, None)],
            {
                "zero": np.array(0, np.int64),
                "one": np.array(1, np.int64),
                "two": np.array([2], np.int64),
                "one1": np.array([1], np.int64),
                "minus1": np.array([-1], np.int64),
                "zeros1": np.array([0], np.int64),
            },
            shapes={"x": [3, 5]},
        )
        m = OnnxModule(path, {"x": [3, 5]})
        ran = {s.node.op for s in m._plan}
        self.assertFalse(ran & {"Shape", "Gather", "Range", "ConstantOfShape", "Concat", "Size", "Cast"}, ran)

    def test_normalizations(self):
        c = 6
        self.graph(
            "norms",
            [
                node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["bn"], epsilon=1e-3),
                node("InstanceNormalization", ["x", "s", "b"], ["inorm"]),
                node("LayerNormalization", ["x", "ls", "lb"], ["ln"], axis=1),
                node("LayerNormalization", ["x", "s2"], ["ln2"]),
            ],
            [("x", FLOAT, [2, c, 4, 5])],
            [("bn", FLOAT, None), ("inorm", FLOAT, None), ("ln", FLOAT, None), ("ln2", FLOAT, None)],
            {
                "s": rnd(c),
                "b": rnd(c, seed=1),
                "mean": rnd(c, seed=2),
                "var": np.abs(rnd(c, seed=3)) + 0.5,
                "ls": rnd(c, 4, 5, seed=4),
                "lb": rnd(c, 4, 5, seed=5),
                "s2": rnd(5, seed=6),
            },
        )
        self.graph(
            "group_norm21",
            [node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-4)],
            [("x", FLOAT, [2, c, 7])],
            [("y", FLOAT, None)],
            {"s": rnd(c), "b": rnd(c, seed=1)},
            opset=21,
        )
        self.graph(
            "group_norm18",
            [node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)],
            [("x", FLOAT, [2, c, 7])],
            [("y", FLOAT, None)],
            {"s": rnd(3), "b": rnd(3, seed=1)},
            opset=18,
        )
        self.graph(
            "lrn",
            [node("LRN", ["x"], ["y"], size=3, alpha=0.01, beta=0.6, bias=1.5)],
            [("x", FLOAT, [1, c, 3, 3])],
            [("y", FLOAT, None)],
        )

    def test_softmax_forms(self):
        self.graph(
            "softmax13",
            [node("Softmax", ["x"], ["a"], axis=1), node("LogSoftmax", ["x"], ["b"])],
            [("x", FLOAT, [2, 3, 4])],
            [("a", FLOAT, None), ("b", FLOAT, None)],
            opset=13,
        )
        # before opset 13 the axis means "this axis and all after it, as one"
        self.graph(
            "softmax11",
            [node("Softmax", ["x"], ["a"], axis=1), node("LogSoftmax", ["x"], ["b"])],
            [("x", FLOAT, [2, 3, 4])],
            [("a", FLOAT, None), ("b", FLOAT, None)],
            opset=11,
        )

    def test_shape_ops(self):
        self.graph(
            "shape_ops",
            [
                node("Reshape", ["x", "s"], ["r"]),
                node("Transpose", ["r"], ["t"], perm=[2, 0, 1]),
                node("Transpose", ["x"], ["tr"]),
                node("Flatten", ["x"], ["f"], axis=2),
                node("Flatten", ["x"], ["f0"], axis=0),
                node("Unsqueeze", ["t", "ax"], ["u"]),
                node("Squeeze", ["u", "ax"], ["q"]),
                node("Identity", ["q"], ["id"]),
                node("Dropout", ["id"], ["dr"]),
                node("CastLike", ["dr", "d"], ["cl"]),
                node("Concat", ["f", "f"], ["cat"], axis=-1),
            ],
            [("x", FLOAT, [2, 3, 4, 5]), ("d", INT64, [1])],
            [(n, INT64 if n == "cl" else FLOAT, None) for n in ("tr", "f0", "cl", "cat")],
            {"s": np.array([0, -1, 5], np.int64), "ax": np.array([-1, 1], np.int64)},
        )
        self.graph(
            "squeeze11",
            [
                node("Unsqueeze", ["x"], ["u"], axes=[0, 3]),
                node("Squeeze", ["u"], ["q"], axes=[0]),
                node("Squeeze", ["x"], ["all"]),
            ],
            [("x", FLOAT, [1, 3, 1, 2])],
            [("q", FLOAT, None), ("all", FLOAT, None)],
            opset=11,
        )

    def test_gather(self):
        self.graph(
            "gather",
            [
                node("Gather", ["x", "idx"], ["a"], axis=1),
                node("Gather", ["x", "neg"], ["b"], axis=-1),
                node("Gather", ["emb", "ids"], ["e"]),
                node("Gather", ["x", "ids"], ["c"], axis=2),
                node("GatherElements", ["x", "ge"], ["g"], axis=1),
            ],
            [("x", FLOAT, [2, 4, 5]), ("ids", INT64, [2, 3])],
            [(n, FLOAT, None) for n in "abecg"],
            {
                "idx": np.array([[3, -1], [0, 2]], np.int64),
                "neg": np.array(-2, np.int64),
                "emb": rnd(7, 6),
                "ge": np.array([[[1, -1, 0, 2, 3]], [[0, 0, 1, 1, 2]]], np.int64),
            },
        )

    def test_large_index_tables_are_buffers(self):
        idx = np.random.default_rng(0).integers(-40, 40, 100).astype(np.int64)
        path = self.graph(
            "tables",
            [
                node("Gather", ["x", "idx"], ["g"], axis=1),
                node("Resize", ["x3", "", "", "sizes"], ["r"], mode="nearest"),
                node("Add", ["i", "big"], ["a"]),
            ],
            [("x", FLOAT, [2, 40]), ("x3", FLOAT, [1, 1, 70, 3]), ("i", INT64, [2, 40])],
            [("g", FLOAT, None), ("r", FLOAT, None), ("a", INT64, None)],
            {
                "idx": idx,
                "sizes": np.array([1, 1, 100, 3], np.int64),
                "big": np.arange(80, dtype=np.int64).reshape(2, 40),
            },
        )
        m = OnnxModule(path)
        self.assertEqual(len(list(m.named_buffers())), 3)  # the Gather and Resize tables, the int initializer

    def test_depth_space(self):
        self.graph(
            "depth_space",
            [
                node("DepthToSpace", ["x"], ["a"], blocksize=2),
                node("DepthToSpace", ["x"], ["b"], blocksize=2, mode="CRD"),
                node("SpaceToDepth", ["a"], ["c"], blocksize=2),
            ],
            [("x", FLOAT, [1, 8, 3, 4])],
            [(n, FLOAT, None) for n in "abc"],
        )

    def test_resize(self):
        cases = [
            ("nearest_down_half_pixel", {"mode": "nearest"}, None, [1, 2, 4, 3]),
            # 6 -> 3 puts every source coordinate on a tie: round_prefer_floor is not torch's nearest-exact
            ("nearest_ties", {"mode": "nearest"}, None, [1, 2, 3, 7]),
            (
                "nearest_ceil_align",
                {"mode": "nearest", "coordinate_transformation_mode": "align_corners", "nearest_mode": "ceil"},
                None,
                [1, 2, 9, 11],
            ),
            ("nearest_exact", {"mode": "nearest", "nearest_mode": "round_prefer_ceil"}, [1, 1, 0.5, 1.5], None),
            ("linear_half_pixel", {"mode": "linear"}, [1, 1, 1.5, 0.75], None),
            (
                "linear_align",
                {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
                None,
                [1, 2, 11, 5],
            ),
            (
                "linear_pytorch",
                {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
                None,
                [1, 2, 3, 13],
            ),
            (
                "nearest_batch_axis",
                {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
                [2, 1, 1, 2],
                None,
            ),
        ]
        for name, attrs, scales, sizes in cases:
            inits = {"roi": np.array([], np.float32)}
            ins = ["x", "roi"]
            if scales is not None:
                inits["scales"] = np.array(scales, np.float32)
                ins.append("scales")
            else:
                inits["sizes"] = np.array(sizes, np.int64)
                ins += ["", "sizes"]
            self.graph(
                name,
                [node("Resize", ins, ["y"], **attrs)],
                [("x", FLOAT, [1, 2, 6, 7])],
                [("y", FLOAT, None)],
                inits,
                opset=13,
            )
        self.graph(
            "resize_axes_not_larger",
            [
                node(
                    "Resize",
                    ["x", "", "", "sizes"],
                    ["y"],
                    axes=[2, 3],
                    keep_aspect_ratio_policy="not_larger",
                    mode="linear",
                )
            ],
            [("x", FLOAT, [1, 2, 6, 8])],
            [("y", FLOAT, None)],
            {"sizes": np.array([9, 20], np.int64)},
            opset=18,
        )
        self.graph(
            "upsample9",
            [node("Upsample", ["x", "scales"], ["y"], mode="nearest")],
            [("x", FLOAT, [1, 2, 3, 4])],
            [("y", FLOAT, None)],
            {"scales": np.array([1, 1, 2, 3], np.float32)},
            opset=9,
        )

    def test_trilu_and_constants(self):
        self.graph(
            "trilu",
            [
                node("Trilu", ["x", "k"], ["u"]),
                node("Trilu", ["x"], ["l"], upper=0),
                node("Constant", [], ["c"], value=numpy_helper.from_array(rnd(4, 5, seed=9))),
                node("Constant", [], ["cf"], value_float=0.25),
                node("Add", ["u", "c"], ["uc"]),
                node("Mul", ["uc", "cf"], ["y"]),
            ],
            [("x", FLOAT, [2, 4, 5])],
            [("y", FLOAT, None), ("l", FLOAT, None)],
            {"k": np.array(1, np.int64)},
        )

    def test_bool_and_int_inputs(self):
        self.graph(
            "mask",
            [
                node("Where", ["m", "x", "fill"], ["y"]),
                node("Cast", ["i"], ["f"], to=FLOAT),
                node("Add", ["y", "f"], ["z"]),
            ],
            [("x", FLOAT, [3, 4]), ("m", BOOL, [3, 4]), ("i", INT64, [4])],
            [("z", FLOAT, None)],
            {"fill": np.float32(-1.0)},
        )


class WrapperEndToEnd(Base):
    """The wrapper module `mblast optimize-model` writes, through the importer itself."""

    def test_import_wrapper(self):
        try:
            from kernelbench import importer
        except Exception as e:
            self.skipTest(f"the importer does not load here: {e}")
        torch.manual_seed(0)
        path = self.export(
            ViewFlatten(), (torch.randn(2, 3, 8, 8),), "view", 13, input_names=["x"], dynamic_axes={"x": {0: "b"}}
        )
        py = self.path("view_model.py")
        with open(py, "w") as f:
            f.write(
                textwrap.dedent(
                    f"""\
                    import sys; sys.path.insert(0, {os.path.join(ROOT, "tools")!r})
                    import torch
                    from kernelbench.onnx_model import OnnxModule, example_inputs
                    _PATH = {path!r}; _SHAPES = {{"x": [2, 3, 8, 8]}}
                    class Model(torch.nn.Module):
                        def __init__(self):
                            super().__init__(); self.m = OnnxModule(_PATH, _SHAPES)
                        def forward(self, *xs): return self.m(*xs)
                    def get_inputs(): return example_inputs(_PATH, _SHAPES)
                    def get_init_inputs(): return []
                    """
                )
            )
        out = self.path("problems")
        os.makedirs(out)
        pdir = importer.import_file(py, out, 2, 1, "cpu")
        import json

        with open(os.path.join(pdir, "problem.json")) as f:
            problem = json.load(f)
        text = json.dumps(problem)
        self.assertIn("conv_weight", text)  # the weights are the problem's parameters
        self.assertIn("fc_weight", text)


class Errors(Base):
    def assert_one_line(self, fn, *want):
        with self.assertRaises(OnnxImportError) as cm:
            fn()
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        for w in want:
            self.assertIn(w, msg)
        return msg

    def test_not_onnx(self):
        p = self.path("notes.onnx")
        with open(p, "w") as f:
            f.write("this is not a model\nat all\n")
        self.assert_one_line(lambda: OnnxModule(p), p)
        self.assert_one_line(lambda: example_inputs(p), p)
        self.assert_one_line(lambda: OnnxModule(self.path("absent.onnx")), "no such file")

    def test_damaged(self):
        m = graph_model([node("Relu", ["x"], ["y"])], [("x", FLOAT, [2])], [("y", FLOAT, None)], {"w": rnd(300)})
        data = m.SerializeToString()
        p = self.path("cut.onnx")
        with open(p, "wb") as f:
            f.write(data[: len(data) // 2])
        self.assert_one_line(lambda: OnnxModule(p), p)

    def test_missing_external_data(self):
        m = graph_model(
            [node("MatMul", ["x", "w"], ["y"])], [("x", FLOAT, [2, 64])], [("y", FLOAT, None)], {"w": rnd(64, 64)}
        )
        p = self.path("ext.onnx")
        onnx.save(m, p, save_as_external_data=True, location="ext.bin", size_threshold=0)
        self.assertTrue(check_against_onnxruntime(p)["ok"])
        os.remove(self.path("ext.bin"))
        self.assert_one_line(lambda: OnnxModule(p), "external data file", "ext.bin is missing")

    def test_unsupported_ops_listed_at_once(self):
        nodes = [
            helper.make_node("NonMaxSuppression", ["b", "s"], ["sel"], name="nms"),
            helper.make_node("Relu", ["b"], ["r"], name="relu"),
            helper.make_node("Det", ["sq"], ["det"], name="det"),
        ]
        m = graph_model(
            nodes,
            [("b", FLOAT, [1, 4, 4]), ("s", FLOAT, [1, 1, 4]), ("sq", FLOAT, [3, 3])],
            [("sel", INT64, None), ("r", FLOAT, None), ("det", FLOAT, None)],
        )
        p = save(m, self.path("nms.onnx"))
        msg = self.assert_one_line(lambda: OnnxModule(p), "node nms (NonMaxSuppression)", "node det (Det)")
        self.assertTrue(msg.endswith("operators not supported by mblast's ONNX reader"), msg)
        self.assertNotIn("Relu", msg)
        m = graph_model(nodes[:1], [("b", FLOAT, [1, 4, 4]), ("s", FLOAT, [1, 1, 4])], [("sel", INT64, None)])
        p = save(m, self.path("nms1.onnx"))
        msg = self.assert_one_line(lambda: OnnxModule(p))
        self.assertEqual(msg, "node nms (NonMaxSuppression): operator not supported by mblast's ONNX reader")

    def test_symbolic_batch(self):
        m = graph_model(
            [node("MatMul", ["x", "w"], ["y"])], [("x", FLOAT, ["batch", 3, 4])], [("y", FLOAT, None)], {"w": rnd(4, 2)}
        )
        p = save(m, self.path("sym.onnx"))
        msg = self.assert_one_line(lambda: OnnxModule(p))
        self.assertEqual(msg, "input 'x' has a symbolic dimension 'batch': give --input-shape x=1x3x4")
        self.assert_one_line(lambda: example_inputs(p), "--input-shape x=1x3x4")
        xs = example_inputs(p, {"x": [5, 3, 4]})
        self.assertEqual(list(xs[0].shape), [5, 3, 4])
        self.check(p, {"x": [5, 3, 4]})
        self.assert_one_line(lambda: OnnxModule(p, {"y": [1, 3, 4]}), "'y'", "not an input")
        self.assert_one_line(lambda: OnnxModule(p, {"x": [1, 3]}), "gives 2 dimensions")
        self.assert_one_line(lambda: OnnxModule(p, {"x": [1, 3, 5]}), "dimension 2 is 4")

    def test_shape_argument_from_values(self):
        m = graph_model(
            [node("Reshape", ["x", "s"], ["y"])], [("x", FLOAT, [2, 6]), ("s", INT64, [2])], [("y", FLOAT, None)]
        )
        p = save(m, self.path("dyn.onnx"))
        self.assert_one_line(lambda: OnnxModule(p), "node reshape_y (Reshape)", "'s'", "run time")

    def test_unsupported_attribute(self):
        m = graph_model(
            [node("Resize", ["x", "", "sc"], ["y"], mode="cubic")],
            [("x", FLOAT, [1, 1, 4, 4])],
            [("y", FLOAT, None)],
            {"sc": np.array([1, 1, 2, 2], np.float32)},
        )
        p = save(m, self.path("cubic.onnx"))
        self.assert_one_line(lambda: OnnxModule(p), "node resize_y (Resize)", "cubic", "nearest and linear")

    def test_wrong_input_shape_at_run_time(self):
        m = graph_model([node("Relu", ["x"], ["y"])], [("x", FLOAT, [2, 3])], [("y", FLOAT, None)])
        p = save(m, self.path("relu.onnx"))
        with self.assertRaises(ValueError):
            OnnxModule(p)(torch.zeros(3, 3))

    def test_check_reports_a_difference(self):
        # A model whose result the reader cannot match is refused: here onnxruntime's own result
        # is compared with a module whose weight was changed after loading.
        m = graph_model(
            [node("MatMul", ["x", "w"], ["y"])], [("x", FLOAT, [2, 4])], [("y", FLOAT, None)], {"w": rnd(4, 3)}
        )
        p = save(m, self.path("mm.onnx"))
        ok = check_against_onnxruntime(p)
        self.assertTrue(ok["ok"])
        self.assertLess(ok["max_abs_error"], 1e-5)
        self.assertEqual(ok["outputs"], 1)
        import kernelbench.onnx_model as om

        real = om._OPS["MatMul"]
        om._OPS["MatMul"] = lambda c: real(c) * 1.001
        try:
            bad = check_against_onnxruntime(p)
        finally:
            om._OPS["MatMul"] = real
        self.assertFalse(bad["ok"])
        self.assertGreater(bad["max_abs_error"], 0)
        self.assertIn("differ", bad["detail"])


if __name__ == "__main__":
    unittest.main()
