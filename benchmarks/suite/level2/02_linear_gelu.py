"""Linear layer (x @ W^T + b) followed by exact GELU.

Op class: fused chain, GEMM + bias + transcendental epilogue (transformer MLP up-projection).
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    TOKENS, D_IN, D_OUT = 8192, 4096, 4096
elif SIZE == "small":
    TOKENS, D_IN, D_OUT = 128, 512, 384
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return F.gelu(self.fc(x))


def get_inputs():
    return [torch.randn(TOKENS, D_IN)]


def get_init_inputs():
    return [D_IN, D_OUT]
