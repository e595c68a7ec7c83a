"""Batched matrix multiply C[i] = A[i] @ B[i] for i in range(BATCH).

Op class: batched GEMM (torch.bmm).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, M, K, N = 128, 1024, 1024, 1024
elif SIZE == "small":
    BATCH, M, K, N = 8, 128, 96, 64
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
