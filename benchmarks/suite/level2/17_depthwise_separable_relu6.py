"""Depthwise-separable convolution: depthwise 3x3 -> ReLU6 -> pointwise 1x1 -> ReLU6.

Op class: fused chain, stencil convolution + clamp + channel GEMM + clamp
(MobileNet-style block; the depthwise output can stay on chip).
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, C_IN, C_OUT, H, W = 64, 256, 256, 56, 56
elif SIZE == "small":
    BATCH, C_IN, C_OUT, H, W = 2, 32, 64, 28, 28
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
KERNEL = 3


class Model(nn.Module):
    def __init__(self, c_in, c_out, kernel):
        super().__init__()
        self.depthwise = nn.Conv2d(c_in, c_in, kernel, padding=kernel // 2, groups=c_in, bias=True)
        self.pointwise = nn.Conv2d(c_in, c_out, 1, bias=True)

    def forward(self, x):
        y = F.relu6(self.depthwise(x))
        return F.relu6(self.pointwise(y))


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_init_inputs():
    return [C_IN, C_OUT, KERNEL]
