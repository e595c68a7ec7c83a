"""RMSNorm (written out) followed by a bias-free linear projection.

Op class: fused chain, row normalisation prologue + GEMM (the norm can be
folded into the GEMM's A-operand load).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    TOKENS, D_MODEL, D_OUT = 8192, 4096, 4096
elif SIZE == "small":
    TOKENS, D_MODEL, D_OUT = 128, 512, 384
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
EPS = 1e-6


class Model(nn.Module):
    def __init__(self, d_model, d_out, eps):
        super().__init__()
        self.eps = eps
        self.norm_weight = nn.Parameter(1.0 + 0.1 * torch.randn(d_model))
        self.proj = nn.Linear(d_model, d_out, bias=False)

    def forward(self, x):
        inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return self.proj(x * inv_rms * self.norm_weight)


def get_inputs():
    return [torch.randn(TOKENS, D_MODEL)]


def get_init_inputs():
    return [D_MODEL, D_OUT, EPS]
