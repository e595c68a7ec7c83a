"""Tests of tools/mblast_kernelbench.py and of `mblast import kernelbench`, `mblast baseline`
and `mblast export` (docs/kernelbench.md).

Run from the repository root:  .venv/bin/python3 -m unittest -v tests/python/test_kernelbench.py
Needs torch and safetensors for this interpreter (the module is skipped without them). The
parts that call build/bin/mblast ($MBLAST_BIN) skip when it is not built; the `mblast eval`
parts skip when the pocl-cpu target is not available here.
"""

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "mblast_kernelbench.py")
FIXTURES = os.path.join(ROOT, "tests", "python", "fixtures")
MBLAST = os.environ.get("MBLAST_BIN") or os.path.join(ROOT, "build", "bin", "mblast")

SKIP = None
try:
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file
except Exception as e:  # ImportError, or a broken install
    SKIP = f"torch and safetensors are needed for {sys.executable}: {type(e).__name__}: {e}"


def helper(*args, env=None):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, env=env, timeout=900)


def mblast(*args):
    env = dict(os.environ, MBLAST_PYTHON=sys.executable, MBLAST_HOME=ROOT)
    return subprocess.run([MBLAST, *args], capture_output=True, text=True, env=env, timeout=900)


def have_mblast():
    return os.access(MBLAST, os.X_OK)


_POCL = None


def pocl_available():
    global _POCL
    if _POCL is None:
        _POCL = False
        if have_mblast():
            r = mblast("targets", "--json")
            if r.returncode == 0:
                for t in json.loads(r.stdout):
                    if t["name"] == "pocl-cpu" and t.get("available"):
                        _POCL = True
    return _POCL


def opencl_device_here():
    if pocl_available():
        return True
    if not shutil.which("clinfo"):
        return False
    r = subprocess.run(["clinfo", "-l"], capture_output=True, text=True, timeout=60)
    return "Device" in r.stdout


def from_tools(module, name):
    """`name` from tools/<module> (the helper's own code, imported as the helper imports it)."""
    import importlib

    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        return getattr(importlib.import_module(module), name)
    finally:
        sys.path.pop(0)


def tf32_flags():
    """PyTorch's TF32 settings for convolutions and matmuls, with their "on" and "off" values:
    torch >= 2.9's fp32_precision, else the older allow_tf32 flags. Written out here rather than
    taken from kernelbench.baseline.tf32_settings(), so that a wrong choice there fails the tests."""
    b = torch.backends
    if hasattr(getattr(b.cudnn, "conv", None), "fp32_precision"):
        return [(b.cudnn.conv, "fp32_precision"), (b.cuda.matmul, "fp32_precision")], "tf32", "ieee"
    return [(b.cudnn, "allow_tf32"), (b.cuda.matmul, "allow_tf32")], True, False


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def copy_fixtures(dest, names):
    os.makedirs(dest, exist_ok=True)
    for n in names:
        shutil.copy(os.path.join(FIXTURES, n), os.path.join(dest, n))
    return dest


