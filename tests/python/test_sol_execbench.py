"""`mblast import sol-execbench` (docs/sol-execbench.md): SOL-ExecBench problems written here in
that format (definition.json + workload.jsonl + reference.py) become one mblast problem per
workload, with the workload's speed-of-light time as the problem's bound; `mblast bench` runs
them on pocl-cpu and reports the fraction of that bound. Malformed problems get one line naming
the file and the line.

The helper's part runs without mblast (tools/mblast_kernelbench.py import-sol); the commands'
part needs the binary ($MBLAST_BIN, else build/bin/mblast) and, for bench, the pocl-cpu target.

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


def problem(root, folder, definition, workloads, reference):
    d = os.path.join(root, folder)
    write(os.path.join(d, "definition.json"), json.dumps(definition, indent=2))
    write(os.path.join(d, "workload.jsonl"), "".join(json.dumps(w) + "\n" for w in workloads))
    if reference is not None:
        write(os.path.join(d, "reference.py"), reference)
    return d


def tensor(shape, dtype="float32"):
    return {"shape": shape, "dtype": dtype}


# An elementwise op (two workloads; speed-of-light times on the lines), a matmul with const and
# var axes (times from an anchors file), and a row reduction whose inputs come from the
# reference's own custom-inputs function, one of its axes an expression.
ADD = {
    "name": "add_f32",
    "description": "z = x + y, elementwise.",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": tensor(["n"]), "y": tensor(["n"])},
    "outputs": {"z": tensor(["n"])},
    "reference": "see reference.py",
}
ADD_REF = "import torch\n\n\n@torch.no_grad()\ndef run(x, y):\n    return x + y\n"
ADD_WL = [
    {
        "uuid": "add-1",
        "axes": {"n": 1000},
        "inputs": {"x": {"type": "random"}, "y": {"type": "random"}},
        "sol_latency_ms": 0.002,
    },
    {
        "uuid": "add-2",
        "axes": {"n": 5000},
        "inputs": {"x": {"type": "random"}, "y": {"type": "random"}},
        "sol_latency_ms": 0.004,
    },
]
MATMUL = {
    "name": "gemm_n32_k64",
    "description": "C = A @ B.T",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 32}, "K": {"type": "const", "value": 64}},
    "inputs": {"A": tensor(["M", "K"]), "B": tensor(["N", "K"])},
    "outputs": {"C": tensor(["M", "N"])},
    "reference": "import torch\n\ndef run(A, B):\n    return torch.matmul(A, B.T)\n",
}
MATMUL_WL = [{"uuid": "mm-16", "axes": {"M": 16}, "inputs": {}}, {"uuid": "mm-48", "axes": {"M": 48}, "inputs": {}}]
ANCHORS = {"mm-16": {"sol_latency_ms": 0.001}, "mm-48": {"sol_latency_ms": 0.003}}
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
    "reference": "see reference.py",
}
ROWSUM_REF = (
    "import torch\n\n\n"
    "def get_inputs(axes_and_scalars, device):\n"
    "    rows, cols = axes_and_scalars['rows'], axes_and_scalars['cols']\n"
    "    return {'x': torch.rand(rows, cols, device=device) - 0.25}\n\n\n"
    "@torch.no_grad()\n"
    "def run(x):\n"
    "    return x.sum(dim=-1)\n"
)
ROWSUM_WL = [
    {"uuid": "rs-4", "axes": {"pairs": 4}, "inputs": {"x": {"type": "custom"}}},
    {"uuid": "rs-19", "axes": {"pairs": 19}, "inputs": {"x": {"type": "custom"}}},
]


def make_suite(root):
    problem(root, "L1/001_add", ADD, ADD_WL, ADD_REF)
    problem(root, "L1/002_gemm", MATMUL, MATMUL_WL, None)  # the definition's reference only
    problem(root, "L2/001_rowsum", ROWSUM, ROWSUM_WL, ROWSUM_REF)
    write(os.path.join(root, "anchors.json"), json.dumps(ANCHORS))


def helper(*args):
    env = dict(os.environ)
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, env=env, timeout=900)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@unittest.skipIf(NO_TORCH is not None, NO_TORCH or "")
class ImportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mblast_sol_test_")
        cls.src = os.path.join(cls.tmp, "sol")
        make_suite(cls.src)
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
        )

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_one_problem_per_workload_with_its_bound(self):
        self.assertEqual(self.r.returncode, 0, self.r.stdout + self.r.stderr)
        expect = {
            "add_f32/add_f32_w0": (2.0, [1000]),
            "add_f32/add_f32_w1": (4.0, [5000]),
            "gemm_n32_k64/gemm_n32_k64_w0": (1.0, [16, 64]),
            "gemm_n32_k64/gemm_n32_k64_w1": (3.0, [48, 64]),
            "rowsum_c128/rowsum_c128_w0": (None, [8, 128]),
            "rowsum_c128/rowsum_c128_w1": (None, [38, 128]),
        }
        for key, (sol_us, shape) in expect.items():
            pj = read_json(os.path.join(self.out, key, "problem.json"))
            self.assertEqual(pj["inputs"][0]["shape"], shape, key)
            self.assertEqual(pj["provenance"]["origin"]["kind"], "sol-execbench", key)
            if sol_us is None:
                self.assertNotIn("speed_of_light", pj, key)
            else:
                self.assertAlmostEqual(pj["speed_of_light"]["time_us"], sol_us, places=9, msg=key)
            # The KernelBench-format file the problem came from stays next to it, for `mblast bench`.
            self.assertTrue(os.path.isfile(os.path.join(self.out, key + ".py")), key)
        summary = read_json(os.path.join(self.tmp, "summary.json"))
        self.assertEqual((summary["imported"], summary["failed"]), (6, 0))

    def test_reference_data_is_the_reference(self):
        """The stored expected output is run() on the stored inputs: z = x + y, C = A @ B.T, sums."""
        from safetensors.torch import load_file

        for key, check in [
            ("add_f32/add_f32_w1", lambda i: i["in0"] + i["in1"]),
            ("gemm_n32_k64/gemm_n32_k64_w0", lambda i: i["in0"] @ i["in1"].T),
            ("rowsum_c128/rowsum_c128_w1", lambda i: i["in0"].sum(-1)),
        ]:
            d = os.path.join(self.out, key, "data")
            manifest = read_json(os.path.join(d, "MANIFEST.json"))
            names = sorted(manifest["files"])
            ins = [n for n in names if "inputs" in n]
            outs = [n for n in names if "expected" in n or "outputs" in n]
            self.assertTrue(ins and outs, f"{key}: {names}")
            inputs = load_file(os.path.join(d, ins[0]))
            expected = load_file(os.path.join(d, outs[0]))
            got = check(inputs)
            want = next(iter(expected.values()))
            self.assertTrue(torch.allclose(got, want, rtol=1e-5, atol=1e-5), key)

    def malformed(self, name, definition, workloads, reference, needle, remove=None):
        src = os.path.join(self.tmp, "bad-" + name)
        d = problem(src, "p", definition, workloads, reference)
        if remove:
            os.remove(os.path.join(d, remove))
        r = helper("import-sol", src, "--out", os.path.join(self.tmp, "bad-out-" + name))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(needle, lines[0])
        self.assertIn("imported 0, failed 1", r.stdout)

    def test_missing_workload_file(self):
        self.malformed("missing", ADD, ADD_WL, ADD_REF, "p/workload.jsonl: missing", remove="workload.jsonl")

    def test_unknown_axis(self):
        wl = [ADD_WL[0], {"uuid": "x", "axes": {"n": 4, "m": 3}, "inputs": {}}]
        self.malformed("axis", ADD, wl, ADD_REF, "p/workload.jsonl:2: axes names 'm', which is not an axis of add_f32")

    def test_bad_json_line(self):
        src = os.path.join(self.tmp, "bad-json")
        d = problem(src, "p", ADD, ADD_WL, ADD_REF)
        with open(os.path.join(d, "workload.jsonl"), "a", encoding="utf-8") as f:
            f.write('{"uuid": "z", "axes": {"n": 3},\n')
        r = helper("import-sol", src, "--out", os.path.join(self.tmp, "bad-json-out"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("p/workload.jsonl:3: not JSON", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "bad-json-out", "add_f32")))

    def test_shape_naming_an_unknown_axis(self):
        bad = dict(ADD, outputs={"z": tensor(["q"])})
        self.malformed(
            "shape", bad, ADD_WL, ADD_REF, "p/definition.json: outputs.z: the shape names the unknown axis 'q'"
        )

    def test_unsupported_dtype(self):
        bad = dict(ADD, inputs={"x": tensor(["n"], "float8_e4m3fn"), "y": tensor(["n"])})
        self.malformed("dtype", bad, ADD_WL, ADD_REF, "inputs.x: dtype 'float8_e4m3fn' is not supported")


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
