"""`mblast optimize` on a user's own kernel with a spec beside it (issue 7, item 4).

The kernel's outputs on the target become the reference and its time the baseline: the test
optimizes tests/loop/fixtures/user_kernel/scale_rows.cpp on pocl-cpu, then checks the problem
directory mblast made (provenance, data of 3 seeds and 2 inits), that the kernel itself passes
`mblast eval` against it and a kernel without the bias does not, that a second run reuses the
directory, and that bad input gets one line and leaves nothing half-made: a malformed spec, a
missing spec, a kernel for another backend, one that does not compile, and one (rvv, under
QEMU) that leaves an element unwritten.

Run by CTest with MBLAST_BIN and MBLAST_HOME set.
"""

import glob
import json
import os
import shutil
import subprocess
import tempfile
import unittest

BIN = os.path.abspath(os.environ.get("MBLAST_BIN", "build/bin/mblast"))
HOME = os.environ.get("MBLAST_HOME", os.getcwd())
FIX = os.path.join(HOME, "tests", "loop", "fixtures", "user_kernel")

NO_BIAS = open(os.path.join(FIX, "scale_rows.cpp")).read().replace("x[i] * w[j] + b[j]", "x[i] * w[j]")

RVV_UNWRITTEN = r"""#include <mblast/abi.h>
int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* in, int32_t n_in,
               const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)ctx, (void)state, (void)par, (void)n_par, (void)n_in, (void)n_out;
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  size_t n = out[0].nbytes / sizeof(float);
  for (size_t i = 0; i + 1 < n; ++i) y[i] = 2.0f * x[i];  /* the last element is never written */
  return 0;
}
"""


