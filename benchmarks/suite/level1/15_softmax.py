"""Softmax over the last dimension.

Op class: softmax (row max + exp + row sum + divide; numerically stabilised).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    ROWS, COLS = 8192, 16384
elif SIZE == "small":
    ROWS, COLS = 512, 1024
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    # Scaled so that the row maximum matters (plain exp would lose accuracy).
    return [4.0 * torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
