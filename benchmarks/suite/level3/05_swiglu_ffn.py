"""Pre-norm SwiGLU feed-forward block with residual (LLaMA-style):
    y = x + W_down( SiLU(W_gate(RMSNorm(x))) * W_up(RMSNorm(x)) )
RMSNorm is written out; all projections are bias-free.

Op class: whole model (row normalisation, three GEMMs, gated elementwise product,
residual add).
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    TOKENS, D_MODEL, HIDDEN = 8192, 2048, 5632
elif SIZE == "small":
    TOKENS, D_MODEL, HIDDEN = 64, 256, 512
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
EPS = 1e-6


class Model(nn.Module):
    def __init__(self, d_model, hidden, eps):
        super().__init__()
        self.eps = eps
        self.norm_weight = nn.Parameter(1.0 + 0.1 * torch.randn(d_model))
        self.w_gate = nn.Linear(d_model, hidden, bias=False)
        self.w_up = nn.Linear(d_model, hidden, bias=False)
        self.w_down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.norm_weight
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


def get_inputs():
    return [torch.randn(TOKENS, D_MODEL)]


def get_init_inputs():
    return [D_MODEL, HIDDEN, EPS]
