"""EfficientNet-Lite0 cut before its head convolution, so that a CPU can fine-tune that layer.

Fine-tuning the whole ImageNet network on PACS, as the paper does, takes a GPU; a frozen network keeps
its ImageNet view of a sketch, and the mixtures' routers send sketches to the wrong experts. In
between: the network up to the end of its last stage stays frozen, run once per image (activations
cached, :func:`lib.features.pacs_features.pacs_features`), and every run fine-tunes the 1x1 head
convolution and its BatchNorm (0.41 M of 3.4 M parameters) with its MoE head: seconds an epoch on two
cores. The CIFAR-10 pages of papers 2 and 4 cut one stage earlier (``cut = "last_stage"``,
:mod:`lib.nets.lite0_tuning`). ``Lite0Tail(size, cut)(Lite0Stem(cut)(x))`` equals the whole network's
features of ``x`` (tested, at both cuts).
"""

from __future__ import annotations

import torch
from torch import nn

from lib.nets.pretrained import LITE0_FEATURES, efficientnet_lite0
from lib.validation import check_int

__all__ = ["BLOCKS_CHANNELS", "CUTS", "Lite0Stem", "Lite0Tail", "blocks_dim"]

BLOCKS_CHANNELS = 320  # channels at the end of EfficientNet-Lite0's last stage (timm blocks[6]), stride 32
CUTS: dict[str, int] = {"head": BLOCKS_CHANNELS, "last_stage": 192}
"""Where the network is cut -- before the head convolution or before the last stage (timm
``blocks[6]``) -- and the channels there (both at stride 32)."""


def blocks_dim(size: int, cut: str = "head") -> int:
    """Width of a flattened activation at ``cut`` of a ``size`` px image: 320 x (size/32)^2 before the
    head convolution (15680 at 224), 192 x (size/32)^2 before the last stage."""
    check_int(size, "size", minimum=32)
    if size % 32:
        raise ValueError(f"size: must be a multiple of 32 (the network's stride), got {size}")
    if cut not in CUTS:
        raise ValueError(f"cut: unknown {cut!r}; valid: {', '.join(map(repr, CUTS))}")
    return CUTS[cut] * (size // 32) ** 2


class Lite0Stem(nn.Module):
    """EfficientNet-Lite0 up to ``cut``, flattened: images to (N, C H W / 1024) rows, C = ``CUTS[cut]``
    (``out_features`` for 224 px)."""

    def __init__(self, pretrained: bool = True, cut: str = "head") -> None:
        super().__init__()
        net = efficientnet_lite0(pretrained=pretrained)
        stages = len(net.blocks) - (cut == "last_stage")
        self.conv_stem, self.bn1, self.blocks = net.conv_stem, net.bn1, net.blocks[:stages]
        self.out_features = blocks_dim(224, cut)
        self.pretrained, self.cut = pretrained, cut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.bn1(self.conv_stem(x))).flatten(1)


class Lite0Tail(nn.Module):
    """The rest of EfficientNet-Lite0 after ``cut`` (the 1x1 head convolution, after the last stage with
    ``"last_stage"``), pooled to 1280-d, on rows whose first :func:`blocks_dim` columns are a cut's activation."""

    def __init__(self, size: int = 224, pretrained: bool = True, cut: str = "head") -> None:
        super().__init__()
        self.dim, self.grid, self.channels = blocks_dim(size, cut), size // 32, CUTS[cut]
        net = efficientnet_lite0(pretrained=pretrained)
        self.stage = net.blocks[-1] if cut == "last_stage" else nn.Identity()
        self.conv_head, self.bn2 = net.conv_head, net.bn2
        self.out_features = LITE0_FEATURES
        self.pretrained, self.cut = pretrained, cut
        layers = "last stage and head convolution" if cut == "last_stage" else "head convolution"
        self.name = (
            f"efficientnet_lite0 {layers} ({'ImageNet weights' if pretrained else 'random init'}, "
            f"fine-tuned on cached activations of {size} px images, {LITE0_FEATURES}-d)"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.shape[1] < self.dim:
            raise ValueError(f"x: expected rows of at least {self.dim} columns, got {tuple(x.shape)}")
        h = x[:, : self.dim].reshape(len(x), self.channels, self.grid, self.grid)
        return self.bn2(self.conv_head(self.stage(h))).mean((2, 3))
