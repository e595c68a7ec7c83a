"""`mblast import sol-execbench` (docs/sol-execbench.md): problems written here in SOL-ExecBench's
format (a folder with definition.json + workload.jsonl, reference.py a copy beside them) become
one mblast problem per workload; a speed-of-light time given by --sol-anchors is the problem's
bound, and `mblast bench` runs them on pocl-cpu and reports the fraction of that bound.
Malformed problems get one line naming the file and the field.

The fixtures follow the format as SOL-ExecBench's repository defines it (docs/definition.md,
docs/workload.md, src/sol_execbench/data/*.py); the problems are this test's own.

FormatTest needs only Python; ImportTest needs torch and safetensors (the helper,
tools/mblast_kernelbench.py import-sol); CommandAndBenchTest needs the binary ($MBLAST_BIN, else
build/bin/mblast) and the pocl-cpu target.

Run from the repository root:  .venv/bin/python3 -m unittest -v tests/python/test_sol_execbench.py
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "mblast_kernelbench.py")
MBLAST = os.environ.get("MBLAST_BIN") or os.path.join(ROOT, "build", "bin", "mblast")
sys.path.insert(0, os.path.join(ROOT, "tools"))

from kernelbench import solexec  # noqa: E402  (needs no torch)
from kernelbench.common import Failure  # noqa: E402

try:
    import torch  # noqa: F401
    import safetensors  # noqa: F401

    NO_TORCH = None
except Exception as e:  # noqa: BLE001
    NO_TORCH = f"torch and safetensors are needed for {sys.executable}: {e}"


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def problem(root, folder, definition, workloads, reference_py=True):
    """A problem folder as SOL-ExecBench ships one: definition.json, workload.jsonl (one JSON
    object a line) and reference.py (the definition's reference; a different text may be given)."""
    d = os.path.join(root, folder)
    write(os.path.join(d, "definition.json"), json.dumps(definition, indent=2))
    write(os.path.join(d, "workload.jsonl"), "".join(json.dumps(w) + "\n" for w in workloads))
    if reference_py is True:
        write(os.path.join(d, "reference.py"), definition.get("reference", ""))
    elif reference_py:
        write(os.path.join(d, "reference.py"), reference_py)
    return d


def tensor(shape, dtype="float32"):
    return {"shape": shape, "dtype": dtype, "description": None}


def trace_line(definition, workload):
    """A workload as FlashInfer-Trace stores one: a Trace with only definition and workload."""
    return {"definition": definition, "workload": workload, "solution": None, "evaluation": None}


# --- The suite: imported, then benched on pocl-cpu --------------------------------------------
# An elementwise add (two workloads), a GEMM with a var axis M and const N, K (its workloads as
# FlashInfer Traces; its reference.py a stale text the importer must not read), and a row sum
# whose inputs come from the reference's own custom-inputs function over an expr axis.
ADD = {
    "name": "add_f32",
    "op_type": "elementwise",
    "description": "z = x + y, elementwise.",
    "axes": {"n": {"type": "var", "description": None}},
    "custom_inputs_entrypoint": None,
    "inputs": {"x": tensor(["n"]), "y": tensor(["n"])},
    "outputs": {"z": tensor(["n"])},
    "reference": "import torch\n\n\n@torch.no_grad()\ndef run(x, y):\n    return x + y\n",
    "tags": [],
    "constraints": [],
}
ADD_WL = [
    {"uuid": "add-1", "axes": {"n": 1000}, "inputs": {"x": {"type": "random"}, "y": {"type": "random"}}},
    {"uuid": "add-2", "axes": {"n": 5000}, "inputs": {"x": {"type": "random"}, "y": {"type": "random"}}},
]
GEMM = {
    "name": "gemm_n32_k64",
    "op_type": "gemm",
    "description": "C = A @ B.T",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 32}, "K": {"type": "const", "value": 64}},
    "inputs": {"A": tensor(["M", "K"]), "B": tensor(["N", "K"])},
    "outputs": {"C": tensor(["M", "N"])},
    "reference": "import torch\n\ndef run(A, B):\n    C = torch.matmul(A, B.T)\n    return C\n",
}
GEMM_STALE_PY = "import torch\n\ndef run(A, B):\n    return A.sum()\n"
GEMM_WL = [
    trace_line(
        "gemm_n32_k64",
        {
            "uuid": "mm-16",
            "axes": {"M": 16},
            "inputs": {"A": {"type": "random"}, "B": {"type": "random"}},
            "tolerance": {"max_atol": 0.01, "max_rtol": 0.01, "required_matched_ratio": 1.0},
        },
    ),
    trace_line(
        "gemm_n32_k64",
        {"uuid": "mm-48", "axes": {"M": 48}, "inputs": {"A": {"type": "random"}, "B": {"type": "random"}}},
    ),
]
ROWSUM = {
    "name": "rowsum_c128",
    "description": "Sum over the last axis of a [rows, cols] tensor whose rows come in pairs.",
    "axes": {
        "pairs": {"type": "var"},
        "rows": {"type": "expr", "expression": "pairs * 2"},
        "cols": {"type": "const", "value": 128},
    },
    "inputs": {"x": tensor(["rows", "cols"])},
    "outputs": {"s": tensor(["rows"])},
    "custom_inputs_entrypoint": "get_inputs",
    "reference": (
        "import torch\n\n\n"
        "def get_inputs(axes_and_scalars, device):\n"
        "    rows, cols = axes_and_scalars['rows'], axes_and_scalars['cols']\n"
        "    return {'x': torch.rand(rows, cols, device=device) - 0.25}\n\n\n"
        "@torch.no_grad()\n"
        "def run(x):\n"
        "    return x.sum(dim=-1)\n"
    ),
}
ROWSUM_WL = [
    {"uuid": "rs-4", "axes": {"pairs": 4}, "inputs": {"x": {"type": "custom"}}},
    {"uuid": "rs-19", "axes": {"pairs": 19}, "inputs": {"x": {"type": "custom"}}},
]
# What a user writes from the leaderboard: one entry per workload uuid (a bare number is taken too).
ANCHORS = {
    "add-1": {"sol_latency_ms": 0.002, "human_best_latency_ms": 0.01},
    "add-2": 0.004,
    "mm-16": {"sol_latency_ms": 0.001},
    "mm-48": {"sol_latency_ms": 0.003},
}

