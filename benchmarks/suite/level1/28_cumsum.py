"""Inclusive prefix sum (cumulative sum) along the last dimension.

Op class: scan (sequential dependence along the row; needs a parallel scan).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    ROWS, COLS = 4096, 32768
elif SIZE == "small":
    ROWS, COLS = 128, 4096
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
DIM = -1


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [DIM]
