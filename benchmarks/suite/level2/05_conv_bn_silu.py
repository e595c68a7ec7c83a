"""Conv2d (3x3, no bias) -> BatchNorm2d (inference, running stats) -> SiLU.

Op class: fused chain, convolution + per-channel affine (foldable into the
weights) + transcendental epilogue; the usual block of modern CNNs.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

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
        self.conv = nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        with torch.no_grad():
            self.bn.running_mean.copy_(0.1 * torch.randn(c_out))
            self.bn.running_var.copy_(0.5 + torch.rand(c_out))
            self.bn.weight.copy_(1.0 + 0.1 * torch.randn(c_out))
            self.bn.bias.copy_(0.1 * torch.randn(c_out))

    def forward(self, x):
        bn = self.bn
        y = self.conv(x)
        # Inference-mode batch norm regardless of the module's train/eval flag.
        y = F.batch_norm(
            y, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False, momentum=0.0, eps=bn.eps
        )
        return F.silu(y)


def get_inputs():
    return [torch.randn(BATCH, C_IN, H, W)]


def get_init_inputs():
    return [C_IN, C_OUT, KERNEL]
