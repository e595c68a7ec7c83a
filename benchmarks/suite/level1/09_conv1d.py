"""1D convolution over a sequence (N, C, L), kernel 5, padding 2, with bias.

Op class: convolution (1D, as in audio / temporal models).
"""
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, C_IN, C_OUT, LENGTH = 64, 256, 256, 4096
elif SIZE == "small":
    BATCH, C_IN, C_OUT, LENGTH = 4, 32, 64, 512
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
KERNEL = 5


class Model(nn.Module):
    def __init__(self, c_in, c_out, kernel):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel, padding=kernel // 2, bias=True)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, C_IN, LENGTH)]


def get_init_inputs():
    return [C_IN, C_OUT, KERNEL]
