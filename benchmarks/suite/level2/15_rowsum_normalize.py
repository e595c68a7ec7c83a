"""Normalise each row by its sum: out = x / x.sum(dim=-1, keepdim=True).

Op class: fused chain, row reduction + broadcast divide (memory-bound; two
passes over each row unless the row stays on chip).
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


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / x.sum(dim=-1, keepdim=True)


def get_inputs():
    # Positive entries (e.g. unnormalised weights), so row sums are far from zero.
    return [torch.rand(ROWS, COLS) + 0.01]


def get_init_inputs():
    return []
