"""Wide residual networks (Zagoruyko & Komodakis 2016): the WRN-28-k of papers 2 and 4's CIFAR-10
runs, built by :func:`wide_resnet` (``"wrn-<depth>-<k>"`` in :func:`lib.nets.backbones.build`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lib.validation import check_int

__all__ = ["WideResNet", "wide_resnet"]


class _WideBlock(nn.Module):
    """Pre-activation wide basic block (BN-ReLU-conv3x3-BN-ReLU-conv3x3) of Zagoruyko & Komodakis
    (2016), without dropout (as papers 2 and 4 train it)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.equal = cin == cout and stride == 1
        self.shortcut = None if self.equal else nn.Conv2d(cin, cout, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = F.relu(self.bn1(x))
        shortcut = x if self.equal else self.shortcut(o)
        return self.conv2(F.relu(self.bn2(self.conv1(o)))) + shortcut


class WideResNet(nn.Module):
    """WRN-depth-k for 32x32 inputs: widths 16, 16k, 32k, 64k; (depth - 4)/6 blocks per group."""

    def __init__(self, depth: int, widen_factor: int, num_classes: int) -> None:
        super().__init__()
        n = (depth - 4) // 6
        widths = [16, 16 * widen_factor, 32 * widen_factor, 64 * widen_factor]
        self.conv1 = nn.Conv2d(3, widths[0], 3, stride=1, padding=1, bias=False)
        blocks: list[nn.Module] = []
        cin = widths[0]
        for g, stride in zip(range(3), (1, 2, 2)):
            for b in range(n):
                blocks.append(_WideBlock(cin, widths[g + 1], stride if b == 0 else 1))
                cin = widths[g + 1]
        self.blocks = nn.Sequential(*blocks)
        self.bn = nn.BatchNorm2d(cin)
        self.fc = nn.Linear(cin, num_classes)
        self.out_features = num_classes
        self.num_features = cin
        self.name = f"WRN-{depth}-{widen_factor} ({num_classes} outputs)"
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = F.relu(self.bn(self.blocks(self.conv1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(o, 1), 1))


def wide_resnet(depth: int = 28, widen_factor: int = 4, num_classes: int | None = None) -> WideResNet:
    """WRN-28-k of the L2D CIFAR-10 experiments (paper 2, section 5) with ``num_classes`` outputs
    (K classes + J deferral outputs, supplied by the caller). ``depth`` must be 6n + 4."""
    check_int(depth, "depth", minimum=10)
    if (depth - 4) % 6:
        raise ValueError(f"depth: must be 6n + 4 (e.g. 16, 22, 28, 40), got {depth}")
    check_int(widen_factor, "widen_factor")
    if num_classes is None:
        raise ValueError("num_classes: required (K classes + J experts for learning to defer)")
    check_int(num_classes, "num_classes", minimum=2)
    return WideResNet(depth, widen_factor, num_classes)