# --- Import only: low-precision dtypes, a scalar input, a safetensors input ---------------------
RMSNORM = {
    "name": "rmsnorm_h64",
    "op_type": "rmsnorm",
    "description": "RMSNorm over hidden_size=64 in bf16, eps given by the workload.",
    "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 64}},
    "inputs": {
        "input": tensor(["batch_size", "hidden_size"], "bfloat16"),
        "weight": tensor(["hidden_size"], "bfloat16"),
        "eps": tensor(None, "float32"),
    },
    "outputs": {"output": tensor(["batch_size", "hidden_size"], "bfloat16")},
    "reference": (
        "import torch\n\n\n"
        "@torch.no_grad()\n"
        "def run(input, weight, eps):\n"
        "    x = input.to(torch.float32)\n"
        "    inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)\n"
        "    return (x * inv * weight.to(torch.float32)).to(weight.dtype)\n"
    ),
}
RMSNORM_WL = [
    {
        "uuid": f"rms-{b}",
        "axes": {"batch_size": b},
        "inputs": {"input": {"type": "random"}, "weight": {"type": "random"}, "eps": {"type": "scalar", "value": 1e-6}},
    }
    for b in (3, 17)
]
SCALE = {
    "name": "scale_rows_c8",
    "description": "y = x * scale[:, None] * alpha + the column sums of bias / 1024, in fp16.",
    "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 8}},
    "inputs": {
        "x": tensor(["rows", "cols"], "float16"),
        "scale": tensor(["rows"], "float16"),
        "bias": tensor(["2", "cols"], "int32"),  # a digit string is a literal size
        "alpha": tensor(None, "float32"),  # a random scalar
    },
    "outputs": {"y": tensor(["rows", "cols"], "float16")},
    "reference": (
        "import torch\n\n\n"
        "def run(x, scale, bias, alpha):\n"
        "    b = bias.sum(dim=0).to(torch.float32) / 1024.0\n"
        "    y = x.to(torch.float32) * scale.to(torch.float32)[:, None] * alpha + b\n"
        "    return {'y': y.to(torch.float16)}\n"
    ),
}
SCALE_WL = [
    {
        "uuid": "sc-5",
        "axes": {"rows": 5},
        "inputs": {
            "x": {"type": "random"},
            "scale": {"type": "safetensors", "path": "blobs/scale_r5.safetensors", "tensor_key": "scale"},
            "bias": {"type": "random"},
            "alpha": {"type": "random"},
        },
    },
    {  # relative to $FLASHINFER_TRACE_DIR, as FlashInfer-Trace blobs are
        "uuid": "sc-3",
        "axes": {"rows": 3},
        "inputs": {
            "x": {"type": "random"},
            "scale": {"type": "safetensors", "path": "blob/workloads/scale_r3.safetensors", "tensor_key": "s3"},
            "bias": {"type": "random"},
            "alpha": {"type": "random"},
        },
    },
]


