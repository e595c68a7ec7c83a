"""Pre-norm transformer encoder block (no mask, inference):
    h = x + OutProj(MultiHeadAttention(LayerNorm1(x)))
    y = h + FC2(GELU(FC1(LayerNorm2(h))))
Attention is written out: fused QKV projection, per-head Q @ K^T / sqrt(d_head),
softmax, @ V, heads merged, output projection.

Op class: whole model (GEMMs, batched GEMMs, softmax, LayerNorm, GELU, residual adds,
reshapes/permutes between them).
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, SEQ, D_MODEL, HEADS = 8, 2048, 1024, 16
elif SIZE == "small":
    BATCH, SEQ, D_MODEL, HEADS = 2, 64, 128, 4
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
MLP_RATIO = 4
EPS = 1e-5


class Model(nn.Module):
    def __init__(self, d_model, heads, mlp_ratio, eps):
        super().__init__()
        assert d_model % heads == 0
        self.heads = heads
        self.head_dim = d_model // heads
        self.scale = 1.0 / float(self.head_dim) ** 0.5
        self.norm1 = nn.LayerNorm(d_model, eps=eps)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model, eps=eps)
        self.fc1 = nn.Linear(d_model, mlp_ratio * d_model)
        self.fc2 = nn.Linear(mlp_ratio * d_model, d_model)
        with torch.no_grad():
            for norm in (self.norm1, self.norm2):
                norm.weight.copy_(1.0 + 0.1 * torch.randn(d_model))
                norm.bias.copy_(0.1 * torch.randn(d_model))

    def attention(self, x):
        batch, seq = x.size(0), x.size(1)
        # (B, S, 3*D) -> (3, B, H, S, Dh)
        qkv = self.qkv(x).reshape(batch, seq, 3, self.heads, self.head_dim)
        qkv = qkv.permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v)  # (B, H, S, Dh)
        ctx = ctx.transpose(1, 2).reshape(batch, seq, self.heads * self.head_dim)
        return self.out_proj(ctx)

    def forward(self, x):
        h = x + self.attention(self.norm1(x))
        return h + self.fc2(F.gelu(self.fc1(self.norm2(h))))


def get_inputs():
    return [torch.randn(BATCH, SEQ, D_MODEL)]


def get_init_inputs():
    return [D_MODEL, HEADS, MLP_RATIO, EPS]
