"""Log-softmax over the last dimension of a logits matrix (vocabulary-sized rows).

Op class: softmax (row max + log-sum-exp + subtract).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    ROWS, VOCAB = 4096, 32768
elif SIZE == "small":
    ROWS, VOCAB = 256, 2048
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits):
        return torch.log_softmax(logits, dim=-1)


def get_inputs():
    return [3.0 * torch.randn(ROWS, VOCAB)]


def get_init_inputs():
    return []
