"""Attention tail: softmax(scores) -> dropout (inference, identity) -> @ V.

Op class: fused chain, row softmax + (no-op) dropout + batched GEMM. Dropout is
called with training=False so the output is deterministic in every mode.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, SEQ, HEAD_DIM = 32, 2048, 128
elif SIZE == "small":
    BATCH, SEQ, HEAD_DIM = 4, 128, 64
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
DROPOUT_P = 0.1


class Model(nn.Module):
    def __init__(self, dropout_p):
        super().__init__()
        self.dropout_p = dropout_p

    def forward(self, scores, v):
        probs = torch.softmax(scores, dim=-1)
        probs = F.dropout(probs, p=self.dropout_p, training=False)
        return torch.bmm(probs, v)


def get_inputs():
    return [2.0 * torch.randn(BATCH, SEQ, SEQ), torch.randn(BATCH, SEQ, HEAD_DIM)]


def get_init_inputs():
    return [DROPOUT_P]
