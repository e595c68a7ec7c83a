"""mblast optimize-model and run-model end to end on pocl-cpu (issue 40).

Each test writes its model, runs `mblast optimize-model` with a KB file of its own, checks the
folder it writes (plan, per-group times, report, kernels), runs the folder with `mblast run-model`
on the stored inputs and on new ones, and compares the outputs with PyTorch's own forward pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MBLAST = os.environ.get("MBLAST_BIN") or os.path.join(ROOT, "build", "bin", "mblast")
CHECK_EXPORT = os.path.join(ROOT, "tests", "python", "check_export.py")
WORK = os.environ.get("MBLAST_TEST_WORK") or os.path.join(ROOT, "build", "tests", "model", "work")

CNN = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """A small CNN block: conv, batch norm, ReLU, max pool, conv, ReLU, global average pool, linear."""
    def __init__(self, c_in, c_mid, n_out):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_mid, 3, padding=1)
        self.bn = nn.BatchNorm2d(c_mid)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(c_mid, c_mid, 3, padding=1)
        self.fc = nn.Linear(c_mid, n_out)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv1(x))))
        x = torch.relu(self.conv2(x))
        x = torch.mean(x, dim=(2, 3))
        return self.fc(x)

batch_size = 2
def get_inputs():
    return [torch.randn(batch_size, 3, 16, 16)]

def get_init_inputs():
    return [3, 8, 10]
'''

MLP = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """A three-layer MLP with ReLU and a final erfc, an op the planner has no op class for."""
    def __init__(self, d_in, d_hidden, d_out):
        super().__init__()
        self.l1 = nn.Linear(d_in, d_hidden)
        self.l2 = nn.Linear(d_hidden, d_hidden)
        self.l3 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return torch.special.erfc(self.l3(torch.relu(self.l2(torch.relu(self.l1(x))))))

batch_size = 8
def get_inputs():
    return [torch.randn(batch_size, 32)]

def get_init_inputs():
    return [32, 64, 10]
'''


# A group candidate that writes zeros over its outputs (OpenCL): stitched in, the model must fail.
ZEROS = r"""
#include <mblast/abi.h>
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor*, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t n_out) {
  const float zero = 0.0f;
  for (int i = 0; i < n_out; ++i)
    if (clEnqueueFillBuffer(static_cast<cl_command_queue>(ctx->cl_queue), static_cast<cl_mem>(out[i].data), &zero,
                            sizeof zero, 0, out[i].nbytes, 0, nullptr, nullptr) != CL_SUCCESS)
      return 1;
  return 0;
}
"""

# The same in C (RVV), with file-scope names of its own that the generic model's file has too.
ZEROS_C = r"""
#include <mblast/abi.h>
#include <string.h>

