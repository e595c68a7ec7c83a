"""Mean over the last (contiguous) dimension: (ROWS, COLS) -> (ROWS,).

Op class: reduction (row-wise, innermost dimension).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    ROWS, COLS = 16384, 8192
elif SIZE == "small":
    ROWS, COLS = 512, 1024
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
DIM = -1


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.rand(ROWS, COLS)]


def get_init_inputs():
    return [DIM]