def scale_tensor(rows):
    import torch

    return torch.linspace(-1.5, 2.0, rows).to(torch.float16)


def make_suite(root):
    problem(root, "L1/001_add", ADD, ADD_WL)
    problem(root, "L1/002_gemm", GEMM, GEMM_WL, reference_py=GEMM_STALE_PY)
    problem(root, "L2/001_rowsum", ROWSUM, ROWSUM_WL)
    write(os.path.join(root, "anchors.json"), json.dumps(ANCHORS))


def make_more(root, fi_root):
    from safetensors.torch import save_file

    problem(root, "L1/003_rmsnorm", RMSNORM, RMSNORM_WL)
    d = problem(root, "L1/004_scale", SCALE, SCALE_WL)
    os.makedirs(os.path.join(d, "blobs"))
    save_file({"scale": scale_tensor(5)}, os.path.join(d, "blobs", "scale_r5.safetensors"))
    os.makedirs(os.path.join(fi_root, "blob", "workloads"))
    save_file({"s3": scale_tensor(3)}, os.path.join(fi_root, "blob", "workloads", "scale_r3.safetensors"))


def helper(*args, env=None):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, env=e, timeout=900)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class FormatTest(unittest.TestCase):
    """Each malformed input is one line naming the file and the field (no torch needed)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mblast_sol_fmt_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def load(self, definition, workloads, anchors=None, reference_py=True):
        d = problem(self.tmp, "p", definition, workloads, reference_py)
        dd, _ = solexec.load_definition(d)
        return solexec.load_workloads(d, dd, anchors or {}, "anchors.json")

    def refused(self, definition, workloads, file, needle, anchors=None):
        with self.assertRaises(Failure) as c:
            self.load(definition, workloads, anchors)
        msg = str(c.exception)
        self.assertNotIn("\n", msg)
        self.assertIn(os.path.join("p", file) if file != "anchors.json" else file, msg)
        self.assertIn(needle, msg)

    def test_reads_the_real_layout(self):
        ws = self.load(GEMM, GEMM_WL, ANCHORS, reference_py=GEMM_STALE_PY)
        self.assertEqual([w["uuid"] for w in ws], ["mm-16", "mm-48"])
        self.assertEqual(ws[1]["axes"], {"M": 48, "N": 32, "K": 64})
        self.assertEqual(ws[0]["inputs"]["A"], ("random", [16, 64], {"type": "random"}))
        self.assertEqual(ws[0]["tolerance"]["required_matched_ratio"], 1.0)
        self.assertEqual([w["sol_ms"] for w in ws], [0.001, 0.003])

    def test_reference_is_the_definitions(self):
        d = problem(self.tmp, "p", GEMM, GEMM_WL, reference_py=GEMM_STALE_PY)
        _, ref = solexec.load_definition(d)
        self.assertEqual(ref, GEMM["reference"])

    def test_expr_axes_and_literal_sizes(self):
        ws = self.load(ROWSUM, ROWSUM_WL)
        self.assertEqual(ws[1]["axes"], {"pairs": 19, "rows": 38, "cols": 128})
        self.assertEqual(ws[1]["inputs"]["x"][:2], ("custom", [38, 128]))
        sc = dict(SCALE_WL[0], inputs=dict(SCALE_WL[0]["inputs"], scale={"type": "random"}))
        ws = self.load(SCALE, [sc])
        self.assertEqual(ws[0]["inputs"]["bias"][1], [2, 8])
        self.assertEqual(ws[0]["inputs"]["alpha"][1], None)

    def test_a_line_carries_no_bound(self):
        """SOL times are not in the data set; a `sol_latency_ms` on a line is not read as one."""
        ws = self.load(ADD, [dict(ADD_WL[0], sol_latency_ms=0.5)])
        self.assertIsNone(ws[0]["sol_ms"])

    def test_unknown_input_type(self):
        wl = [dict(ADD_WL[0], inputs={"x": {"type": "zeros"}, "y": {"type": "random"}})]
        self.refused(ADD, wl, "workload.jsonl:1", "inputs.x: type 'zeros' is not one of random, scalar")

    def test_missing_input_descriptor(self):
        wl = [dict(ADD_WL[0], inputs={"x": {"type": "random"}})]
        self.refused(ADD, wl, "workload.jsonl:1", "inputs.y: missing")

    def test_missing_inputs(self):
        wl = [{"uuid": "a", "axes": {"n": 3}}]
        self.refused(ADD, wl, "workload.jsonl:1", "'inputs' is missing or not an object")

    def test_axis_value_of_wrong_type(self):
        wl = [dict(ADD_WL[0], axes={"n": "4"})]
        self.refused(ADD, wl, "workload.jsonl:1", "axes.n is '4', not a non-negative integer")

    def test_var_axis_without_value(self):
        self.refused(ADD, [dict(ADD_WL[0], axes={})], "workload.jsonl:1", "axes.n: the var axis has no value")

    def test_scalar_without_value(self):
        wl = [dict(RMSNORM_WL[0], inputs=dict(RMSNORM_WL[0]["inputs"], eps={"type": "scalar"}))]
        self.refused(RMSNORM, wl, "workload.jsonl:1", "inputs.eps: a scalar input needs")

    def test_missing_reference(self):
        bad = {k: v for k, v in ADD.items() if k != "reference"}
        self.refused(bad, ADD_WL, "definition.json", "'reference' is missing")

    def test_run_takes_other_parameters(self):
        bad = dict(ADD, reference="def run(y, x):\n    return x + y\n")
        self.refused(bad, ADD_WL, "definition.json", "reference: run(y, x) does not take the inputs")

    def test_int16_and_fp8_are_refused(self):
        bad = dict(ADD, inputs={"x": tensor(["n"], "int16"), "y": tensor(["n"])})
        self.refused(bad, ADD_WL, "definition.json", "inputs.x: dtype 'int16' is not supported")
        bad = dict(ADD, outputs={"z": tensor(["n"], "float8_e4m3fn")})
        self.refused(bad, ADD_WL, "definition.json", "outputs.z: dtype 'float8_e4m3fn' is not supported")
        bad = dict(ADD, outputs={"z": tensor(["n"], "half")})
        self.refused(bad, ADD_WL, "definition.json", "outputs.z: dtype 'half' is not a SOL-ExecBench dtype")

    def test_sampling_is_refused(self):
        self.refused(dict(ADD, op_type="sampling"), ADD_WL, "definition.json", "op_type 'sampling'")

    def test_custom_without_entrypoint(self):
        wl = [dict(ADD_WL[0], inputs={"x": {"type": "custom"}, "y": {"type": "custom"}})]
        self.refused(ADD, wl, "workload.jsonl:1", "inputs.x: type custom, but the definition has no")

    def test_custom_mixed_with_random(self):
        two = dict(ROWSUM, inputs={"x": tensor(["rows", "cols"]), "w": tensor(["cols"])})
        two["reference"] = ROWSUM["reference"].replace("def run(x):", "def run(x, w):")
        wl = [{"uuid": "m", "axes": {"pairs": 2}, "inputs": {"x": {"type": "custom"}, "w": {"type": "random"}}}]
        self.refused(two, wl, "workload.jsonl:1", "custom inputs cannot be mixed")

    def test_trace_of_another_definition(self):
        wl = [trace_line("gemm_other", GEMM_WL[0]["workload"])]
        self.refused(GEMM, wl, "workload.jsonl:1", "definition is 'gemm_other', not this folder's")

    def test_duplicate_uuid(self):
        self.refused(ADD, [ADD_WL[0], ADD_WL[0]], "workload.jsonl:2", "uuid 'add-1' is also the uuid on line 1")

    def test_expr_that_is_not_a_size(self):
        bad = dict(ROWSUM, axes=dict(ROWSUM["axes"], rows={"type": "expr", "expression": "pairs / 3"}))
        self.refused(bad, ROWSUM_WL, "workload.jsonl:1", "axis rows: the expression 'pairs / 3' is 1.333")

    def test_axis_values_that_disagree_with_the_definition(self):
        wl = [dict(ROWSUM_WL[0], axes={"pairs": 3, "rows": 6})]  # an expr axis's own value is accepted
        self.assertEqual(self.load(ROWSUM, wl)[0]["axes"]["rows"], 6)
        wl = [dict(ROWSUM_WL[0], axes={"pairs": 3, "rows": 7})]
        self.refused(ROWSUM, wl, "workload.jsonl:1", "axes.rows is 7, but its expression 'pairs * 2' gives 6")
        wl = [dict(ROWSUM_WL[0], axes={"pairs": 3, "cols": 64})]
        self.refused(ROWSUM, wl, "workload.jsonl:1", "axes.cols is 64, but the definition fixes it at 128")

    def test_bad_anchor(self):
        with self.assertRaises(Failure) as c:
            self.load(ADD, ADD_WL, {"add-2": {"sol_latency_ms": -1}})
        self.assertEqual(
            str(c.exception), "anchors.json: add-2: sol_latency_ms -1 is not a positive number of milliseconds"
        )

    @unittest.skipIf(NO_TORCH is not None, NO_TORCH or "")
    def test_safetensors_checked_against_the_definition(self):
        from safetensors.torch import save_file
        import torch

        d = os.path.join(self.tmp, "p")
        os.makedirs(os.path.join(d, "blobs"))
        save_file(
            {"scale": scale_tensor(4), "wide": torch.zeros(5, dtype=torch.float32)},
            os.path.join(d, "blobs", "scale_r5.safetensors"),
        )
        self.refused(SCALE, SCALE_WL[:1], "workload.jsonl:1", "'scale' in ")  # shape [4], wants [5]
        with self.assertRaises(Failure) as c:
            self.load(SCALE, SCALE_WL[:1])
        self.assertIn("has shape [4], the definition wants [5]", str(c.exception))
        wl = [
            dict(
                SCALE_WL[0],
                inputs=dict(SCALE_WL[0]["inputs"], scale=dict(SCALE_WL[0]["inputs"]["scale"], tensor_key="wide")),
            )
        ]
        self.refused(SCALE, wl, "workload.jsonl:1", "'wide' in ")
        with self.assertRaises(Failure) as c:
            self.load(SCALE, wl)
        self.assertIn("is float32, the definition wants float16", str(c.exception))
        wl = [
            dict(
                SCALE_WL[0],
                inputs=dict(SCALE_WL[0]["inputs"], scale=dict(SCALE_WL[0]["inputs"]["scale"], tensor_key="nope")),
            )
        ]
        self.refused(SCALE, wl, "workload.jsonl:1", "inputs.scale.tensor_key: ")
        os.environ.pop("FLASHINFER_TRACE_DIR", None)
        self.refused(SCALE, SCALE_WL[1:], "workload.jsonl:1", "inputs.scale.path: no such file")


@unittest.skipIf(NO_TORCH is not None, NO_TORCH or "")
class ImportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mblast_sol_test_")
        cls.src = os.path.join(cls.tmp, "sol")
        make_suite(cls.src)
        make_more(cls.src, os.path.join(cls.tmp, "flashinfer-trace"))
        cls.out = os.path.join(cls.tmp, "out")
        cls.r = helper(
            "import-sol",
            cls.src,
            "--out",
            cls.out,
            "--seeds",
            "2",
            "--sol-anchors",
            os.path.join(cls.src, "anchors.json"),
            "--json-out",
            os.path.join(cls.tmp, "summary.json"),
            env={"FLASHINFER_TRACE_DIR": os.path.join(cls.tmp, "flashinfer-trace")},
        )

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def pj(self, key):
        return read_json(os.path.join(self.out, key, "problem.json"))

    def data(self, key, name):
        from safetensors.torch import load_file

        return load_file(os.path.join(self.out, key, "data", name))

    def test_one_problem_per_workload_with_its_bound(self):
        self.assertEqual(self.r.returncode, 0, self.r.stdout + self.r.stderr)
        self.assertIn("a speed-of-light time for 4 of 10 workloads", self.r.stdout)
        expect = {
            "add_f32/add_f32_w0": (2.0, [1000]),
            "add_f32/add_f32_w1": (4.0, [5000]),
            "gemm_n32_k64/gemm_n32_k64_w0": (1.0, [16, 64]),
            "gemm_n32_k64/gemm_n32_k64_w1": (3.0, [48, 64]),
            "rowsum_c128/rowsum_c128_w0": (None, [8, 128]),
            "rowsum_c128/rowsum_c128_w1": (None, [38, 128]),
            "rmsnorm_h64/rmsnorm_h64_w1": (None, [17, 64]),
            "scale_rows_c8/scale_rows_c8_w1": (None, [3, 8]),
        }
        for key, (sol_us, shape) in expect.items():
            pj = self.pj(key)
            self.assertEqual(pj["inputs"][0]["shape"], shape, key)
            self.assertEqual(pj["provenance"]["origin"]["kind"], "sol-execbench", key)
            if sol_us is None:
                self.assertNotIn("speed_of_light", pj, key)
            else:
                self.assertAlmostEqual(pj["speed_of_light"]["time_us"], sol_us, places=9, msg=key)
                self.assertIn("--sol-anchors anchors.json", pj["speed_of_light"]["source"])
            # The KernelBench-format file the problem came from stays next to it, for `mblast bench`.
            self.assertTrue(os.path.isfile(os.path.join(self.out, key + ".py")), key)
        origin = self.pj("gemm_n32_k64/gemm_n32_k64_w0")["provenance"]["origin"]
        self.assertEqual((origin["workload"], origin["op_type"]), ("mm-16", "gemm"))
        self.assertEqual(origin["tolerance"]["max_atol"], 0.01)
        summary = read_json(os.path.join(self.tmp, "summary.json"))
        self.assertEqual((summary["imported"], summary["failed"]), (10, 0))

    def test_reference_data_is_the_reference(self):
        """The stored expected output is the definition's run() on the stored inputs (not the
        stale reference.py's): z = x + y, C = A @ B.T, sums."""
        for key, check in [
            ("add_f32/add_f32_w1", lambda i: i["in0"] + i["in1"]),
            ("gemm_n32_k64/gemm_n32_k64_w0", lambda i: i["in0"] @ i["in1"].T),
            ("rowsum_c128/rowsum_c128_w1", lambda i: i["in0"].sum(-1)),
        ]:
            for s in (0, 1):
                got = check(self.data(key, f"inputs.seed{s}.safetensors"))
                want = self.data(key, f"expected.seed{s}.init0.safetensors")["out0"]
                self.assertTrue(torch.allclose(got, want, rtol=1e-5, atol=1e-5), key)

    def test_bf16_with_a_scalar_input(self):
        pj = self.pj("rmsnorm_h64/rmsnorm_h64_w0")
        self.assertEqual(
            [(e["name"], e["dtype"], e["shape"]) for e in pj["inputs"]],
            [("in0", "bf16", [3, 64]), ("in1", "bf16", [64])],
        )
        self.assertEqual(pj["constants"], [{"name": "in2", "position": 2, "value": 1e-6}])
        self.assertEqual([(e["dtype"], e["shape"]) for e in pj["outputs"]], [("bf16", [3, 64])])
        i = self.data("rmsnorm_h64/rmsnorm_h64_w0", "inputs.seed0.safetensors")
        x = i["in0"].float()
        want = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * i["in1"].float()).to(torch.bfloat16)
        got = self.data("rmsnorm_h64/rmsnorm_h64_w0", "expected.seed0.init0.safetensors")["out0"]
        self.assertTrue(torch.equal(got, want))

    def test_safetensors_random_ints_and_a_random_scalar(self):
        for key, rows in (("scale_rows_c8/scale_rows_c8_w0", 5), ("scale_rows_c8/scale_rows_c8_w1", 3)):
            pj = self.pj(key)
            self.assertEqual(
                [(e["dtype"], e["shape"]) for e in pj["inputs"]],
                [("f16", [rows, 8]), ("f16", [rows]), ("i32", [2, 8])],
                key,
            )
            self.assertEqual(len(pj["constants"]), 1, key)  # alpha: drawn once, the same under every seed
            alpha = pj["constants"][0]["value"]
            self.assertIsInstance(alpha, float)
            for s in (0, 1):
                i = self.data(key, f"inputs.seed{s}.safetensors")
                self.assertTrue(torch.equal(i["in1"], scale_tensor(rows)), key)  # the file's tensor, as it is
                self.assertTrue(bool((i["in2"] >= -1024).all() and (i["in2"] < 1024).all()), key)
                y = i["in0"].float() * i["in1"].float()[:, None] * alpha + i["in2"].sum(0).float() / 1024.0
                got = self.data(key, f"expected.seed{s}.init0.safetensors")["out0"]
                self.assertTrue(torch.equal(got, y.to(torch.float16)), key)

    def malformed(self, name, definition, workloads, needle, remove=None):
        src = os.path.join(self.tmp, "bad-" + name)
        d = problem(src, "p", definition, workloads)
        if remove:
            os.remove(os.path.join(d, remove))
        r = helper("import-sol", src, "--out", os.path.join(self.tmp, "bad-out-" + name))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(needle, lines[0])
        self.assertIn("imported 0, failed 1", r.stdout)

    def test_missing_workload_file(self):
        self.malformed("missing", ADD, ADD_WL, "p/workload.jsonl: missing", remove="workload.jsonl")

    def test_unknown_axis(self):
        wl = [ADD_WL[0], {"uuid": "x", "axes": {"n": 4, "m": 3}, "inputs": ADD_WL[0]["inputs"]}]
        self.malformed("axis", ADD, wl, "p/workload.jsonl:2: axes names 'm', which is not an axis of add_f32")

    def test_bad_json_line(self):
        src = os.path.join(self.tmp, "bad-json")
        d = problem(src, "p", ADD, ADD_WL)
        with open(os.path.join(d, "workload.jsonl"), "a", encoding="utf-8") as f:
            f.write('{"uuid": "z", "axes": {"n": 3},\n')
        r = helper("import-sol", src, "--out", os.path.join(self.tmp, "bad-json-out"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("p/workload.jsonl:3: not JSON", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "bad-json-out", "add_f32")))

    def test_shape_naming_an_unknown_axis(self):
        bad = dict(ADD, outputs={"z": tensor(["q"])})
        self.malformed("shape", bad, ADD_WL, "p/definition.json: outputs.z: the shape names the unknown axis 'q'")

    def test_unknown_input_type(self):
        wl = [dict(ADD_WL[0], inputs={"x": {"type": "file"}, "y": {"type": "random"}})]
        self.malformed("type", ADD, wl, "p/workload.jsonl:1: inputs.x: type 'file' is not one of")

    def test_reference_that_fails(self):
        bad = dict(ADD, reference="import torch\n\ndef run(x, y):\n    raise RuntimeError('no')\n")
        self.malformed("run", bad, ADD_WL[:1], "workload add-1 (workload.jsonl:1): forward (seed 0, init 0) raised")


