"""GELU activation, exact (erf) form: y = x * Phi(x).

Op class: elementwise activation (memory-bound, transcendental).
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    ROWS, COLS = 16384, 8192
elif SIZE == "small":
    ROWS, COLS = 1024, 1024
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
