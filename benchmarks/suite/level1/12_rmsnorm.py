"""RMS normalisation, written out: y = x / sqrt(mean(x^2, last dim) + eps) * weight.

Op class: normalisation (one row reduction + elementwise). Written with basic
ops because nn.RMSNorm does not exist in older torch releases.
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    ROWS, HIDDEN = 16384, 8192
elif SIZE == "small":
    ROWS, HIDDEN = 512, 1024
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x):
        ms = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(ms + self.eps) * self.weight


def get_inputs():
    return [torch.randn(ROWS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, EPS]
