"""Tests of `import kernelbench --max-bytes` (sizes that fit the target) and of int64 and bool
tensors end to end (docs/kernelbench.md "Sizes that fit the target", docs/problem-format.md).

Run from the repository root:  .venv/bin/python3 -m unittest -v tests/python/test_sizes_dtypes.py
Needs torch and safetensors; the KernelBench files are read from ../shared/kernelbench (or
$MBLAST_KERNELBENCH) and those tests skip without them; the `mblast eval` parts skip when
build/bin/mblast ($MBLAST_BIN) or the pocl-cpu target is missing.
"""

import hashlib
import json
import os
import shutil
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kernelbench import (
    FIXTURES,
    ROOT,
    SKIP,
    copy_fixtures,
    from_tools,
    helper,  # noqa: E402
    mblast,
    pocl_available,
    read_json,
)

KERNELBENCH = os.environ.get("MBLAST_KERNELBENCH") or os.path.join(os.path.dirname(ROOT), "shared", "kernelbench")

if SKIP is None:
    import torch
    from safetensors.torch import load_file


def run_reference(pdir):
    """Runs the problem's own model.py on its seed-0 inputs and init-0 parameters; returns
    (outputs, expected) as lists of tensors."""
    load = from_tools("kernelbench.tensors", "load_kernelbench_module")
    seed_all = from_tools("kernelbench.tensors", "seed_all")
    p = read_json(os.path.join(pdir, "problem.json"))
    path = os.path.join(pdir, "model.py")
    with open(path, "rb") as f:
        mod = load(path, f.read())
    seed_all(0)
    model = mod.Model(*mod.get_init_inputs())
    params = load_file(os.path.join(pdir, "data", "params.init0.safetensors"))
    named = dict(list(model.named_parameters()) + list(model.named_buffers()))
    with torch.no_grad():
        for d in p["parameters"]:
            named[d["name"]].copy_(params[d["name"]].reshape(named[d["name"]].shape))
    data = load_file(os.path.join(pdir, "data", "inputs.seed0.safetensors"))
    consts = {c["name"]: c["value"] for c in p.get("constants", [])}
    args = [consts[n] if n in consts else data[n] for n in p["arguments"]]
    with torch.no_grad():
        out = model(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    exp = load_file(os.path.join(pdir, "data", "expected.seed0.init0.safetensors"))
    return outs, [exp[d["name"]] for d in p["outputs"]], p


@unittest.skipIf(SKIP is not None, SKIP or "")
class ParseBytesTest(unittest.TestCase):
    def test_suffixes(self):
        parse = from_tools("kernelbench.sizes", "parse_bytes")
        self.assertEqual(parse("64M"), 64 << 20)
        self.assertEqual(parse("1G"), 1 << 30)
        self.assertEqual(parse("16MiB"), 16 << 20)
        self.assertEqual(parse("500k"), 500 << 10)
        self.assertEqual(parse("1048576"), 1 << 20)
        for bad in ("", "M", "-1M", "0", "12X", "1.5.2G"):
            with self.assertRaises(ValueError, msg=bad):
                parse(bad)


@unittest.skipIf(SKIP is not None, SKIP or "")
@unittest.skipUnless(os.path.isdir(os.path.join(KERNELBENCH, "level1")), f"no KernelBench at {KERNELBENCH}")
class MaxBytesKernelBenchTest(unittest.TestCase):
    """A matmul, a convolution, an attention block and a level-3 network, imported at 8M."""

    FILES = [
        "level1/1_Square_matrix_multiplication_.py",
        "level1/63_conv_standard_2D__square_input__square_kernel.py",
        "level3/44_MiniGPTBlock.py",
        "level3/4_LeNet5.py",
    ]
    N = 8 << 20

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mblast_sizes_test_")
        src = os.path.join(cls.tmp, "src")
        os.makedirs(src)
        for f in cls.FILES:
            shutil.copy(os.path.join(KERNELBENCH, f), src)
        cls.out = os.path.join(cls.tmp, "problems")
        cls.summary = os.path.join(cls.tmp, "summary.json")
        r = helper("import", src, "--out", cls.out, "--max-bytes", "8M", "--json-out", cls.summary)
        cls.result = r

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_every_file_fits_and_its_reference_runs(self):
        self.assertEqual(self.result.returncode, 0, self.result.stdout + self.result.stderr)
        summary = read_json(self.summary)
        self.assertEqual(summary["imported"], len(self.FILES))
        for f in self.FILES:
            stem = os.path.splitext(os.path.basename(f))[0]
            with self.subTest(stem):
                pdir = os.path.join(self.out, stem)
                outs, expected, p = run_reference(pdir)
                scale = p["scale"]
                self.assertEqual(scale["max_bytes"], self.N)
                self.assertLessEqual(p["bytes"], self.N)
                self.assertEqual(scale["bytes"], p["bytes"])
                self.assertTrue(scale["constants"], "the file's sizes exceed 8M: something must be scaled")
                for name, (was, now) in scale["constants"].items():
                    self.assertLess(now, was, name)
                # The recorded bytes are what the data holds.
                held = sum(
                    t.numel() * t.element_size()
                    for file in ("inputs.seed0", "params.init0", "expected.seed0.init0")
                    for t in load_file(os.path.join(pdir, "data", f"{file}.safetensors")).values()
                )
                self.assertEqual(held, p["bytes"])
                with open(os.path.join(pdir, "model.py"), encoding="utf-8") as fh:
                    self.assertIn("mblast import --max-bytes 8M", fh.read())
                with open(os.path.join(KERNELBENCH, f), "rb") as fh:  # the file's own bytes, not model.py's
                    self.assertEqual(p["provenance"]["sha256"], hashlib.sha256(fh.read()).hexdigest())
                for o, e in zip(outs, expected):
                    tol = p["tolerance"]["f32"]
                    self.assertTrue(torch.allclose(o.float(), e.float(), atol=tol["atol"], rtol=tol["rtol"]), stem)


@unittest.skipIf(SKIP is not None, SKIP or "")
class MaxBytesRuleTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mblast_sizes_rule_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))
        return path

    def test_heads_keep_dividing_and_equal_sizes_stay_equal(self):
        f = self.write(
            "heads.py",
            """
            import torch
            import torch.nn as nn

            class Model(nn.Module):
                def __init__(self, embed, heads, kernel):
                    super().__init__()
                    assert embed % heads == 0
                    self.heads = heads
                    self.proj = nn.Linear(embed, embed)
                    self.conv = nn.Conv2d(3, 4, kernel)

                def forward(self, x, img):
                    b, s, e = x.shape
                    y = self.proj(x).view(b, s, self.heads, e // self.heads).softmax(-1)
                    return y, self.conv(img)

            batch = 16
            seq = 256
            embed, heads = 384, 12
            height = width = 96
            kernel = 5

            def get_inputs():
                return [torch.rand(batch, seq, embed), torch.rand(batch, 3, height, width)]

            def get_init_inputs():
                return [embed, heads, kernel]
            """,
        )
        out = os.path.join(self.tmp, "out")
        r = helper("import", f, "--out", out, "--max-bytes", "256K")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        p = read_json(os.path.join(out, "heads", "problem.json"))
        self.assertLessEqual(p["bytes"], 256 << 10)
        sizes = {n: v[1] for n, v in p["scale"]["constants"].items()}
        embed = sizes.get("embed", 384)
        heads = sizes.get("heads", 12)
        self.assertEqual(embed % heads, 0)
        self.assertEqual(sizes.get("height"), sizes.get("width"))  # `height = width = 96`: one literal
        self.assertGreaterEqual(sizes.get("height", 96), sizes.get("kernel", 5))
        run_reference(os.path.join(out, "heads"))

    def test_batch_norm_keeps_enough_values_per_channel(self):
        # Halving the largest size first takes these images to 2x2: batch norm in training mode would
        # then normalise each channel over 8 values. A halving that leaves fewer than 16 is undone.
        f = self.write(
            "bn.py",
            """
            import torch
            import torch.nn as nn

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, 3, padding=1)
                    self.bn = nn.BatchNorm2d(8)

                def forward(self, x):
                    return torch.relu(self.bn(self.conv(x)))

            batch = 2
            size = 128

            def get_inputs():
                return [torch.rand(batch, 3, size, size)]

            def get_init_inputs():
                return []
            """,
        )
        out = os.path.join(self.tmp, "out")
        r = helper("import", f, "--out", out, "--max-bytes", "2K")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        p = read_json(os.path.join(out, "bn", "problem.json"))
        self.assertLessEqual(p["bytes"], 2 << 10)
        sizes = {n: v[1] for n, v in p["scale"]["constants"].items()}
        per_channel = sizes.get("batch", 2) * sizes.get("size", 128) ** 2
        self.assertGreaterEqual(per_channel, 16, p["scale"])
        self.assertIn("size", p["scale"]["kept"], p["scale"])
        self.assertIn("batch norm in training mode over", p["scale"]["kept"]["size"])
        run_reference(os.path.join(out, "bn"))

    def test_what_cannot_fit_says_why_in_one_line(self):
        f = self.write(
            "fixed.py",
            """
            import torch
            import torch.nn as nn

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(1024, 1024)  # 4 MiB of weights that no constant sizes

                def forward(self, x):
                    return self.fc(x)

            batch = 64

            def get_inputs():
                return [torch.rand(batch, 1024)]

            def get_init_inputs():
                return []
            """,
        )
        r = helper("import", f, "--out", os.path.join(self.tmp, "out"), "--max-bytes", "1M")
        self.assertEqual(r.returncode, 1)
        lines = [ln for ln in r.stderr.splitlines() if "fixed.py" in ln]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("--max-bytes 1M: cannot fit", lines[0])
        self.assertIn("no size constant", lines[0])
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "out", "fixed")))

    def test_a_file_that_fits_is_not_changed(self):
        src = copy_fixtures(os.path.join(self.tmp, "src"), ["relu.py"])
        out = os.path.join(self.tmp, "out")
        r = helper("import", src, "--out", out, "--max-bytes", "1G")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        p = read_json(os.path.join(out, "relu", "problem.json"))
        self.assertEqual(p["scale"]["constants"], {})
        with open(os.path.join(FIXTURES, "relu.py"), "rb") as a, open(os.path.join(out, "relu", "model.py"), "rb") as b:
            self.assertEqual(a.read(), b.read())


