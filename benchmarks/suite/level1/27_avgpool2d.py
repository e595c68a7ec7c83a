"""2D average pooling, kernel 2, stride 2, no padding (NCHW).

Op class: pooling (windowed mean, non-overlapping windows).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, CHANNELS, H, W = 32, 256, 112, 112
elif SIZE == "small":
    BATCH, CHANNELS, H, W = 4, 16, 32, 32
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
KERNEL, STRIDE = 2, 2


class Model(nn.Module):
    def __init__(self, kernel, stride):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel, stride=stride)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.rand(BATCH, CHANNELS, H, W)]


def get_init_inputs():
    return [KERNEL, STRIDE]
