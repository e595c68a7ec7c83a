"""Tall-skinny matrix multiply C = A @ B with A of shape (M, K), M >> K, N.

Op class: GEMM with a long M dimension and short K/N (tile shape and
occupancy matter more than in the square case).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    M, K, N = 262144, 1024, 256
elif SIZE == "small":
    M, K, N = 4096, 128, 64
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
