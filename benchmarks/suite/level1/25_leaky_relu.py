"""Leaky ReLU activation: y = x if x >= 0 else slope * x.

Op class: elementwise activation (memory-bound, select).
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
NEGATIVE_SLOPE = 0.01


class Model(nn.Module):
    def __init__(self, negative_slope):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    # Uniform [0, 1): the negative branch is only reached by a signed variant.
    return [torch.rand(ROWS, COLS)]


def get_init_inputs():
    return [NEGATIVE_SLOPE]
