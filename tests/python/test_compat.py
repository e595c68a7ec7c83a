"""Tests of what the KernelBench tools define for an older torch (tools/kernelbench/compat.py) and
of the decompositions of their own that the ATen capture uses (tools/kernelbench/graph.py): each
against PyTorch's own function on random inputs, with reductions, thresholds and masks varied.

Run from the repository root:  .venv/bin/python3 -m unittest -v tests/python/test_compat.py
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools"))
try:
    import torch
    import torch.nn.functional as F

    from kernelbench import compat, graph

    SKIP = None
except ImportError as e:  # no torch in this interpreter
    SKIP = f"no torch: {e}"


@unittest.skipIf(SKIP, SKIP or "")
class OwnDecompositions(unittest.TestCase):
    def inputs(self, seed):
        g = torch.Generator().manual_seed(seed)
        # Differences on both sides of every threshold below.
        return torch.randn(64, 33, generator=g) * 2, torch.randn(64, 33, generator=g) * 2

    def test_smooth_l1_matches_torch(self):
        x, t = self.inputs(1)
        for reduction, code in (("none", 0), ("mean", 1), ("sum", 2)):
            for beta in (1.0, 0.3, 2.5, 0.0):
                want = F.smooth_l1_loss(x, t, reduction=reduction, beta=beta)
                got = graph._smooth_l1_loss(x, t, code, beta)
                torch.testing.assert_close(got, want, msg=f"{reduction}, beta {beta}")

    def test_huber_matches_torch(self):
        x, t = self.inputs(2)
        for reduction, code in (("none", 0), ("mean", 1), ("sum", 2)):
            for delta in (1.0, 0.4, 3.0):
                want = F.huber_loss(x, t, reduction=reduction, delta=delta)
                got = graph._huber_loss(x, t, code, delta)
                torch.testing.assert_close(got, want, msg=f"{reduction}, delta {delta}")

    def test_captured_graph_has_no_loss_op_left(self):
        class M(torch.nn.Module):
            def forward(self, a, b):
                return F.smooth_l1_loss(a, b) + F.huber_loss(a, b, delta=0.5)

        x, t = self.inputs(3)
        g, note = graph.trace_aten(M(), [x, t], ["in0", "in1"], [])
        self.assertIsNotNone(g, note)
        targets = {n["target"] for n in g["nodes"] if n["op"] == "call_function"}
        self.assertFalse([t for t in targets if "l1_loss" in t or "huber" in t], targets)


@unittest.skipIf(SKIP, SKIP or "")
class ModuleState(unittest.TestCase):
    def test_plain_tensor_attributes_become_buffers(self):
        from kernelbench import tensors

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)
                self.hidden = torch.randn(2, 4)
                self._private = torch.zeros(1)  # leading underscore: not state of the model

            def forward(self, x):
                self.hidden = torch.tanh(self.lin(x) + self.hidden)
                return self.hidden

        m = M()
        added = tensors.register_tensor_attributes(m)
        self.assertEqual(added, ["hidden"])
        self.assertIn("hidden", dict(m.named_buffers()))
        self.assertNotIn("_private", dict(m.named_buffers()))

    def test_lstm_weights_are_its_parameters_not_constants(self):
        m = torch.nn.LSTM(4, 6, num_layers=2, batch_first=True)
        names = [n for n, _ in m.named_parameters()]
        g, note = graph.trace_aten(m, [torch.randn(2, 3, 4)], ["in0"], names)
        self.assertIsNotNone(g, note)
        attrs = [n for n in g["nodes"] if n["op"] == "get_attr"]
        self.assertTrue(attrs)  # nn.LSTM reads its weights through _flat_weights
        for n in attrs:
            self.assertIn(n.get("tensor"), names, n)
            self.assertIn("shape", n)


@unittest.skipIf(SKIP, SKIP or "")
class ScaledDotProductAttention(unittest.TestCase):
    def test_matches_the_definition(self):
        g = torch.Generator().manual_seed(4)
        q, k, v = (torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
        k, v = k[:, :, :4], v[:, :, :4]  # S = 4 keys for L = 5 queries
        f = compat._scaled_dot_product_attention

        def ref(mask_add, scale):
            w = torch.einsum("bhld,bhsd->bhls", q, k) * scale + mask_add
            return torch.einsum("bhls,bhsd->bhld", torch.softmax(w, -1), v)

        torch.testing.assert_close(f(q, k, v), ref(0.0, 8**-0.5))
        torch.testing.assert_close(f(q, k, v, scale=0.1), ref(0.0, 0.1))
        causal = torch.full((5, 4), float("-inf"), dtype=torch.float64).triu(1)
        torch.testing.assert_close(f(q, k, v, is_causal=True), ref(causal, 8**-0.5))
        keep = torch.rand(5, 4, generator=g) > 0.3
        keep[:, 0] = True  # every query keeps a key
        as_add = torch.zeros(5, 4, dtype=torch.float64).masked_fill(~keep, float("-inf"))
        torch.testing.assert_close(f(q, k, v, attn_mask=keep), ref(as_add, 8**-0.5))
        bias = torch.randn(5, 4, generator=g, dtype=torch.float64)
        torch.testing.assert_close(f(q, k, v, attn_mask=bias), ref(bias, 8**-0.5))

    def test_matches_torch_where_torch_has_it(self):
        if compat._scaled_dot_product_attention is F.scaled_dot_product_attention:
            self.skipTest(f"torch {torch.__version__} has no scaled_dot_product_attention of its own")
        g = torch.Generator().manual_seed(5)
        q, k, v = (torch.randn(2, 4, 6, 8, generator=g) for _ in range(3))
        for causal in (False, True):
            torch.testing.assert_close(
                compat._scaled_dot_product_attention(q, k, v, is_causal=causal),
                F.scaled_dot_product_attention(q, k, v, is_causal=causal),
            )

    def test_install_never_replaces_torchs_own(self):
        before = F.scaled_dot_product_attention
        compat.install()
        self.assertIs(F.scaled_dot_product_attention, before)


if __name__ == "__main__":
    unittest.main()
