"""Index of the maximum along the last dimension: (ROWS, COLS) -> (ROWS,) int64.

Op class: reduction (arg-reduction, integer output).
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
        return torch.argmax(x, dim=self.dim)


def get_inputs():
    # Continuous random values: ties (which would make the index ambiguous) have
    # probability ~0.
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [DIM]
