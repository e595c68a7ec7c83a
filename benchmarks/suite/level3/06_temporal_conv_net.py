"""Recurrence-free sequence classifier built from causal convolution blocks:
    block(x) = x + PW2(GELU(PW1(GroupNorm(DWConv_causal(x)))))
stacked BLOCKS times on (B, C, L), then mean over time and a linear head.
DWConv_causal is a depthwise Conv1d whose input is left-padded by (kernel - 1),
so each output step only sees past and present inputs.

Op class: whole model (depthwise 1D stencil, pad, normalisation, pointwise
(1x1) convolutions = GEMMs, GELU, residual adds, time reduction, GEMM head).
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, CHANNELS, LENGTH, CLASSES = 32, 512, 2048, 1000
elif SIZE == "small":
    BATCH, CHANNELS, LENGTH, CLASSES = 2, 32, 256, 10
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
BLOCKS, KERNEL, EXPANSION = 4, 7, 2


class CausalBlock(nn.Module):
    def __init__(self, channels, kernel, expansion):
        super().__init__()
        self.left_pad = kernel - 1
        self.dw = nn.Conv1d(channels, channels, kernel, groups=channels, bias=True)
        self.norm = nn.GroupNorm(1, channels)
        self.pw1 = nn.Conv1d(channels, expansion * channels, 1)
        self.pw2 = nn.Conv1d(expansion * channels, channels, 1)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(channels))
            self.norm.bias.copy_(0.1 * torch.randn(channels))

    def forward(self, x):
        h = self.dw(F.pad(x, (self.left_pad, 0)))
        h = self.pw2(F.gelu(self.pw1(self.norm(h))))
        return x + h


class Model(nn.Module):
    def __init__(self, channels, classes, blocks, kernel, expansion):
        super().__init__()
        self.blocks = nn.Sequential(*[CausalBlock(channels, kernel, expansion) for _ in range(blocks)])
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        h = self.blocks(x)
        return self.head(torch.mean(h, dim=-1))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_init_inputs():
    return [CHANNELS, CLASSES, BLOCKS, KERNEL, EXPANSION]
