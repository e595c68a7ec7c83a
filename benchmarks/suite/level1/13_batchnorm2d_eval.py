"""2D batch normalisation in inference mode: per-channel affine map from running statistics.

Op class: normalisation (eval BatchNorm = per-channel scale + shift, memory-bound).
The forward always uses the running statistics (training=False), whatever mode
the module is in, so the result does not depend on .train()/.eval().
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, CHANNELS, H, W = 64, 256, 56, 56
elif SIZE == "small":
    BATCH, CHANNELS, H, W = 4, 32, 28, 28
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
EPS = 1e-5


class Model(nn.Module):
    def __init__(self, channels, eps):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels, eps=eps)
        # Running statistics and affine parameters as after some training.
        with torch.no_grad():
            self.bn.running_mean.copy_(0.2 * torch.randn(channels))
            self.bn.running_var.copy_(0.5 + torch.rand(channels))
            self.bn.weight.copy_(1.0 + 0.1 * torch.randn(channels))
            self.bn.bias.copy_(0.1 * torch.randn(channels))

    def forward(self, x):
        bn = self.bn
        return F.batch_norm(
            x, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False, momentum=0.0, eps=bn.eps
        )


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, H, W)]


def get_init_inputs():
    return [CHANNELS, EPS]
