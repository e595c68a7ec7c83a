"""Elementwise chain on three tensors: out = tanh((x + y) * z) + x.

Op class: fused chain, pure elementwise (memory-bound; fusion saves the
intermediate round trips to memory).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    ROWS, COLS = 8192, 8192
elif SIZE == "small":
    ROWS, COLS = 512, 1024
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        return torch.tanh((x + y) * z) + x


def get_inputs():
    return [torch.randn(ROWS, COLS), torch.randn(ROWS, COLS), torch.rand(ROWS, COLS)]


def get_init_inputs():
    return []