@unittest.skipIf(SKIP is not None, SKIP or "")
class IntegerAndBoolTest(unittest.TestCase):
    """An int64 index input and a bool mask in; f32, bool and int64 out."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mblast_dtypes_test_")
        src = copy_fixtures(os.path.join(cls.tmp, "src"), ["gather_mask.py"])
        cls.out = os.path.join(cls.tmp, "problems")
        r = helper("import", src, "--out", cls.out)
        if r.returncode != 0:
            raise AssertionError(f"import failed ({r.returncode}): {r.stdout}{r.stderr}")
        cls.pdir = os.path.join(cls.out, "gather_mask")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_problem_and_data_carry_the_dtypes(self):
        p = read_json(os.path.join(self.pdir, "problem.json"))
        self.assertEqual([d["dtype"] for d in p["inputs"]], ["f32", "i64", "bool"])
        self.assertEqual([d["dtype"] for d in p["outputs"]], ["f32", "bool", "i64"])
        self.assertNotIn("torch_dtype", json.dumps(p["inputs"] + p["outputs"]))
        self.assertEqual(p["tolerance"].keys(), {"f32"})  # integers and bools are exact
        for s in (0, 1, 2):
            data = load_file(os.path.join(self.pdir, "data", f"inputs.seed{s}.safetensors"))
            self.assertEqual(data["in1"].dtype, torch.int64)
            self.assertEqual(data["in2"].dtype, torch.bool)
            exp = load_file(os.path.join(self.pdir, "data", f"expected.seed{s}.init0.safetensors"))
            self.assertEqual(exp["out1"].dtype, torch.bool)
            self.assertEqual(exp["out2"].dtype, torch.int64)
        outs, expected, _ = run_reference(self.pdir)
        for o, e in zip(outs, expected):
            self.assertTrue(torch.equal(o, e))

    def candidate(self, **defines):
        with open(os.path.join(FIXTURES, "gather_mask.opencl.cpp"), encoding="utf-8") as f:
            text = f.read()
        for name, value in defines.items():
            old = next(ln for ln in text.splitlines() if ln.startswith(f"#define {name} "))
            text = text.replace(old, f"#define {name} {value}")
        path = os.path.join(self.tmp, "c_" + "_".join(defines) + ".opencl.cpp")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    @unittest.skipUnless(pocl_available(), "mblast or the pocl-cpu target is not available here")
    def test_naive_candidate_is_correct_and_timed(self):
        r = mblast(
            "eval",
            self.pdir,
            os.path.join(FIXTURES, "gather_mask.opencl.cpp"),
            "--target",
            "pocl-cpu",
            "--json",
            "--min-time",
            "0.05",
        )
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        res = json.loads(r.stdout)
        self.assertTrue(res["correct"], res.get("reason"))
        self.assertGreater(res["time"]["median"], 0)

    @unittest.skipUnless(pocl_available(), "mblast or the pocl-cpu target is not available here")
    def test_wrong_candidates_are_seen(self):
        cases = {
            "PICK": ("((j + 1) % cols)", "out0"),  # gathers the neighbour
            "TRUE_BYTE": ("2", "out1"),  # a true that is not 1
            "ONE": ("0", "out2"),  # an integer off by one
        }
        for name, (value, output) in cases.items():
            with self.subTest(name):
                r = mblast(
                    "eval", self.pdir, self.candidate(**{name: value}), "--target", "pocl-cpu", "--json", "--no-timing"
                )
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                res = json.loads(r.stdout)
                self.assertFalse(res["correct"])
                self.assertEqual(res["failure_kind"], "wrong_output", res["reason"])
                self.assertIn(f"'{output}'", res["reason"])


if __name__ == "__main__":
    unittest.main()
