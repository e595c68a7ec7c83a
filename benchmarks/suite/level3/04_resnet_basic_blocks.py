"""A stage of ResNet-style basic blocks on a feature map:
    block(C -> C), block(C -> 2C, stride 2, 1x1 projection shortcut), block(2C -> 2C)
where block(x) = ReLU(BN(Conv3x3(ReLU(BN(Conv3x3(x))))) + shortcut(x)).
BatchNorm is in inference form (running statistics).

Op class: whole model (3x3 convolutions, strided convolution, 1x1 projection,
per-channel affine, residual adds, ReLU).
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, CHANNELS, H, W = 64, 128, 56, 56
elif SIZE == "small":
    BATCH, CHANNELS, H, W = 2, 16, 16, 16
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")


def _randomise_bn(bn):
    c = bn.num_features
    with torch.no_grad():
        bn.running_mean.copy_(0.1 * torch.randn(c))
        bn.running_var.copy_(0.5 + torch.rand(c))
        bn.weight.copy_(1.0 + 0.1 * torch.randn(c))
        bn.bias.copy_(0.1 * torch.randn(c))


def _bn_eval(x, bn):
    return F.batch_norm(
        x, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False, momentum=0.0, eps=bn.eps
    )


class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        bns = [self.bn1, self.bn2]
        if stride != 1 or c_in != c_out:
            self.proj = nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)
            self.proj_bn = nn.BatchNorm2d(c_out)
            bns.append(self.proj_bn)
        else:
            self.proj = None
            self.proj_bn = None
        for bn in bns:
            _randomise_bn(bn)

    def forward(self, x):
        y = torch.relu(_bn_eval(self.conv1(x), self.bn1))
        y = _bn_eval(self.conv2(y), self.bn2)
        shortcut = x if self.proj is None else _bn_eval(self.proj(x), self.proj_bn)
        return torch.relu(y + shortcut)


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.block1 = BasicBlock(channels, channels, 1)
        self.block2 = BasicBlock(channels, 2 * channels, 2)
        self.block3 = BasicBlock(2 * channels, 2 * channels, 1)

    def forward(self, x):
        return self.block3(self.block2(self.block1(x)))


def get_inputs():
    # Post-ReLU feature map from an earlier stage: non-negative.
    return [torch.rand(BATCH, CHANNELS, H, W)]


def get_init_inputs():
    return [CHANNELS]
