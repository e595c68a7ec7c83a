"""Tests of `mblast plan FILE.py` (docs/cli.md "plan"): will mblast handle a KernelBench-format
module? The file is traced at a size that fits --max-bytes, in a temporary folder.

Run from the repository root:  .venv/bin/python3 -m unittest -v tests/python/test_plan_file.py
Skips without torch for this interpreter or without build/bin/mblast ($MBLAST_BIN).
"""

import json
import os
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kernelbench import SKIP, have_mblast, mblast  # noqa: E402

# Sizes no CPU test machine could hold: 2^20 x 2^14 floats is 64 GiB per input.
BIG_POINTWISE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x, y):
        return torch.relu(x * 2.0 + y)

batch = 1048576
dim = 16384

def get_inputs():
    return [torch.randn(batch, dim), torch.randn(batch, dim)]

def get_init_inputs():
    return []
"""

# An op outside what the lowering handles today (a sort), beside one it does.
SORTS = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.sort(torch.tanh(x), dim=1).values

def get_inputs():
    return [torch.randn(64, 128)]

def get_init_inputs():
    return []
"""


@unittest.skipIf(SKIP is not None, SKIP or "")
@unittest.skipUnless(have_mblast(), "build/bin/mblast is not built")
class PlanPythonFile(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="mblast-plan-test-")
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))
        return path

    def plan(self, *args):
        r = mblast("plan", *args, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_a_module_too_big_to_run_is_traced_at_a_size_that_fits(self):
        f = self.write("big_pointwise.py", BIG_POINTWISE)
        scratch = os.path.join(self.tmp.name, "scratch")
        os.mkdir(scratch)
        old = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = scratch  # where the trace's temporary folder goes
        try:
            [e] = self.plan(f, "--target", "pocl-cpu", "--max-bytes", "4M")
        finally:
            if old is None:
                del os.environ["TMPDIR"]
            else:
                os.environ["TMPDIR"] = old
        self.assertNotEqual(e["kind"], "error", e.get("summary"))
        self.assertTrue(e["lowering"]["ok"], e["lowering"])
        self.assertGreaterEqual(len(e["lowering"]["kernels"]), 1)
        scaled = e["traced"]["scale"]["constants"]
        self.assertIn("batch", scaled)
        self.assertLess(scaled["batch"][1], scaled["batch"][0])
        self.assertLessEqual(e["traced"]["scale"]["bytes"], 4 * 1024 * 1024)
        # The temporary folder is gone: nothing of the trace is left behind.
        self.assertEqual(os.listdir(scratch), [])

    def test_an_op_it_cannot_lower_is_named_with_its_node(self):
        f = self.write("sorts.py", SORTS)
        [e] = self.plan(f, "--target", "pocl-cpu")
        self.assertFalse(e["lowering"]["ok"])
        self.assertIn("sort", e["lowering"]["reason"])
        self.assertIn("node", e["lowering"]["reason"])

    def test_bad_files_get_one_line_each(self):
        missing = os.path.join(self.tmp.name, "missing.py")
        broken = self.write("broken.py", "def (:\n")
        r = mblast("plan", missing, broken)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(len(lines), 2, r.stdout)
        self.assertIn("missing.py: error:", lines[0])
        self.assertIn("no such file", lines[0])
        self.assertIn("broken.py: error:", lines[1])
        self.assertIn("SyntaxError", lines[1])


if __name__ == "__main__":
    unittest.main()
