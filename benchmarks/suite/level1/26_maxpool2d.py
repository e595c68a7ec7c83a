"""2D max pooling, kernel 3, stride 2, padding 1 (NCHW).

Op class: pooling (windowed max, overlapping windows, 4x fewer outputs than inputs).
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
KERNEL, STRIDE, PADDING = 3, 2, 1


class Model(nn.Module):
    def __init__(self, kernel, stride, padding):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, H, W)]


def get_init_inputs():
    return [KERNEL, STRIDE, PADDING]
