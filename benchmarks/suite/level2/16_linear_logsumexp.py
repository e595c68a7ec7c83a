"""Linear layer followed by a row-wise log-sum-exp: out = logsumexp(x @ W^T + b, dim=-1).

Op class: fused chain, GEMM + bias + row reduction epilogue (output is one
value per row; the GEMM output need never be written to memory).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    TOKENS, D_IN, D_OUT = 8192, 4096, 8192
elif SIZE == "small":
    TOKENS, D_IN, D_OUT = 128, 512, 384
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return torch.logsumexp(self.fc(x), dim=-1)


def get_inputs():
    return [torch.randn(TOKENS, D_IN)]


def get_init_inputs():
    return [D_IN, D_OUT]