def mblast(*args, timeout=900):
    env = dict(os.environ, MBLAST_PYTHON=sys.executable, MBLAST_HOME=ROOT)
    env.pop("MBLAST_BENCH_SIZE", None)
    return subprocess.run([MBLAST, *args], capture_output=True, text=True, env=env, timeout=timeout)


def pocl_skip():
    if NO_TORCH:
        return NO_TORCH
    if not os.access(MBLAST, os.X_OK):
        return f"{MBLAST} is not built"
    r = mblast("targets", "--json", timeout=120)
    if r.returncode != 0 or not any(t["name"] == "pocl-cpu" and t.get("available") for t in json.loads(r.stdout)):
        return "the pocl-cpu target is not available here"
    return None


POCL_SKIP = pocl_skip()

CL_HEAD = '#include <mblast/opencl_candidate.h>\n\nstatic const char* kSource = R"CLC(\n'
ADD_CL = (
    CL_HEAD
    + r"""
__kernel void add(__global const float* x, __global const float* y, __global float* z, const uint n) {
  const uint i = get_global_id(0);
  if (i < n) z[i] = x[i] @OP@ y[i];
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 2, n_par, 0, n_out, 1)) return -1;
  const cl_uint n = static_cast<cl_uint>(out[0].nbytes / sizeof(float));
  const size_t global = (n + 63) / 64 * 64;
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(in[1].data),
                           static_cast<cl_mem>(out[0].data), n);
}

MBLAST_OPENCL_CANDIDATE(kSource, "add", enqueue)
"""
)
GEMM_CL = (
    CL_HEAD
    + r"""
__kernel void gemm_bt(__global const float* a, __global const float* b, __global float* c, const uint m) {
  const uint i = get_global_id(0);
  if (i >= m * 32) return;
  const uint r = i / 32, col = i % 32;
  float acc = 0.0f;
  for (uint k = 0; k < 64; ++k) acc += a[r * 64 + k] * b[col * 64 + k];
  c[i] = acc;
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 2, n_par, 0, n_out, 1)) return -1;
  const cl_uint m = static_cast<cl_uint>(in[0].nbytes / (64 * sizeof(float)));
  const size_t global = (m * 32 + 63) / 64 * 64;
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(in[1].data),
                           static_cast<cl_mem>(out[0].data), m);
}

MBLAST_OPENCL_CANDIDATE(kSource, "gemm_bt", enqueue)
"""
)
ROWSUM_CL = (
    CL_HEAD
    + r"""
__kernel void rowsum(__global const float* x, __global float* s, const uint rows) {
  const uint r = get_global_id(0);
  if (r >= rows) return;
  float acc = 0.0f;
  for (uint k = 0; k < 128; ++k) acc += x[r * 128 + k];
  s[r] = acc;
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 0, n_out, 1)) return -1;
  const cl_uint rows = static_cast<cl_uint>(out[0].nbytes / sizeof(float));
  const size_t global = (rows + 63) / 64 * 64;
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(out[0].data),
                           rows);
}

MBLAST_OPENCL_CANDIDATE(kSource, "rowsum", enqueue)
"""
)


