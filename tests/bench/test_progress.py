"""The live progress line of `mblast bench` (include/mblast/progress.h): under a pseudo-terminal
its stderr carries the status line redrawn in place (\\r, erase to the end of the line) with the
problem's phases, and the plain result line; through a pipe only the plain line, no \\r; and
--json keeps stdout to the JSON alone in both cases.

One hand-made KernelBench file (written here) with a correct OpenCL candidate, on pocl-cpu.
Run from the repository root:  .venv/bin/python3 -m unittest -v tests/bench/test_progress.py
Skips without torch/safetensors, the mblast binary ($MBLAST_BIN, else build/bin/mblast) or pocl-cpu.
"""

import json
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MBLAST = os.environ.get("MBLAST_BIN") or os.path.join(ROOT, "build", "bin", "mblast")

PROBLEM = '''"""y = 2x + 1 on a vector (test of the live progress line)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return 2 * x + 1


def get_inputs():
    return [torch.rand(4096)]


def get_init_inputs():
    return []
'''

CANDIDATE = r"""#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void axpb(__global const float* x, __global float* y, const uint n) {
  const uint i = get_global_id(0);
  if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 0, n_out, 1)) return -1;
  const cl_uint n = static_cast<cl_uint>(out[0].nbytes / sizeof(float));
  const size_t global = (n + 63) / 64 * 64;
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(out[0].data), n);
}

MBLAST_OPENCL_CANDIDATE(kSource, "axpb", enqueue)
"""


def env():
    e = dict(os.environ, MBLAST_PYTHON=sys.executable, MBLAST_HOME=ROOT, TERM="xterm", COLUMNS="120")
    e.pop("MBLAST_BENCH_SIZE", None)
    return e


def skip_reason():
    try:
        import torch  # noqa: F401
        import safetensors  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return f"torch and safetensors are needed for {sys.executable}: {e}"
    if not os.access(MBLAST, os.X_OK):
        return f"{MBLAST} is not built"
    r = subprocess.run([MBLAST, "targets", "--json"], capture_output=True, text=True, env=env(), timeout=120)
    if r.returncode != 0 or not any(t["name"] == "pocl-cpu" and t.get("available") for t in json.loads(r.stdout)):
        return "the pocl-cpu target is not available here"
    return None


SKIP = skip_reason()


def run_on_pty(argv, timeout=600):
    """Runs ARGV with stderr on a pseudo-terminal and stdout on a pipe: (exit status, stdout, stderr bytes)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env())
    os.close(slave)
    err = b""
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            p.kill()
            raise AssertionError("mblast bench did not finish")
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal is gone
            break
        if not chunk:
            break
        err += chunk
    out = p.stdout.read()
    p.stdout.close()
    p.wait(timeout=60)
    os.close(master)
    return p.returncode, out, err


@unittest.skipIf(SKIP is not None, SKIP or "")
class BenchProgressTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mblast_progress_test_")
        cls.file = os.path.join(cls.tmp, "suite", "handmade", "axpb.py")
        os.makedirs(os.path.dirname(cls.file))
        with open(cls.file, "w", encoding="utf-8") as f:
            f.write(PROBLEM)
        cls.cands = os.path.join(cls.tmp, "candidates", "handmade")
        os.makedirs(cls.cands)
        with open(os.path.join(cls.cands, "axpb.opencl.cpp"), "w", encoding="utf-8") as f:
            f.write(CANDIDATE)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def bench(self, name, *extra):
        return [
            MBLAST,
            "bench",
            self.file,
            "--target",
            "pocl-cpu",
            "--candidates",
            os.path.dirname(self.cands),
            "--work",
            os.path.join(self.tmp, "work"),
            "--out",
            os.path.join(self.tmp, name + ".json"),
            "--no-compile",
            *extra,
        ]

    def test_terminal_gets_the_live_line(self):
        code, out, err = run_on_pty(self.bench("tty", "--json"))
        text = err.decode("utf-8", "replace")
        self.assertEqual(code, 0, text)
        self.assertEqual(json.loads(out)["problems"][0]["status"], "correct")  # stdout: the JSON alone
        self.assertIn("\r\x1b[K[0/1] handmade/axpb: import", text)
        # The phases the driver saw: the baseline, and at least one of the evaluation's own.
        self.assertIn("handmade/axpb: baseline", text)
        self.assertTrue(any(f"handmade/axpb: {p}," in text for p in ("build", "verify", "time")), text)
        # The result line is printed after the status line was cleared, never inside it.
        self.assertIn("\r\x1b[K[1/1] handmade/axpb: correct", text)
        for line in text.split("\n")[:-1]:  # every finished line: a status line, if any, was erased first
            last = line.rsplit("\r\x1b[K", 1)[-1]
            self.assertFalse(last.startswith("[0/1]"), f"a line was printed into the status line: {line!r}")

    def test_pipe_gets_plain_lines(self):
        r = subprocess.run(self.bench("pipe"), capture_output=True, env=env(), timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"\r", r.stderr)
        self.assertNotIn(b"\x1b[K", r.stderr)
        self.assertIn(b"[1/1] handmade/axpb: correct", r.stderr)
        r = subprocess.run(self.bench("pipe-json", "--json"), capture_output=True, env=env(), timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["problems"][0]["status"], "correct")

    def test_quiet_prints_no_progress_even_on_a_terminal(self):
        code, out, err = run_on_pty(self.bench("quiet", "--json", "--quiet"))
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["problems"][0]["status"], "correct")
        self.assertNotIn(b"[1/1]", err)
        self.assertNotIn(b"\r\x1b[K", err)


if __name__ == "__main__":
    unittest.main()
