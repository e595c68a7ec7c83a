"""Conv2d (3x3, padding 1, bias) -> MaxPool2d (2x2, stride 2) -> ReLU.

Op class: fused chain, convolution + windowed reduction + elementwise
(the pooling epilogue changes the output shape of the convolution).
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
KERNEL, POOL = 3, 2


class Model(nn.Module):
    def __init__(self, c_in, c_out, kernel, pool):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2, bias=True)
        self.pool = nn.MaxPool2d(pool, stride=pool)

    def forward(self, x):
        return torch.relu(self.pool(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_init_inputs():
    return [C_IN, C_OUT, KERNEL, POOL]
