"""EfficientNet-Lite0 cut before its head convolution, so that a CPU can fine-tune that layer.

Fine-tuning the whole ImageNet network on PACS, as the paper does, takes a GPU. Frozen features
(:mod:`lib.data.features`) cost one pass over the images, but a frozen network keeps its ImageNet
view of a sketch, and on the sketch target the mixtures' routers send sketches to the wrong experts.
In between: the network up to the end of its last inverted-residual stage stays frozen and is run
once per image (its activations cached, :func:`lib.data.pacs_features.pacs_features` with the
``efficientnet_lite0_blocks`` extractor), and every run fine-tunes the rest -- the 1x1 head
convolution (320 to 1280 channels) and its BatchNorm, 0.41 M of the network's 3.4 M feature
parameters -- with its MoE head. An epoch over the PACS source domains then takes seconds on two
cores. (Fine-tuning the last stage as well raised sketch accuracy further in a stand-alone test,
but an epoch took about three times as long: beyond the PACS page's ten-minute budget.)

* :class:`Lite0Stem` -- images (ImageNet-normalized) to the last stage's activations, flattened to rows.
* :class:`Lite0Tail` -- such rows (the first :func:`blocks_dim` columns of a row) to the 1280-d
  pooled features, with the package's ImageNet weights: ``Lite0Tail(size)(Lite0Stem()(x))`` equals
  the whole network's features of ``x`` (tested).
* :func:`blocks_dim` -- the row width at an image size (320 channels on a (size/32)^2 grid).
"""

from __future__ import annotations

import torch
from torch import nn

from lib.validation import check_int

__all__ = ["BLOCKS_CHANNELS", "Lite0Stem", "Lite0Tail", "blocks_dim"]

BLOCKS_CHANNELS = 320  # channels at the end of EfficientNet-Lite0's last stage (timm blocks[6]), stride 32


def blocks_dim(size: int) -> int:
    """Width of a flattened last-stage activation of a ``size`` px image: 320 x (size/32)^2 (15680 at 224)."""
    check_int(size, "size", minimum=32)
    if size % 32:
        raise ValueError(f"size: must be a multiple of 32 (the network's stride), got {size}")
    return BLOCKS_CHANNELS * (size // 32) ** 2


class Lite0Stem(nn.Module):
    """EfficientNet-Lite0 (:func:`lib.nets.pretrained.efficientnet_lite0`) up to the end of its last
    inverted-residual stage, the output flattened: (N, 3, H, W) ImageNet-normalized images to
    (N, 320 H W / 1024) rows. ``out_features`` is set for 224 px; the row width follows the input size."""

    def __init__(self, pretrained: bool = True) -> None:
        from lib.nets.pretrained import efficientnet_lite0

        super().__init__()
        net = efficientnet_lite0(pretrained=pretrained)
        self.conv_stem, self.bn1, self.blocks = net.conv_stem, net.bn1, net.blocks
        self.out_features = blocks_dim(224)
        self.pretrained = pretrained

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.bn1(self.conv_stem(x))).flatten(1)


class Lite0Tail(nn.Module):
    """The rest of EfficientNet-Lite0 after its last stage -- the 1x1 head convolution to 1280 channels
    with its BatchNorm and ReLU6, global average pooling -- on rows whose first :func:`blocks_dim`
    (``size``) columns are a flattened last-stage activation (a row may carry FGR's filtered copies
    after them). ImageNet weights with ``pretrained``; ``out_features`` = 1280."""

    def __init__(self, size: int = 224, pretrained: bool = True) -> None:
        from lib.nets.pretrained import LITE0_FEATURES, efficientnet_lite0

        super().__init__()
        self.dim, self.grid = blocks_dim(size), size // 32
        net = efficientnet_lite0(pretrained=pretrained)
        self.conv_head, self.bn2 = net.conv_head, net.bn2
        self.out_features = LITE0_FEATURES
        self.pretrained = pretrained
        self.name = (
            f"efficientnet_lite0 head convolution ({'ImageNet weights' if pretrained else 'random init'}, "
            f"fine-tuned on cached last-stage activations of {size} px images, {LITE0_FEATURES}-d)"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.shape[1] < self.dim:
            raise ValueError(f"x: expected rows of at least {self.dim} columns, got {tuple(x.shape)}")
        h = x[:, : self.dim].reshape(len(x), BLOCKS_CHANNELS, self.grid, self.grid)
        return self.bn2(self.conv_head(h)).mean((2, 3))
