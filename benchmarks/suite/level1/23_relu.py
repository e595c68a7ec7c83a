"""ReLU activation: y = max(x, 0).

Op class: elementwise activation (memory-bound, pure data movement).
"""
import os

import torch
import torch.nn as nn

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
        return torch.relu(x)


def get_inputs():
    # Uniform [0, 1) input, as a layer after a positive op would see; an importer
    # should add a signed variant, since ReLU is the identity on this input.
    return [torch.rand(ROWS, COLS)]


def get_init_inputs():
    return []
