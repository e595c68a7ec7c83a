"""Maximum over the middle dimension of a 3D tensor: (B, R, C) -> (B, C) values.

Op class: reduction (max, strided dimension).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    B, R, C = 64, 2048, 1024
elif SIZE == "small":
    B, R, C = 16, 256, 128
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
DIM = 1


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.amax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(B, R, C)]


def get_init_inputs():
    return [DIM]
