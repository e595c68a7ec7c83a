"""Post-norm residual: LayerNorm(x @ W^T + b + residual).

Op class: fused chain, GEMM + bias + residual add + row normalisation
(the epilogue needs a whole output row).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    TOKENS, D_IN, D_MODEL = 8192, 4096, 4096
elif SIZE == "small":
    TOKENS, D_IN, D_MODEL = 128, 512, 384
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
EPS = 1e-5


class Model(nn.Module):
    def __init__(self, d_in, d_model, eps):
        super().__init__()
        self.fc = nn.Linear(d_in, d_model)
        self.norm = nn.LayerNorm(d_model, eps=eps)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(d_model))
            self.norm.bias.copy_(0.1 * torch.randn(d_model))

    def forward(self, x, residual):
        return self.norm(self.fc(x) + residual)


def get_inputs():
    return [torch.randn(TOKENS, D_IN), torch.randn(TOKENS, D_MODEL)]


def get_init_inputs():
    return [D_IN, D_MODEL, EPS]