@unittest.skipIf(SKIP is not None, SKIP or "")
class ImportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mblast_kb_test_")
        src = copy_fixtures(os.path.join(cls.tmp, "src"), ["relu.py", "linear_gelu.py", "tuple_out.py"])
        cls.out = os.path.join(cls.tmp, "problems")
        r = helper("import", src, "--out", cls.out)
        if r.returncode != 0:
            raise AssertionError(f"import failed ({r.returncode}): {r.stdout}{r.stderr}")
        cls.import_output = r.stdout

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def problem(self, name):
        return read_json(os.path.join(self.out, name, "problem.json"))

    def data(self, name, file):
        return load_file(os.path.join(self.out, name, "data", file))

    def test_summary_line(self):
        self.assertIn("imported 3, failed 0", self.import_output)

    def test_all_finite_sees_every_nan_and_infinity(self):
        # A finite sum settles it; a non-finite one is checked element by element, so finite
        # values whose sum overflows are still finite.
        all_finite = from_tools("kernelbench.tensors", "all_finite")
        nan, inf = float("nan"), float("inf")
        self.assertTrue(all_finite([torch.randn(1000), torch.arange(5), torch.empty(0)]))
        for bad in ([1.0, nan], [1.0, inf], [-inf, 2.0], [inf, -inf]):
            for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
                self.assertFalse(all_finite([torch.ones(3), torch.tensor(bad, dtype=dtype)]), (bad, dtype))
        self.assertTrue(all_finite([torch.full((1000,), 3.4e38)]))  # the float32 sum is inf
        self.assertTrue(all_finite([torch.tensor([1.7e308, 1.7e308], dtype=torch.float64)]))
        self.assertTrue(all_finite([torch.full((100,), 60000.0, dtype=torch.float16)]))
        self.assertFalse(all_finite([torch.tensor([1.7e308, inf], dtype=torch.float64)]))

    def test_calibration_errors_in_chunks_match_the_whole_tensor(self):
        _max_errors = from_tools("kernelbench.importer", "_max_errors")
        torch.manual_seed(0)
        o64 = torch.randn(10, 11, dtype=torch.float64) * 3
        o = (o64 + torch.randn(10, 11, dtype=torch.float64) * 1e-3).float()
        err = (o.double() - o64).abs()
        want = (float((err - 1e-4 * o64.abs()).clamp(min=0).max()), float(err.max()))
        for chunk in (1, 7, 110, 1 << 22):  # the last chunk short, one element, all in one
            got = _max_errors(o, o64, 1e-4, chunk)
            self.assertEqual(got, want, chunk)
        self.assertEqual(_max_errors(o.t(), o64.t(), 1e-4, 7), want)  # not contiguous
        self.assertEqual(_max_errors(torch.empty(0), torch.empty(0, dtype=torch.float64), 1e-4), (0.0, 0.0))

    def test_relu_problem_directory(self):
        d = os.path.join(self.out, "relu")
        for f in ("problem.json", "model.py", "graph.json", "data/MANIFEST.json"):
            self.assertTrue(os.path.isfile(os.path.join(d, f)), f)
        p = self.problem("relu")
        self.assertEqual(p["format"], 1)
        self.assertEqual(p["name"], "relu")
        self.assertEqual(p["op_class"], "activation")
        self.assertEqual(p["inputs"], [{"name": "in0", "dtype": "f32", "shape": [16, 1024]}])
        self.assertEqual(p["parameters"], [])
        self.assertEqual(p["outputs"], [{"name": "out0", "dtype": "f32", "shape": [16, 1024]}])
        self.assertEqual([s["distribution"] for s in p["seeds"]], ["file", "file", "signed-variant"])
        self.assertEqual(p["inits"], [0, 1])
        self.assertEqual(p["graph"], "graph.json")
        self.assertEqual(p["bytes"], 2 * 16 * 1024 * 4)
        self.assertIn(p["flops_method"], ("torch.flop_counter", "analytic-fx"))
        self.assertEqual(p["tolerance"]["f32"]["min_match"], 1.0)
        self.assertLessEqual(p["tolerance"]["f32"]["atol"], 1e-2)
        prov = p["provenance"]
        self.assertEqual(prov["kind"], "kernelbench")
        self.assertEqual(prov["source"], os.path.join(self.tmp, "src", "relu.py"))
        self.assertEqual(prov["torch"], torch.__version__)
        with open(os.path.join(d, "model.py"), "rb") as f, open(os.path.join(FIXTURES, "relu.py"), "rb") as g:
            self.assertEqual(f.read(), g.read())
        import hashlib

        man = read_json(os.path.join(d, "data", "MANIFEST.json"))
        self.assertEqual(len(man["files"]), 3 + 2 + 6)
        for name, digest in man["files"].items():
            with open(os.path.join(d, "data", name), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest, name)

    def test_relu_data_and_signed_seed(self):
        inputs = {s: self.data("relu", f"inputs.seed{s}.safetensors")["in0"] for s in range(3)}
        self.assertGreaterEqual(float(inputs[0].min()), 0.0)  # the file's own [0, 1)
        self.assertGreaterEqual(float(inputs[1].min()), 0.0)
        self.assertFalse(torch.equal(inputs[0], inputs[1]))
        self.assertLess(float(inputs[2].min()), 0.0)  # signed variant
        torch.manual_seed(0)
        self.assertTrue(torch.equal(inputs[0], torch.rand(16, 1024)))  # seed 0 = get_inputs()
        for s in range(3):
            for i in range(2):
                exp = self.data("relu", f"expected.seed{s}.init{i}.safetensors")["out0"]
                self.assertTrue(torch.equal(exp, torch.relu(inputs[s])))
        self.assertEqual(self.data("relu", "params.init0.safetensors"), {})

    def test_inits_with_the_same_outputs_share_one_file(self):
        # relu has no parameters: every init's expected outputs are init 0's bytes, stored once
        # (a hard link, the same hash); linear_gelu's inits differ and keep files of their own.
        def entry(name, s, i):
            path = os.path.join(self.out, name, "data", f"expected.seed{s}.init{i}.safetensors")
            return (
                os.stat(path).st_ino,
                read_json(os.path.join(self.out, name, "data", "MANIFEST.json"))["files"][os.path.basename(path)],
            )

        for s in range(3):
            self.assertEqual(entry("relu", s, 0), entry("relu", s, 1))
            ino0, hash0 = entry("linear_gelu", s, 0)
            ino1, hash1 = entry("linear_gelu", s, 1)
            self.assertNotEqual(ino0, ino1)
            self.assertNotEqual(hash0, hash1)

    def test_signed_seed_avoids_what_the_file_is_not_made_for(self):
        # x / x.sum(-1) on zero-centred rows divides by sums near zero: the float32 reference's
        # own error would need an atol beyond KernelBench's 1e-2, so no kernel could match it.
        # The importer says so and shifts by half the mean instead (signed, well-conditioned).
        src = copy_fixtures(os.path.join(self.tmp, "src_rownorm"), ["row_normalize.py"])
        out = os.path.join(self.tmp, "problems_rownorm")
        r = helper("import", src, "--out", out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        p = read_json(os.path.join(out, "row_normalize", "problem.json"))
        seed = p["seeds"][2]
        self.assertEqual(seed["distribution"], "signed-variant")
        self.assertIn("x-mean(x) (the file draws it from", seed["note"])
        self.assertIn("ill-conditioned", seed["note"])
        self.assertIn("x-mean(x)/2", seed["note"])
        x = load_file(os.path.join(out, "row_normalize", "data", "inputs.seed2.safetensors"))["in0"]
        self.assertGreater(float((x < 0).float().mean()), 0.1)
        self.assertNotIn("capped", p.get("tolerance_calibration", {}))
        self.assertLessEqual(p["tolerance"]["f32"]["atol"], 1e-3)

    def test_linear_gelu_parameters_in_documented_order(self):
        p = self.problem("linear_gelu")
        self.assertEqual([t["name"] for t in p["parameters"]], ["linear.weight", "linear.bias"])
        self.assertEqual(p["parameters"][0]["shape"], [32, 64])
        self.assertEqual(p["op_class"], "matmul")
        self.assertEqual(p["flops"], 2 * 8 * 64 * 32)
        # randn inputs are signed already: the last seed keeps the file's distribution, says why
        self.assertEqual(p["seeds"][2]["distribution"], "file")
        self.assertIn("negative", p["seeds"][2]["note"])
        w = [self.data("linear_gelu", f"params.init{i}.safetensors") for i in range(2)]
        self.assertFalse(torch.equal(w[0]["linear.weight"], w[1]["linear.weight"]))
        for s in range(3):
            x = self.data("linear_gelu", f"inputs.seed{s}.safetensors")["in0"]
            for i in range(2):
                exp = self.data("linear_gelu", f"expected.seed{s}.init{i}.safetensors")["out0"]
                ref = F.gelu(F.linear(x, w[i]["linear.weight"], w[i]["linear.bias"]))
                self.assertTrue(torch.allclose(exp, ref, atol=1e-6, rtol=1e-6))
        g = read_json(os.path.join(self.out, "linear_gelu", "graph.json"))
        lin = [n for n in g["nodes"] if n["op"] == "call_module"]
        self.assertEqual(len(lin), 1)
        self.assertEqual(lin[0]["attributes"]["in_features"], 64)
        self.assertEqual(lin[0]["shape"], [8, 32])

    def test_tuple_outputs_and_constants(self):
        p = self.problem("tuple_out")
        self.assertEqual([t["name"] for t in p["inputs"]], ["in0", "in1"])
        self.assertEqual(p["constants"], [{"name": "in2", "position": 2, "value": 0.5}])
        self.assertEqual(p["arguments"], ["in0", "in1", "in2"])
        self.assertEqual(p["returns"], "tuple")
        self.assertEqual([(t["name"], t["shape"]) for t in p["outputs"]], [("out0", [4, 32]), ("out1", [4])])
        inp = self.data("tuple_out", "inputs.seed2.safetensors")
        self.assertEqual(sorted(inp), ["in0", "in1"])  # the constant is not a tensor
        exp = self.data("tuple_out", "expected.seed2.init1.safetensors")
        self.assertTrue(torch.allclose(exp["out0"], inp["in0"] + 0.5 * inp["in1"]))
        self.assertTrue(torch.allclose(exp["out1"], (inp["in0"] * inp["in1"]).sum(dim=1)))

    def test_reimport_keeps_candidates_and_refuses_foreign_directories(self):
        out = os.path.join(self.tmp, "again")
        src = os.path.join(FIXTURES, "relu.py")
        self.assertEqual(helper("import", src, "--out", out).returncode, 0)
        cand = os.path.join(out, "relu", "candidates", "mine.opencl.cpp")
        os.makedirs(os.path.dirname(cand))
        with open(cand, "w") as f:
            f.write("// kept\n")
        r = helper("import", src, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(cand))
        foreign = os.path.join(self.tmp, "foreign")
        os.makedirs(os.path.join(foreign, "relu"))
        with open(os.path.join(foreign, "relu", "problem.json"), "w") as f:
            json.dump({"format": 1, "name": "relu", "provenance": {"kind": "hand-made"}}, f)
        r = helper("import", src, "--out", foreign)
        self.assertEqual(r.returncode, 1)
        self.assertIn("is not a KernelBench import", r.stderr)

    def test_directory_with_bad_files_continues(self):
        src = copy_fixtures(os.path.join(self.tmp, "mixed"), ["relu.py", "syntax_error.py", "forward_raises.py"])
        out = os.path.join(self.tmp, "mixed_out")
        r = helper("import", src, "--out", out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("imported 1, failed 2", r.stdout)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        self.assertEqual(len(lines), 2, r.stderr)
        self.assertTrue(
            any(ln.startswith(f"mblast_kernelbench: {src}/syntax_error.py: ") and "SyntaxError" in ln for ln in lines),
            r.stderr,
        )
        self.assertTrue(
            any(
                ln.startswith(f"mblast_kernelbench: {src}/forward_raises.py: ") and "this model always fails" in ln
                for ln in lines
            ),
            r.stderr,
        )
        self.assertEqual(sorted(os.listdir(out)), ["relu"])

    def test_missing_pieces_get_one_line_reasons(self):
        src = os.path.join(self.tmp, "odd")
        os.makedirs(src)
        with open(os.path.join(src, "no_model.py"), "w") as f:
            f.write("def get_inputs():\n    return []\n")
        with open(os.path.join(src, "dropout.py"), "w") as f:
            f.write(
                textwrap.dedent(
                    """\
                import torch
                class Model(torch.nn.Module):
                    def forward(self, x):
                        return torch.nn.functional.dropout(x, 0.5, training=True)
                def get_inputs():
                    return [torch.rand(64)]
                def get_init_inputs():
                    return []
                """
                )
            )
        r = helper("import", src, "--out", os.path.join(self.tmp, "odd_out"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("defines no Model", r.stderr)
        self.assertIn("not deterministic", r.stderr)
        self.assertIn("imported 0, failed 2", r.stdout)

    @unittest.skipUnless(have_mblast(), f"{MBLAST} is not built")
    def test_cli_import(self):
        out = os.path.join(self.tmp, "cli_out")
        r = mblast("import", "kernelbench", os.path.join(FIXTURES, "tuple_out.py"), "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(os.path.join(out, "tuple_out", "problem.json")))
        r = mblast("import", "kernelbench", os.path.join(FIXTURES, "syntax_error.py"), "--out", out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("syntax_error.py: loading failed: SyntaxError", r.stderr)
        r = mblast("import", "kernelbench", os.path.join(FIXTURES, "nonexistent.py"), "--out", out)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)
        r = mblast("import", "kernelbench", FIXTURES, "--out", out, "--json")
        self.assertEqual(r.returncode, 1)  # the fixtures include the two bad files
        summary = json.loads(r.stdout)
        self.assertEqual((summary["imported"], summary["failed"]), (6, 2))  # gather_mask.py included
        bad = {os.path.basename(f["file"]): f["reason"] for f in summary["files"] if not f["ok"]}
        self.assertEqual(sorted(bad), ["forward_raises.py", "syntax_error.py"])
        # sets_default_dtype.py, imported before tuple_out.py, sets float64 as the default dtype
        # at module level: tuple_out's inputs (torch.rand) are still float32
        dirty = next(f for f in summary["files"] if f["file"].endswith("sets_default_dtype.py"))
        self.assertEqual(
            dirty["settings_set_back"],
            ["default dtype (torch.float64 -> torch.float32)", "cudnn.benchmark (True -> False)"],
        )
        with open(os.path.join(out, "tuple_out", "problem.json"), encoding="utf-8") as fh:
            self.assertEqual([t["dtype"] for t in json.load(fh)["inputs"]], ["f32", "f32"])
        r = mblast("import", "kernelbench", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("Example:", r.stdout)

    @unittest.skipUnless(pocl_available(), "mblast or the pocl-cpu target is not available here")
    def test_eval_relu_candidates(self):
        pdir = os.path.join(self.out, "relu")
        r = mblast(
            "eval", pdir, os.path.join(FIXTURES, "relu.opencl.cpp"), "--target", "pocl-cpu", "--json", "--no-timing"
        )
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(json.loads(r.stdout)["correct"])
        r = mblast(
            "eval", pdir, os.path.join(FIXTURES, "identity.opencl.cpp"), "--target", "pocl-cpu", "--json", "--no-timing"
        )
        self.assertEqual(r.returncode, 1)
        res = json.loads(r.stdout)
        self.assertFalse(res["correct"])
        self.assertEqual(res["failure_kind"], "wrong_output")
        self.assertIn("seed 2", res["reason"])  # right on [0, 1), wrong on the signed seed

    @unittest.skipUnless(pocl_available(), "mblast or the pocl-cpu target is not available here")
    def test_eval_linear_gelu_candidate(self):
        r = mblast(
            "eval",
            os.path.join(self.out, "linear_gelu"),
            os.path.join(FIXTURES, "linear_gelu.opencl.cpp"),
            "--target",
            "pocl-cpu",
            "--json",
            "--no-timing",
        )
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


@unittest.skipIf(SKIP is not None, SKIP or "")
class BaselineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mblast_kb_base_")
        r = helper("import", os.path.join(FIXTURES, "linear_gelu.py"), "--out", cls.tmp)
        if r.returncode != 0:
            raise AssertionError(r.stderr)
        cls.pdir = os.path.join(cls.tmp, "linear_gelu")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_helper_baseline_cpu(self):
        r = helper(
            "baseline",
            self.pdir,
            "--device",
            "cpu",
            "--compile",
            "--warmup",
            "2",
            "--repeats",
            "20",
            "--min-seconds",
            "0.05",
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        e = res["eager"]
        self.assertGreater(e["median_us"], 0)
        self.assertLessEqual(e["p25_us"], e["median_us"])
        self.assertLessEqual(e["median_us"], e["p75_us"])
        self.assertGreaterEqual(e["samples"], 20)
        self.assertIn("Python dispatch", e["includes"])
        self.assertTrue(e["check"]["within_tolerance"])
        self.assertEqual(res["device"]["type"], "cpu")
        self.assertIsInstance(res["device"]["blas"], list)
        self.assertEqual(res["torch"], torch.__version__)
        self.assertGreaterEqual(res["timing"]["rotating_sets"], 3)
        if not hasattr(torch, "compile"):
            self.assertIn("has no torch.compile", res["compile"]["unavailable"])
            self.assertIn("1.13", res["compile"]["unavailable"])
        else:
            self.assertTrue("median_us" in res["compile"] or "unavailable" in res["compile"])
        # within the tolerance on the CPU: no TF32-off re-measurement, no second eager figure
        self.assertNotIn("tf32", e)
        self.assertNotIn("eager_default", res)

    def test_serve_runs_imports_and_baselines_in_one_process(self):
        # `serve` (what `mblast bench` starts): requests on fd 3, answers on fd 4, one process
        # for many imports and baselines; a bad request gets a non-zero answer and the server
        # goes on.
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()

        def child_fds():  # os.pipe()'s ends close on exec; a dup2 onto itself keeps that flag
            for src, dst in ((req_r, 3), (ans_w, 4)):
                if src != dst:
                    os.dup2(src, dst)
                os.set_inheritable(dst, True)

        proc = subprocess.Popen(
            [sys.executable, TOOL, "serve"],
            preexec_fn=child_fds,
            close_fds=False,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        os.close(req_r)
        os.close(ans_w)
        requests, answers = os.fdopen(req_w, "w"), os.fdopen(ans_r, "r")

        def ask(line):
            requests.write(line + "\n")
            requests.flush()
            return json.loads(answers.readline())

        outs = [os.path.join(self.tmp, f"served{i}.json") for i in range(2)]
        good = ["baseline", self.pdir, "--device", "cpu", "--warmup", "1", "--repeats", "5", "--min-seconds", "0.01"]
        try:
            self.assertEqual(ask(json.dumps({"argv": good + ["--json-out", outs[0]]})), {"exit": 0})
            self.assertNotEqual(
                ask(json.dumps({"argv": ["baseline", os.path.join(self.tmp, "nowhere"), "--device", "cpu"]}))["exit"], 0
            )
            served = os.path.join(self.tmp, "served")
            summary = os.path.join(self.tmp, "served_import.json")
            self.assertEqual(
                ask(
                    json.dumps(
                        {"argv": ["import", os.path.join(FIXTURES, "relu.py"), "--out", served, "--json-out", summary]}
                    )
                ),
                {"exit": 0},
            )
            # A model file that changes PyTorch's default dtype at module level: the relu import
            # after it must still make float32 inputs (torch.rand with the default dtype).
            dirty = os.path.join(self.tmp, "served_dirty")
            ask(
                json.dumps(
                    {
                        "argv": [
                            "import",
                            os.path.join(FIXTURES, "sets_default_dtype.py"),
                            "--out",
                            dirty,
                            "--json-out",
                            os.path.join(self.tmp, "served_dirty.json"),
                        ]
                    }
                )
            )
            # ... and its baseline, which loads the file again: the server sets them back
            self.assertEqual(
                ask(
                    json.dumps(
                        {
                            "argv": [
                                "baseline",
                                os.path.join(dirty, "sets_default_dtype"),
                                "--device",
                                "cpu",
                                "--warmup",
                                "1",
                                "--repeats",
                                "5",
                                "--min-seconds",
                                "0.01",
                                "--json-out",
                                os.path.join(self.tmp, "dirty_baseline.json"),
                            ]
                        }
                    )
                ),
                {"exit": 0},
            )
            again = os.path.join(self.tmp, "served_again")
            self.assertEqual(
                ask(
                    json.dumps(
                        {
                            "argv": [
                                "import",
                                os.path.join(FIXTURES, "relu.py"),
                                "--out",
                                again,
                                "--json-out",
                                os.path.join(self.tmp, "again.json"),
                            ]
                        }
                    )
                ),
                {"exit": 0},
            )
            self.assertNotEqual(ask(json.dumps({"argv": ["export", "--problem", self.pdir]}))["exit"], 0)
            self.assertNotEqual(ask("not json")["exit"], 0)
            self.assertEqual(ask(json.dumps({"argv": good + ["--json-out", outs[1]]})), {"exit": 0})
        finally:
            requests.close()
            out, err = proc.communicate(timeout=300)
            answers.close()
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(out, b"", "nothing on stdout: the answers have their own channel")
        first, second = read_json(outs[0]), read_json(outs[1])
        self.assertGreater(first["eager"]["median_us"], 0)
        self.assertGreater(second["eager"]["median_us"], 0)
        # torch was imported once, for the first request
        self.assertGreater(first["phases"]["import_torch_s"], 0)
        self.assertEqual(second["phases"]["import_torch_s"], 0.0)
        imported = read_json(summary)["files"][0]
        self.assertTrue(imported["ok"], imported)
        self.assertTrue(os.path.exists(os.path.join(served, "relu", "problem.json")))
        self.assertEqual(imported["phases"]["import_torch_s"], 0.0)
        # every step of the import is timed, and the steps add up to no more than the import
        steps = {k: v for k, v in imported["phases"].items() if k != "import_torch_s"}
        self.assertEqual(
            set(steps),
            {
                "load_and_inputs_s",
                "models_s",
                "reference_s",
                "determinism_s",
                "calibrate_s",
                "graph_s",
                "flops_s",
                "write_s",
            },
        )
        self.assertTrue(all(v >= 0 for v in steps.values()), steps)
        self.assertLessEqual(sum(steps.values()), imported["seconds"] + 1e-6)
        # what the dirty model file changed was set back, and said so
        self.assertIn(
            b"sets_default_dtype.py: the model file changed PyTorch's default dtype (torch.float64 -> torch.float32), "
            b"cudnn.benchmark (True -> False); set back",
            err,
        )
        self.assertIn(
            b"serve: the request changed PyTorch's default dtype (torch.float64 -> torch.float32), "
            b"cudnn.benchmark (True -> False); set back",
            err,
        )
        self.assertEqual(
            [t["dtype"] for t in read_json(os.path.join(again, "relu", "problem.json"))["inputs"]], ["f32"]
        )

    def test_baseline_caches_cold_as_the_runner_makes_them(self):
        # With mblast's eviction library the CPU baseline evicts its own memory before each timed
        # call (as the runner's worker does for an OpenCL CPU device); without it, or when the
        # target asks for the sweep, it sweeps twice the largest cache.
        lib = os.path.join(os.path.dirname(os.path.dirname(MBLAST)), "lib", "mblast", "libmblast_evict.so")
        if not os.path.exists(lib):
            self.skipTest(f"{lib} is not built")
        common = ("baseline", self.pdir, "--device", "cpu", "--warmup", "1", "--repeats", "5", "--min-seconds", "0.01")
        methods = {}
        for mode in ("evict", "sweep"):
            r = helper(*common, "--cache-flush", mode, "--evict-library", lib)
            self.assertEqual(r.returncode, 0, r.stderr)
            methods[mode] = json.loads(r.stdout)["timing"]["method"]
        r = helper(*common)
        self.assertEqual(r.returncode, 0, r.stderr)
        methods["no library"] = json.loads(r.stdout)["timing"]["method"]
        if platform.machine() == "x86_64":
            self.assertIn("resident data memory flushed (CLFLUSHOPT", methods["evict"])
            self.assertIn("ms of arithmetic on PyTorch's threads", methods["evict"])
        self.assertIn("MiB (2x the largest CPU cache)", methods["sweep"])
        self.assertIn("MiB (2x the largest CPU cache)", methods["no library"])

    def test_reference_blas_is_named(self):
        # Debian's netlib libblas.so.3 makes eager matmuls ~70x slower than OpenBLAS (level2/07
        # small's linear, 2 threads: 19.4 ms against 0.27 ms): the baseline must say so.
        blas_info = from_tools("kernelbench.baseline", "blas_info")
        d = "/usr/lib/x86_64-linux-gnu/"
        ref = blas_info([d + "libc.so.6", d + "openblas-pthread/libopenblasp-r0.3.21.so", d + "blas/libblas.so.3.11.0"])
        self.assertIn("reference (netlib) BLAS", ref["blas_note"])
        self.assertEqual(ref["blas"], [d + "openblas-pthread/libopenblasp-r0.3.21.so", d + "blas/libblas.so.3.11.0"])
        fast = blas_info([d + "openblas-pthread/libopenblasp-r0.3.21.so", d + "openblas-pthread/libblas.so.3"])
        self.assertNotIn("blas_note", fast)
        self.assertNotIn("blas_note", blas_info([]))  # MKL builds map no libblas
        # OpenBLAS's pthread build beside PyTorch's OpenMP threads: erratic eager products
        pthread = [d + "openblas-pthread/libopenblasp-r0.3.21.so", d + "openblas-pthread/libblas.so.3"]
        self.assertIn("libopenblas0-openmp", blas_info(pthread, torch_openmp=True)["blas_note"])
        self.assertNotIn(
            "blas_note",
            blas_info(
                [d + "openblas-openmp/libopenblasp-r0.3.21.so", d + "openblas-openmp/libblas.so.3"], torch_openmp=True
            ),
        )

    def test_helper_prefers_the_openmp_openblas(self):
        # Re-run with Debian's OpenMP OpenBLAS first on the loader path when it is installed and
        # the system resolves another libblas.so.3; never twice, never when told to keep the system's.
        openmp_blas_env = from_tools("mblast_kernelbench", "openmp_blas_env")
        ma = "x86_64-linux-gnu"
        installed = lambda p: p == f"/usr/lib/{ma}/openblas-openmp/libblas.so.3"  # noqa: E731
        pthread = lambda p: f"/usr/lib/{ma}/openblas-pthread/libblas.so.3"  # noqa: E731
        env = openmp_blas_env({"LD_LIBRARY_PATH": "/opt/x"}, ma, exists=installed, realpath=pthread)
        self.assertEqual(env["LD_LIBRARY_PATH"], f"/usr/lib/{ma}/openblas-openmp:/opt/x")
        self.assertEqual(env["MBLAST_BLAS_SET"], "openblas-openmp")
        self.assertIsNone(openmp_blas_env(env, ma, exists=installed, realpath=pthread))  # already re-run
        self.assertIsNone(openmp_blas_env({"MBLAST_TORCH_BLAS": "system"}, ma, exists=installed, realpath=pthread))
        self.assertIsNone(openmp_blas_env({}, ma, exists=lambda p: False, realpath=pthread))  # not installed
        self.assertIsNone(
            openmp_blas_env({}, ma, exists=installed, realpath=lambda p: f"/usr/lib/{ma}/openblas-openmp/libblas.so.3")
        )

    def test_timing_loop_budget_counts_the_flushes(self):
        # The runner's rule: at least `repeats` calls, and the loop (calls and the flushes between
        # them) runs `min_seconds`. A call much shorter than its flush stops there, not after
        # thousands of flushes to collect min_seconds of timed work.
        _measure = from_tools("kernelbench.baseline", "_measure")
        import time

        class SlowFlush:
            device, flushes = "cpu", 0

            def flush(self):
                self.flushes += 1
                time.sleep(0.01)

            def time_call(self, fn, args):
                fn(*args)
                return 1.0  # 1 us

        timer, t0 = SlowFlush(), time.perf_counter()
        samples = _measure(timer, lambda: None, [()], warmup=1, repeats=3, min_seconds=0.1)
        wall = time.perf_counter() - t0
        self.assertGreaterEqual(len(samples), 3)
        self.assertEqual(timer.flushes, len(samples))
        self.assertGreaterEqual(wall, 0.1)
        self.assertLess(wall, 2.0, f"{len(samples)} samples")
        # the minimum number of calls holds however long they take
        self.assertEqual(len(_measure(SlowFlush(), lambda: None, [()], warmup=0, repeats=5, min_seconds=0)), 5)

    def test_tf32_off_restores_the_flags(self):
        # The CUDA baseline re-times eager with TF32 off when PyTorch's default is outside the
        # tolerance; the flags must be off inside and as they were after, even on an error.
        tf32_off = from_tools("kernelbench.baseline", "tf32_off")
        flags, on, off = tf32_flags()
        before = [getattr(o, n) for o, n in flags]
        try:
            for o, n in flags:
                setattr(o, n, on)
            with self.assertRaises(RuntimeError):
                with tf32_off():
                    self.assertEqual([getattr(o, n) for o, n in flags], [off, off])
                    raise RuntimeError("inside")
            self.assertEqual([getattr(o, n) for o, n in flags], [on, on])
        finally:
            for (o, n), v in zip(flags, before):
                setattr(o, n, v)

    def test_a_cuda_import_runs_without_tf32_and_puts_the_flags_back(self):
        # In `serve`, baselines follow an import in the same process: they must find PyTorch's
        # own TF32 settings, while the import's reference ran in strict FP32.
        import argparse

        importer = sys.modules[from_tools("kernelbench.importer", "cmd_import").__module__]
        flags, on, off = tf32_flags()
        before = [getattr(o, n) for o, n in flags]
        seen = []

        def import_file(*args, **kwargs):  # the import itself, as far as the flags go
            seen.append([getattr(o, n) for o, n in flags])
            raise importer.Failure("stopped by the test")

        real = importer.import_file
        out = tempfile.mkdtemp(prefix="mblast_kb_tf32_")
        try:
            for o, n in flags:
                setattr(o, n, on)
            importer.import_file = import_file
            a = argparse.Namespace(
                src=os.path.join(FIXTURES, "relu.py"), out=out, seeds=2, inits=1, device="cuda", json_out=None
            )
            self.assertEqual(importer.cmd_import(a), 1)
            self.assertEqual(seen, [[off, off]])
            self.assertEqual([getattr(o, n) for o, n in flags], [on, on])
        finally:
            importer.import_file = real
            for (o, n), v in zip(flags, before):
                setattr(o, n, v)
            shutil.rmtree(out, ignore_errors=True)

    @unittest.skipUnless(have_mblast(), f"{MBLAST} is not built")
    def test_cli_baseline_stores_per_target(self):
        path = os.path.join(self.pdir, "baselines.json")
        with open(path, "w") as f:
            json.dump({"format": 1, "baselines": {"h200": {"eager": {"median_us": 1.0}}}}, f)
        r = mblast(
            "baseline",
            self.pdir,
            "--target",
            "pocl-cpu",
            "--json",
            "--repeats",
            "10",
            "--min-time",
            "0.02",
            "--warmup",
            "1",
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        entry = json.loads(r.stdout)
        self.assertEqual(entry["target"], "pocl-cpu")
        self.assertEqual(entry["torch_device"], "cpu")
        self.assertGreater(entry["eager"]["median_us"], 0)
        self.assertIn("measured_at", entry)
        # mblast hands the helper its eviction library and the target's choice (auto: evict when
        # a sweep would move more than 256 MiB, the runner's rule)
        cache = from_tools("kernelbench.baseline", "_cpu_cache_bytes")()
        if platform.machine() == "x86_64" and 2 * cache > (256 << 20):
            self.assertIn("CLFLUSHOPT, libmblast_evict", entry["timing"]["method"])
        else:
            self.assertIn("2x the largest CPU cache", entry["timing"]["method"])
        stored = read_json(path)["baselines"]
        self.assertEqual(sorted(stored), ["h200", "pocl-cpu"])  # the other target's entry is kept
        self.assertEqual(stored["h200"], {"eager": {"median_us": 1.0}})
        self.assertEqual(stored["pocl-cpu"]["eager"], entry["eager"])
        r = mblast("baseline", self.pdir, "--target", "rvv-qemu-256")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)
        self.assertIn("RISC-V", r.stderr)
        r = mblast("baseline", os.path.join(ROOT, "problems", "relu"), "--target", "pocl-cpu")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no model.py", r.stderr)


CHECK_EXPORT = os.path.join(ROOT, "tests", "python", "check_export.py")


@unittest.skipIf(SKIP is not None, SKIP or "")
class ExportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mblast_kb_export_")
        r = helper("import", os.path.join(FIXTURES, "linear_gelu.py"), "--out", cls.tmp)
        if r.returncode != 0:
            raise AssertionError(r.stderr)
        cls.pdir = os.path.join(cls.tmp, "linear_gelu")
        # torch caches extension builds by name; the name carries a digest of the sources
        build = os.path.join(ROOT, "build")
        cls.ext_dir = os.path.join(build if os.path.isdir(build) else cls.tmp, "torch_extensions_test")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def export(self, candidate, out, backend="opencl"):
        if have_mblast():
            return mblast("export", candidate, "--problem", self.pdir, "--format", "kernelbench", "--out", out)
        return helper("export", "--problem", self.pdir, "--candidate", candidate, "--backend", backend, "--out", out)

    def test_exported_opencl_file_matches_model_on_cpu(self):
        if not os.path.exists("/usr/include/CL/cl.h"):
            self.skipTest("no OpenCL headers here")
        if not os.path.isdir(os.path.join(os.path.dirname(torch.__file__), "include", "torch")):
            self.skipTest("torch's C++ headers are not installed (Debian: libtorch-dev)")
        if not opencl_device_here():
            self.skipTest("no OpenCL device here (clinfo -l lists none)")
        out = os.path.join(self.tmp, "linear_gelu_new.py")
        r = self.export(os.path.join(FIXTURES, "linear_gelu.opencl.cpp"), out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(out) as f:
            text = f.read()
        self.assertIn("class ModelNew(Model):", text)
        self.assertIn("def get_inputs():", text)
        self.assertIn("MBLAST_ABI_VERSION", text)  # the ABI header is inlined
        self.assertNotIn("#include <mblast/abi.h>", text)
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=self.ext_dir)
        r = subprocess.run(
            [sys.executable, CHECK_EXPORT, out, self.pdir, "cpu"],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
            cwd=self.tmp,
        )
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertTrue(res["ok"])
        self.assertEqual(res["sets"], 4)

    def test_export_refusals(self):
        out = os.path.join(self.tmp, "x.py")
        rvv = os.path.join(self.tmp, "naive.rvv.c")
        with open(rvv, "w") as f:
            f.write("int mblast_run(void) { return 0; }\n")
        if have_mblast():
            r = self.export(rvv, out)
            self.assertEqual(r.returncode, 2)
            self.assertIn("rvv candidate cannot be exported", r.stderr)
            r = mblast(
                "export",
                os.path.join(FIXTURES, "relu.opencl.cpp"),
                "--problem",
                os.path.join(ROOT, "problems", "relu"),
                "--format",
                "kernelbench",
                "--out",
                out,
            )
            self.assertEqual(r.returncode, 2)
            self.assertIn("no model.py", r.stderr)
        not_abi = os.path.join(self.tmp, "empty.opencl.cpp")
        with open(not_abi, "w") as f:
            f.write("int main() { return 0; }\n")
        r = helper("export", "--problem", self.pdir, "--candidate", not_abi, "--backend", "opencl", "--out", out)
        self.assertEqual(r.returncode, 2)
        self.assertIn("does not define mblast_run", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_cuda_export_is_well_formed(self):
        out = os.path.join(self.tmp, "cuda_new.py")
        cand = os.path.join(self.tmp, "naive.cuda.cu")
        with open(cand, "w") as f:
            f.write(
                '#include <mblast/abi.h>\nextern "C" int mblast_run(const mblast_context*, void*, '
                "const mblast_tensor*, int32_t, const mblast_tensor*, int32_t, mblast_tensor*, "
                "int32_t) { return 0; }\n"
            )
        r = self.export(cand, out, backend="cuda")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(out) as f:
            text = f.read()
        compile(text, out, "exec")
        self.assertIn('"backend": "cuda"', text)
        self.assertIn("getCurrentCUDAStream", text)


if __name__ == "__main__":
    unittest.main()
