"""Small image classifier: three [Conv3x3 -> BatchNorm (inference) -> ReLU] stages,
max pooling after the first two, global average pooling, and a linear head.

Op class: whole model (convolutions at three resolutions, per-channel affine,
activations, pooling, GEMM head). BatchNorm always uses running statistics.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZE = os.environ.get("MBLAST_BENCH_SIZE", "small")
if SIZE == "full":
    BATCH, IMAGE, WIDTH, CLASSES = 64, 224, 64, 1000
elif SIZE == "small":
    BATCH, IMAGE, WIDTH, CLASSES = 2, 32, 16, 10
else:
    raise ValueError(f"MBLAST_BENCH_SIZE must be 'small' or 'full', got {SIZE!r}")
IN_CHANNELS = 3


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


class Model(nn.Module):
    def __init__(self, in_channels, width, classes):
        super().__init__()
        c1, c2, c3 = width, 2 * width, 4 * width
        self.conv1 = nn.Conv2d(in_channels, c1, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c2)
        self.conv3 = nn.Conv2d(c2, c3, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(c3)
        self.head = nn.Linear(c3, classes)
        for bn in (self.bn1, self.bn2, self.bn3):
            _randomise_bn(bn)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(_bn_eval(self.conv1(x), self.bn1)), 2)
        x = F.max_pool2d(torch.relu(_bn_eval(self.conv2(x), self.bn2)), 2)
        x = torch.relu(_bn_eval(self.conv3(x), self.bn3))
        x = torch.mean(x, dim=(2, 3))
        return self.head(x)


def get_inputs():
    # Image-like input in [0, 1).
    return [torch.rand(BATCH, IN_CHANNELS, IMAGE, IMAGE)]


def get_init_inputs():
    return [IN_CHANNELS, WIDTH, CLASSES]
