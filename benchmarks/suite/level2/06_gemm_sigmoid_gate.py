"""Swish-style gating after a GEMM: y = x @ W^T + b; out = y * sigmoid(beta * y).

Op class: fused chain, GEMM + bias + sigmoid + multiply epilogue
(beta is a plain-number constructor argument).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    TOKENS, D_IN, D_OUT = 8192, 4096, 4096
elif SIZE == "small":
    TOKENS, D_IN, D_OUT = 128, 512, 384
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
BETA = 1.702


class Model(nn.Module):
    def __init__(self, d_in, d_out, beta):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)
        self.beta = beta

    def forward(self, x):
        y = self.fc(x)
        return y * torch.sigmoid(self.beta * y)


def get_inputs():
    return [torch.randn(TOKENS, D_IN)]


def get_init_inputs():
    return [D_IN, D_OUT, BETA]
