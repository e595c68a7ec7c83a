"""Multi-layer perceptron: Linear -> ReLU repeated DEPTH times, then a linear output layer.

Op class: whole model (a chain of GEMMs with bias + ReLU epilogues; weights
dominate memory at small batch, compute at large batch).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, D_IN, HIDDEN, D_OUT = 4096, 4096, 8192, 1000
elif SIZE == "small":
    BATCH, D_IN, HIDDEN, D_OUT = 64, 512, 384, 10
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
DEPTH = 3


class Model(nn.Module):
    def __init__(self, d_in, hidden, d_out, depth):
        super().__init__()
        layers = []
        width = d_in
        for _ in range(depth):
            layers.append(nn.Linear(width, hidden))
            layers.append(nn.ReLU())
            width = hidden
        layers.append(nn.Linear(width, d_out))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(BATCH, D_IN)]


def get_init_inputs():
    return [D_IN, HIDDEN, D_OUT, DEPTH]
