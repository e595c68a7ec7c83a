"""Conv2d (3x3, padding 1) with bias, followed by ReLU.

Op class: fused chain, convolution + elementwise epilogue.
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, C_IN, C_OUT, H, W = 32, 256, 256, 56, 56
elif SIZE == "small":
    BATCH, C_IN, C_OUT, H, W = 2, 16, 32, 32, 32
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
KERNEL = 3


class Model(nn.Module):
    def __init__(self, c_in, c_out, kernel):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2, bias=True)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    # Non-negative input, as the output of a previous ReLU layer would be.
    return [torch.rand(BATCH, C_IN, H, W)]


def get_init_inputs():
    return [C_IN, C_OUT, KERNEL]
