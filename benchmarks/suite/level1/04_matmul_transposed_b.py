"""Matrix multiply with B stored transposed: C = A @ B^T, A is (M, K), B is (N, K).

Op class: GEMM ("NT" layout, the layout of nn.Linear weights).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    M, K, N = 4096, 8192, 4096
elif SIZE == "small":
    M, K, N = 128, 512, 384
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b.t())


def get_inputs():
    return [torch.randn(M, K), torch.randn(N, K)]


def get_init_inputs():
    return []
