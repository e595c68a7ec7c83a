"""Two-layer MLP: Linear(d, hidden) -> ReLU -> Linear(hidden, d).

Op class: fused chain, GEMM + bias + ReLU + GEMM + bias (the hidden
activation can stay on chip if the two GEMMs are fused).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    TOKENS, D_MODEL, HIDDEN = 8192, 2048, 8192
elif SIZE == "small":
    TOKENS, D_MODEL, HIDDEN = 128, 256, 384
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


class Model(nn.Module):
    def __init__(self, d_model, hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, hidden)
        self.fc2 = nn.Linear(hidden, d_model)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def get_inputs():
    return [torch.randn(TOKENS, D_MODEL)]


def get_init_inputs():
    return [D_MODEL, HIDDEN]
