"""Scaled dot-product attention core, written out (no mask, no dropout):
out = softmax(Q @ K^T / sqrt(D)) @ V for Q, K, V of shape (B, H, S, D).

Op class: attention (batched GEMM + row softmax + batched GEMM; the S x S score
matrix is the target of fusion). Written with matmul/softmax because
F.scaled_dot_product_attention does not exist in older torch releases.
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, HEADS, SEQ, HEAD_DIM = 16, 16, 2048, 64
elif SIZE == "small":
    BATCH, HEADS, SEQ, HEAD_DIM = 2, 4, 128, 32
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scale = 1.0 / float(head_dim) ** 0.5

    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        probs = torch.softmax(scores, dim=-1)
        return torch.matmul(probs, v)


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return [HEAD_DIM]
