"""softmax(scale * (A @ B), dim=-1): scaled scores turned into row probabilities.

Op class: fused chain, GEMM + scalar multiply + row softmax epilogue.
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    M, K, N = 8192, 4096, 4096
elif SIZE == "small":
    M, K, N = 256, 512, 384
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
SCALE = 1.0 / (K**0.5)


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return torch.softmax(torch.matmul(a, b) * self.scale, dim=-1)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return [SCALE]
