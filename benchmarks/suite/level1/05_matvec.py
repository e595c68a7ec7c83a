"""Matrix-vector product y = A @ x with A of shape (M, K) and x of shape (K, 1).

Op class: GEMV (memory-bound: every element of A is read once).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    M, K = 32768, 16384
elif SIZE == "small":
    M, K = 1024, 2048
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, x):
        return torch.matmul(a, x)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
