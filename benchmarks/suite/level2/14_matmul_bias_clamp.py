"""GEMM with a bias vector and clamping: out = clamp(A @ B + bias, lo, hi).

Op class: fused chain, GEMM + broadcast add + clamp epilogue
(lo and hi are plain-number constructor arguments).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    M, K, N = 4096, 4096, 4096
elif SIZE == "small":
    M, K, N = 256, 512, 384
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
CLAMP_MIN, CLAMP_MAX = -8.0, 8.0


class Model(nn.Module):
    def __init__(self, n, clamp_min, clamp_max):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n))
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, a, b):
        return torch.clamp(torch.matmul(a, b) + self.bias, self.clamp_min, self.clamp_max)


def get_inputs():
    # With K-long dot products of unit normals, roughly sqrt(K)-sized values, so
    # the clamp bounds are hit by a good share of the outputs.
    return [torch.randn(M, K), torch.randn(K, N) / 4.0]


def get_init_inputs():
    return [N, CLAMP_MIN, CLAMP_MAX]
