"""GroupNorm (with affine parameters) followed by SiLU, as in diffusion U-Net blocks.

Op class: fused chain, grouped normalisation + transcendental elementwise.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, CHANNELS, GROUPS, H, W = 64, 256, 32, 56, 56
elif SIZE == "small":
    BATCH, CHANNELS, GROUPS, H, W = 4, 32, 8, 28, 28
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
EPS = 1e-5


class Model(nn.Module):
    def __init__(self, groups, channels, eps):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=eps)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(channels))
            self.norm.bias.copy_(0.1 * torch.randn(channels))

    def forward(self, x):
        return F.silu(self.norm(x))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, H, W)]


def get_init_inputs():
    return [GROUPS, CHANNELS, EPS]