class UserKernel(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mblast-user-kernel-")
        self.env = dict(
            os.environ,
            HOME=self.tmp,
            MBLAST_HOME=HOME,
            XDG_DATA_HOME=os.path.join(self.tmp, "data"),
            XDG_CACHE_HOME=os.path.join(self.tmp, "cache"),
            MBLAST_KB=os.path.join(self.tmp, "kb.sqlite"),
        )
        for k in ("MBLAST_LLM", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MBLAST_CACHE_DIR"):
            self.env.pop(k, None)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def mblast(self, *args, timeout=600):
        return subprocess.run([BIN, *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def user_dirs(self):
        return glob.glob(os.path.join(self.tmp, "**", "user", "*", "*", "problem.json"), recursive=True)

    def copy_fixture(self, kernel_text=None, spec=None, name="k.cpp"):
        kernel = os.path.join(self.tmp, name)
        with open(kernel, "w") as f:
            f.write(kernel_text if kernel_text is not None else open(os.path.join(FIX, "scale_rows.cpp")).read())
        spec_path = os.path.join(self.tmp, name.split(".")[0] + ".spec.json")
        with open(spec_path, "w") as f:
            f.write(spec if spec is not None else open(os.path.join(FIX, "scale_rows.spec.json")).read())
        return kernel, spec_path

    def test_kernel_becomes_the_reference_and_the_start(self):
        kernel = os.path.join(FIX, "scale_rows.cpp")
        r = self.mblast("optimize", kernel, "--target", "pocl-cpu", "--max-evals", "3", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(r.stdout)
        self.assertTrue(res["correct"])
        self.assertEqual(res["problem"], "scale_rows")
        run = json.load(open(os.path.join(res["run_dir"], "run.json")))
        self.assertEqual(os.path.abspath(run["start"]), kernel, "the user's kernel is not the start")
        self.assertGreaterEqual(res["speedup"], 1.0)
        self.assertGreater(res["evaluations"], 1, "the kernel's tunables were not tried")
        [pj] = self.user_dirs()
        problem = os.path.dirname(pj)
        meta = json.load(open(pj))
        self.assertEqual(meta["provenance"]["kind"], "user")
        self.assertEqual(os.path.basename(meta["provenance"]["source"]), "scale_rows.cpp")
        self.assertEqual([s["distribution"] for s in meta["seeds"]], ["uniform01", "signed_uniform", "normal"])
        self.assertEqual(meta["bytes"], (1024 * 1024 * 2 + 2 * 1024) * 4)
        data = sorted(os.listdir(os.path.join(problem, "data")))
        self.assertEqual(len([d for d in data if d.startswith("expected.")]), 6, data)
        # The reference is the kernel's output: the kernel passes against it, a kernel without
        # the bias is seen to be wrong.
        ok = self.mblast("eval", problem, kernel, "--target", "pocl-cpu", "--no-timing", "--json")
        self.assertTrue(json.loads(ok.stdout)["correct"], ok.stdout[-2000:])
        wrong, _ = self.copy_fixture(NO_BIAS, name="nobias.cpp")
        bad = json.loads(self.mblast("eval", problem, wrong, "--target", "pocl-cpu", "--no-timing", "--json").stdout)
        self.assertFalse(bad["correct"])
        self.assertEqual(bad["failure_kind"], "wrong_output")
        # The same kernel and spec again: the problem directory is reused, not made again.
        before = os.path.getmtime(os.path.join(problem, "data", "MANIFEST.json"))
        again = self.mblast("optimize", kernel, "--target", "pocl-cpu", "--max-evals", "1", "--json")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(os.path.getmtime(os.path.join(problem, "data", "MANIFEST.json")), before)
        self.assertEqual(len(self.user_dirs()), 1)

    def one_line_refusal(self, r, *fragments):
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        lines = r.stderr.strip().splitlines()
        # At most the line that says what is being done, then the reason on one line.
        self.assertLessEqual(len(lines), 2, r.stderr)
        for f in fragments:
            self.assertIn(f, lines[-1])
        self.assertEqual(self.user_dirs(), [], "a refused kernel left a problem directory behind")

    def test_malformed_and_missing_specs(self):
        kernel, spec = self.copy_fixture(spec='{"inputs": [{"name": "x", "dtype": "f32", "shape": [4]}], ')
        self.one_line_refusal(self.mblast("optimize", kernel, "--target", "pocl-cpu"), spec, "not valid JSON")
        with open(spec, "w") as f:
            json.dump(
                {
                    "inputs": [{"name": "x", "dtype": "f33", "shape": [4]}],
                    "outputs": [{"name": "y", "dtype": "f32", "shape": [4]}],
                },
                f,
            )
        self.one_line_refusal(self.mblast("optimize", kernel, "--target", "pocl-cpu"), spec, "unknown dtype 'f33'")
        with open(spec, "w") as f:
            json.dump({"inputs": [], "outputs": [], "shapes": 1}, f)
        self.one_line_refusal(self.mblast("optimize", kernel, "--target", "pocl-cpu"), "unknown key 'shapes'")
        os.remove(spec)
        self.one_line_refusal(self.mblast("optimize", kernel, "--target", "pocl-cpu"), "no spec at", "--spec")

    def test_kernel_for_another_backend_or_broken(self):
        kernel, _ = self.copy_fixture()
        self.one_line_refusal(self.mblast("optimize", kernel, "--target", "rvv-qemu-128"), "opencl kernel", "rvv")
        broken, _ = self.copy_fixture(
            kernel_text="#include <mblast/opencl_candidate.h>\nthis is not C++;\n", name="broken.cpp"
        )
        self.one_line_refusal(
            self.mblast("optimize", broken, "--target", "pocl-cpu"), "cannot be the reference", "build_failed"
        )

    def test_unwritten_element_cannot_be_the_reference(self):
        spec = json.dumps(
            {
                "inputs": [{"name": "x", "dtype": "f32", "shape": [64, 16]}],
                "outputs": [{"name": "y", "dtype": "f32", "shape": [64, 16]}],
            }
        )
        kernel, _ = self.copy_fixture(kernel_text=RVV_UNWRITTEN, spec=spec, name="twice.c")
        self.one_line_refusal(
            self.mblast("optimize", kernel, "--target", "rvv-qemu-128"),
            "cannot be the reference",
            "nan_or_inf",
            "[63, 15]",
        )


if __name__ == "__main__":
    unittest.main()
