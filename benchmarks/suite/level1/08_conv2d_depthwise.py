"""Depthwise 2D convolution (groups = channels), 3x3, stride 1, padding 1, with bias.

Op class: convolution with no channel reduction (memory-bound stencil).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, CHANNELS, H, W = 64, 512, 56, 56
elif SIZE == "small":
    BATCH, CHANNELS, H, W = 2, 32, 32, 32
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
KERNEL = 3


class Model(nn.Module):
    def __init__(self, channels, kernel):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel, padding=kernel // 2, groups=channels, bias=True)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, H, W)]


def get_init_inputs():
    return [CHANNELS, KERNEL]