static char g_err[8];
const char* mblast_last_error(void) { return g_err; }
int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in, const mblast_tensor* par,
               int32_t n_par, mblast_tensor* out, int32_t n_out) {
  int i;
  (void)ctx, (void)state, (void)in, (void)n_in, (void)par, (void)n_par;
  for (i = 0; i < n_out; ++i) memset(out[i].data, 0, out[i].nbytes);
  return 0;
}
"""


def mblast(*args, timeout=1100):
    env = dict(os.environ)
    env.setdefault("MBLAST_HOME", ROOT)
    return subprocess.run([MBLAST, *args], capture_output=True, text=True, env=env, timeout=timeout)


def fresh(name: str) -> str:
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def torch_outputs(folder: str, inputs_file: str):
    """The original module's forward on the inputs of `inputs_file`, with the parameters the
    optimized model was verified with (init 0 of the imported problem)."""
    import torch
    from safetensors.torch import load_file

    plan = json.load(open(os.path.join(folder, "plan.json")))
    pdir = os.path.join(folder, plan["model"]["problem"])
    problem = json.load(open(os.path.join(pdir, "problem.json")))
    ns: dict = {}
    exec(compile(open(os.path.join(pdir, "model.py")).read(), "model.py", "exec"), ns)
    model = ns["Model"](*ns["get_init_inputs"]())
    params = load_file(os.path.join(pdir, "data", "params.init0.safetensors"))
    state = model.state_dict()
    for spec in problem["parameters"]:
        key = spec["name"]
        if key not in state:
            raise AssertionError(f"parameter {key} is not in the module's state_dict {sorted(state)}")
        state[key] = params[key]
    model.load_state_dict(state)
    ins = load_file(inputs_file)
    with torch.no_grad():
        out = model(*[ins[s["name"]] for s in problem["inputs"]])
    outs = out if isinstance(out, (tuple, list)) else [out]
    return {s["name"]: o for s, o in zip(problem["outputs"], outs)}


@unittest.skipUnless(os.path.exists(MBLAST), "mblast is not built")
class ModelTest(unittest.TestCase):
    def optimize(self, name: str, source: str, target: str, extra=(), evals="2", folder=None):
        d = folder or fresh(name)
        model = os.path.join(d, name + ".py")
        with open(model, "w") as f:
            f.write(source)
        out = os.path.join(d, "out.mblast" if folder is None else name + ".mblast")
        kb = os.path.join(d, "kb.sqlite")
        r = mblast("optimize-model", model, "--target", target, "--out", out, "--kb", kb, "--evals", evals, *extra)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return d, out, kb, r.stdout

    def check_folder(self, out: str, ext: str = ".opencl.cpp"):
        plan = json.load(open(os.path.join(out, "plan.json")))
        self.assertTrue(plan["end_to_end"]["correct"], plan["end_to_end"])
        self.assertGreater(len(plan["groups"]), 1)
        shares = 0.0
        for g in plan["groups"]:
            self.assertIn(
                g["kind"], {"conv", "matmul", "pooling", "norm", "softmax", "reduction", "elementwise", "data_movement"}
            )
            self.assertTrue(g["writes"])
            self.assertIsInstance(g["before"], float, g)  # every group timed alone
            self.assertGreater(g["before"], 0)
            self.assertTrue(os.path.exists(os.path.join(out, "kernels", "groups", g["name"] + ext)))
            self.assertIn("knowledge", g)
            shares += g["share"]
        self.assertAlmostEqual(shares, 1.0, places=6)
        self.assertTrue(os.path.exists(os.path.join(out, "kernels", "model" + ext)))
        report = open(os.path.join(out, "report.md")).read()
        for g in plan["groups"]:
            self.assertIn(g["name"], report)
        self.assertFalse(os.path.exists(os.path.join(out, "work")))
        return plan

    def run_and_compare(self, out: str, plan: dict, target: str = "pocl-cpu"):
        import torch
        from safetensors.torch import load_file, save_file

        pdir = os.path.join(out, plan["model"]["problem"])
        problem = json.load(open(os.path.join(pdir, "problem.json")))
        tol = problem["tolerance"]["f32"]
        # The stored inputs of seed 0, then new ones the model has never seen.
        stored = os.path.join(pdir, "data", "inputs.seed%d.safetensors" % problem["seeds"][0]["seed"])
        new = os.path.join(out, "..", "new_inputs.safetensors")
        g = torch.Generator().manual_seed(1234)
        save_file({s["name"]: torch.randn(*s["shape"], generator=g) * 2 for s in problem["inputs"]}, new)
        for inputs in (stored, new):
            got_file = os.path.join(out, "..", "got.safetensors")
            r = mblast("run-model", out, "--target", target, "--inputs", inputs, "--out", got_file)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            got = load_file(got_file)
            want = torch_outputs(out, inputs)
            for name, w in want.items():
                self.assertIn(name, got)
                err = (got[name].double() - w.double()).abs()
                bound = tol["atol"] + tol["rtol"] * w.double().abs()
                self.assertTrue(bool((err <= bound * 4).all()), f"{name}: max error {float(err.max())}")

    def test_cnn(self):
        d, out, kb, stdout = self.optimize("cnn", CNN, "cpu")
        self.assertIn("target: pocl-cpu", stdout)  # the family name resolved, and said so
        plan = self.check_folder(out)
        kinds = {g["kind"] for g in plan["groups"]}
        self.assertIn("conv", kinds)
        self.run_and_compare(out, plan)
        # The PyTorch module in place of the original: ModelNew against Model, KernelBench's way.
        self.assertIn("file", plan["module"], plan["module"])
        module = os.path.join(out, plan["module"]["file"])
        pdir = os.path.join(out, plan["model"]["problem"])
        r = subprocess.run(
            [sys.executable, CHECK_EXPORT, module, pdir, "cpu"], capture_output=True, text=True, timeout=900
        )
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("`" + plan["module"]["file"] + "`", open(os.path.join(out, "report.md")).read())
        r = mblast("kb", "query", "--level", "model", "--kb", kb, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = json.loads(r.stdout)["experiences"]
        self.assertEqual(len(rows), len(plan["groups"]) + 1)
        self.assertTrue(any(x["decision"] == "end-to-end" and x["correct"] for x in rows))

    def test_mlp(self):
        d, out, kb, stdout = self.optimize("mlp", MLP, "pocl-cpu")
        plan = self.check_folder(out)
        self.assertIn("erfc", plan["unknown_ops"])  # listed, and still run through the generic lowering
        self.assertIn("matmul", {g["kind"] for g in plan["groups"]})
        self.assertIsInstance(plan["end_to_end"].get("speedup_vs_eager"), float, plan["end_to_end"])
        self.run_and_compare(out, plan)

    def test_onnx(self):
        # An ONNX file exported by torch with a symbolic batch dimension: read by mblast's own ONNX
        # reader (checked against onnxruntime first), optimized, verified, and timed against
        # onnxruntime as well as eager.
        import torch

        d = fresh("onnx")
        ns: dict = {}
        exec(compile(CNN, "cnn", "exec"), ns)
        model = ns["Model"](*ns["get_init_inputs"]()).eval()
        (x,) = ns["get_inputs"]()
        path = os.path.join(d, "cnn.onnx")
        torch.onnx.export(
            model, (x,), path, input_names=["image"], output_names=["logits"], dynamic_axes={"image": {0: "batch"}}
        )
        out = os.path.join(d, "cnn.mblast")
        common = ["--target", "pocl-cpu", "--kb", os.path.join(d, "kb.sqlite"), "--evals", "1"]
        r = mblast("optimize-model", path, "--out", out, *common)  # the batch is symbolic: one line
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("--input-shape image=", r.stderr)
        self.assertFalse(os.path.exists(out))
        shape = "image=" + "x".join(str(v) for v in x.shape)
        r = mblast("optimize-model", path, "--out", out, "--input-shape", shape, *common)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        plan = self.check_folder(out)
        e2e = plan["end_to_end"]
        self.assertTrue(e2e["onnxruntime_check"]["ok"], e2e["onnxruntime_check"])
        self.assertIsInstance(e2e.get("onnxruntime_us"), float, e2e)
        self.assertIsInstance(e2e.get("speedup_vs_onnxruntime"), float, e2e)
        self.assertIn("conv", {g["kind"] for g in plan["groups"]})
        self.assertIn("onnxruntime", open(os.path.join(out, "report.md")).read())
        self.run_and_compare(out, plan)

    def test_mlp_rvv(self):
        # The same model on RVV under QEMU: the lowering's C dialect, timed in instruction counts.
        targets = mblast("targets").stdout
        if "rvv-qemu-256" not in targets:
            self.skipTest("rvv-qemu-256 is not a target here")
        d, out, kb, stdout = self.optimize("mlp_rvv", MLP, "rvv-qemu-256")
        plan = self.check_folder(out, ".rvv.c")
        self.assertIn("matmul", {g["kind"] for g in plan["groups"]})
        self.assertEqual(plan["end_to_end"]["unit"], "instructions", plan["end_to_end"])
        self.run_and_compare(out, plan, "rvv-qemu-256")

    def stitch(self, name: str, source: str, target: str, ext: str, zeros_source: str) -> tuple:
        # A group's own candidate inside the model's kernel (--stitch GROUP=FILE, as the group
        # loops' winners are stitched): the group's generic candidate verifies in place; one that
        # writes zeros makes the model fail, so the stitched code is what ran.
        d, out, kb, _ = self.optimize(name, source, target, evals="0", extra=("--no-baseline",))
        plan = json.load(open(os.path.join(out, "plan.json")))
        last = [g for g in plan["groups"] if g["writes"].startswith("out")][0]["name"]
        first = plan["groups"][0]["name"]
        own = os.path.join(d, "own" + ext)
        shutil.copy(os.path.join(out, "kernels", "groups", first + ext), own)
        zeros = os.path.join(d, "zeros" + ext)
        with open(zeros, "w") as f:
            f.write(zeros_source)
        _, out2, _, _ = self.optimize(
            name + "_own", source, target, evals="0", folder=d, extra=("--no-baseline", "--stitch", first + "=" + own)
        )
        e2e = json.load(open(os.path.join(out2, "plan.json")))["end_to_end"]
        self.assertEqual(e2e["stitched"]["groups"], [first], e2e)
        self.assertTrue(e2e["stitched"]["correct"], e2e["stitched"])
        self.assertTrue(e2e["correct"], e2e)
        self.assertTrue(os.path.exists(os.path.join(out2, "kernels", "model_stitched" + ext)))
        _, out3, _, _ = self.optimize(
            name + "_zeros",
            source,
            target,
            evals="0",
            folder=d,
            extra=("--no-baseline", "--stitch", last + "=" + zeros),
        )
        e2e = json.load(open(os.path.join(out3, "plan.json")))["end_to_end"]
        self.assertFalse(e2e["stitched"]["correct"], e2e["stitched"])
        self.assertIn("not kept: wrong_output", e2e["stitched"]["note"])
        self.assertTrue(e2e["correct"], e2e)  # the generic model, kept
        self.assertIn("lower.generic", e2e["origin"])
        return d, kb, own

    def test_stitch(self):
        d, kb, own = self.stitch("stitch", CNN, "pocl-cpu", ".opencl.cpp", ZEROS)
        r = mblast(
            "optimize-model",
            os.path.join(d, "stitch.py"),
            "--target",
            "pocl-cpu",
            "--out",
            os.path.join(d, "x"),
            "--kb",
            kb,
            "--stitch",
            "no_such_group=" + own,
        )
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("the plan has no group no_such_group", r.stderr)
        self.assertLessEqual(len(r.stderr.strip().splitlines()), 2, r.stderr)

    def test_stitch_rvv(self):
        # The C dialect: each group's file-scope names renamed instead of a namespace.
        if "rvv-qemu-256" not in mblast("targets").stdout:
            self.skipTest("rvv-qemu-256 is not a target here")
        self.stitch("stitch_rvv", MLP, "rvv-qemu-256", ".rvv.c", ZEROS_C)

    def test_bad_input(self):
        d = fresh("bad")

        def one_line_failure(path, *extra, expect=None):
            r = mblast(
                "optimize-model",
                path,
                "--target",
                "pocl-cpu",
                "--out",
                os.path.join(d, "o"),
                "--kb",
                os.path.join(d, "kb.sqlite"),
                *extra,
            )
            self.assertNotEqual(r.returncode, 0, r.stdout)
            lines = [x for x in r.stderr.splitlines() if x.strip()]
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn(os.path.basename(path), lines[0])
            if expect:
                self.assertIn(expect, lines[0])
            self.assertFalse(os.path.exists(os.path.join(d, "o")))  # nothing half-written
            return lines[0]

        onnx = os.path.join(d, "m.onnx")
        open(onnx, "wb").write(b"\x08\x07")
        one_line_failure(onnx, expect="ONNX")
        pt = os.path.join(d, "m.pt")
        open(pt, "wb").write(os.urandom(64))
        one_line_failure(pt, "--input-shape", "x=1x4", expect="TorchScript")
        # A real TorchScript file: make_fx traces its weights as constants, which are the wrapper's
        # parameters (the same storage): it optimizes end to end. Without --input-shape, one line.
        import torch

        ts = os.path.join(d, "scripted.pt")
        torch.jit.save(torch.jit.script(torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU())), ts)
        r = mblast(
            "optimize-model",
            ts,
            "--input-shape",
            "x=8x64",
            "--target",
            "pocl-cpu",
            "--out",
            os.path.join(d, "scripted.mblast"),
            "--kb",
            os.path.join(d, "kb.sqlite"),
            "--evals",
            "0",
            "--no-baseline",
        )
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        plan = json.load(open(os.path.join(d, "scripted.mblast", "plan.json")))
        self.assertTrue(plan["end_to_end"]["correct"], plan["end_to_end"])
        one_line_failure(ts, expect="--input-shape")
        no_model = os.path.join(d, "no_model.py")
        open(no_model, "w").write("import torch\ndef get_inputs():\n    return []\n")
        one_line_failure(no_model, expect="no class Model")
        broken = os.path.join(d, "broken.py")
        open(broken, "w").write(
            "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x)\n        return x\n"
            "def get_inputs():\n    return []\n"
        )
        one_line_failure(broken)
        fft = os.path.join(d, "fft.py")
        open(fft, "w").write(
            "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
            "        return torch.fft.rfft(x).abs()\n"
            "def get_inputs():\n    return [torch.randn(4, 16)]\ndef get_init_inputs():\n    return []\n"
        )
        one_line_failure(fft, expect="fft")
        # A family with no reachable target here: one line, non-zero.
        r = mblast("optimize-model", fft, "--target", "adreno", "--out", os.path.join(d, "o"))
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len([x for x in r.stderr.splitlines() if x.strip()]), 1, r.stderr)
        self.assertIn("adreno", r.stderr)
        # run-model on a folder that is not one.
        os.makedirs(os.path.join(d, "notmodel"), exist_ok=True)
        r = mblast("run-model", os.path.join(d, "notmodel"), "--target", "pocl-cpu")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("plan.json", r.stderr)


if __name__ == "__main__":
    unittest.main()