@unittest.skipIf(POCL_SKIP is not None, POCL_SKIP or "")
class CommandAndBenchTest(unittest.TestCase):
    """`mblast import sol-execbench`, then `mblast bench` on what it wrote: every row with a bound
    and a correct candidate reports the fraction of it; the wrong candidate's row reports none."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mblast_sol_bench_")
        src = os.path.join(cls.tmp, "sol")
        make_suite(src)
        cls.out = os.path.join(cls.tmp, "problems")
        cls.imp = mblast(
            "import", "sol-execbench", src, "--out", cls.out, "--sol-anchors", os.path.join(src, "anchors.json")
        )
        cands = os.path.join(cls.tmp, "candidates")
        for i in range(2):
            write(os.path.join(cands, "gemm_n32_k64", f"gemm_n32_k64_w{i}.opencl.cpp"), GEMM_CL)
            write(os.path.join(cands, "rowsum_c128", f"rowsum_c128_w{i}.opencl.cpp"), ROWSUM_CL)
        write(os.path.join(cands, "add_f32", "add_f32_w0.opencl.cpp"), ADD_CL.replace("@OP@", "+"))
        write(os.path.join(cands, "add_f32", "add_f32_w1.opencl.cpp"), ADD_CL.replace("@OP@", "-"))  # wrong
        cls.results = os.path.join(cls.tmp, "results.json")
        cls.bench = mblast(
            "bench",
            cls.out,
            "--target",
            "pocl-cpu",
            "--candidates",
            cands,
            "--work",
            os.path.join(cls.tmp, "work"),
            "--out",
            cls.results,
            "--min-time",
            "0.05",
            "--no-compile",
        )

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_import_command(self):
        self.assertEqual(self.imp.returncode, 0, self.imp.stdout + self.imp.stderr)
        self.assertIn("imported 6, failed 0", self.imp.stdout)

    def test_bench_reports_fraction_of_the_bound(self):
        self.assertEqual(self.bench.returncode, 0, self.bench.stdout + self.bench.stderr)
        rows = {p["key"]: p for p in read_json(self.results)["problems"]}
        self.assertEqual(len(rows), 6, sorted(rows))
        for key in ("add_f32/add_f32_w0", "gemm_n32_k64/gemm_n32_k64_w0", "gemm_n32_k64/gemm_n32_k64_w1"):
            row = rows[key]
            self.assertEqual(row["status"], "correct", (key, row.get("reason")))
            self.assertGreater(row["sol_time_us"], 0, key)
            self.assertAlmostEqual(row["fraction_of_sol"], row["sol_time_us"] / row["time"]["median"], places=9)
        wrong = rows["add_f32/add_f32_w1"]
        self.assertEqual(wrong["status"], "incorrect")
        self.assertEqual(wrong["sol_time_us"], 4.0)
        self.assertIsNone(wrong["fraction_of_sol"])
        for i in range(2):  # correct, but no bound was given
            row = rows[f"rowsum_c128/rowsum_c128_w{i}"]
            self.assertEqual(row["status"], "correct", row.get("reason"))
            self.assertIsNone(row["sol_time_us"])
            self.assertIsNone(row["fraction_of_sol"])
        self.assertIn("of SOL", self.bench.stdout)


if __name__ == "__main__":
    unittest.main()
