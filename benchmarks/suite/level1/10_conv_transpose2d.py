"""Transposed 2D convolution, kernel 4, stride 2, padding 1 (2x spatial upsampling).

Op class: convolution (transposed / fractionally strided, scatter-style access).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, C_IN, C_OUT, H, W = 32, 256, 128, 56, 56
elif SIZE == "small":
    BATCH, C_IN, C_OUT, H, W = 2, 32, 16, 16, 16
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
KERNEL, STRIDE, PADDING = 4, 2, 1


class Model(nn.Module):
    def __init__(self, c_in, c_out, kernel, stride, padding):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(c_in, c_out, kernel, stride=stride, padding=padding, bias=True)

    def forward(self, x):
        return self.deconv(x)


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_init_inputs():
    return [C_IN, C_OUT, KERNEL, STRIDE, PADDING]
