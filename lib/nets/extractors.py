"""Frozen networks applied to images: the feature extractors by name (built by
:func:`lib.nets.backbones.extractor_model`), the ``"features:<extractor>"`` backbone and :func:`extract`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from lib.data.jpeg import jpeg_filter
from lib.nets.lite0_split import blocks_dim
from lib.validation import check_int

__all__ = ["FEATURE_EXTRACTORS", "STAGE_EXTRACTORS", "STAGE_CUTS", "FeatureInput", "extract", "feature_dim"]

FEATURE_EXTRACTORS: dict[str, int] = {"efficientnet_lite0": 1280, "resnet18": 512}
"""The extractors of pooled features, by name, with their feature dimension."""
STAGE_EXTRACTORS: tuple[str, ...] = ("efficientnet_lite0_blocks",)
"""Extractors of intermediate activations (rows for a trainable tail, lib.nets.lite0_split), not pooled
features: the row width depends on the image size, and the rows are not standardized (the tail's
pretrained weights expect the network's own activations)."""
STAGE_CUTS = {"efficientnet_lite0_blocks": "head"}
"""Each stage extractor's cut of the network (:data:`lib.nets.lite0_split.CUTS`)."""


def feature_dim(extractor: str, size: int) -> int:
    """Width of one clean row of ``extractor``'s features of ``size`` px images."""
    if extractor in STAGE_EXTRACTORS:
        return blocks_dim(size, STAGE_CUTS[extractor])
    if extractor not in FEATURE_EXTRACTORS:
        valid = ", ".join([*FEATURE_EXTRACTORS, *STAGE_EXTRACTORS])
        raise ValueError(f"extractor: unknown {extractor!r}; valid: {valid}")
    return FEATURE_EXTRACTORS[extractor]


class FeatureInput(nn.Module):
    """The backbone of MoE heads trained on frozen features: the first ``dim`` columns of each row
    (a row may carry filtered copies after them, :class:`lib.features.frozen.FeatureBundle`). No parameters."""

    def __init__(self, extractor: str) -> None:
        super().__init__()
        if extractor not in FEATURE_EXTRACTORS:
            raise ValueError(f"extractor: unknown {extractor!r}; valid: {', '.join(FEATURE_EXTRACTORS)}")
        self.out_features = FEATURE_EXTRACTORS[extractor]
        self.pretrained = True  # the features come from the ImageNet weights (lib.features needs them)
        self.name = f"{extractor} (ImageNet weights, frozen: heads on cached {self.out_features}-d features)"

    #: In a pack of runs (lib.engine.packed) each run's rows arrive as (runs, N, columns).
    packed_layout = "leading"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[..., : self.out_features]


def extract(
    model: torch.nn.Module,
    images: torch.Tensor,
    mean: Sequence[float],
    std: Sequence[float],
    quality: Any = None,
    batch_size: int = 128,
    on_batch: Callable[[int], None] | None = None,
    size: int | None = None,
) -> np.ndarray:
    """(N, D) float32 outputs of ``model`` (evaluation mode, no gradients) on uint8 ``images``, optionally
    JPEG-filtered at ``quality`` (:func:`lib.data.jpeg.jpeg_filter`), resized to ``size`` px (bilinear),
    normalized; ``on_batch(n)`` is told each batch's size."""
    if not isinstance(images, torch.Tensor) or images.ndim != 4 or images.dtype != torch.uint8:
        raise ValueError("images: expected a uint8 tensor (N, 3, H, W)")
    check_int(batch_size, "batch_size")
    if size is not None:
        check_int(size, "size", minimum=8)
    m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    model.eval()
    out = []
    with torch.inference_mode():
        for i in range(0, len(images), batch_size):
            xb = images[i : i + batch_size].float()
            if quality is not None:
                q = torch.as_tensor(quality, dtype=torch.float32).reshape(-1)
                xb = jpeg_filter(xb, q if q.numel() == 1 else q[i : i + batch_size]).clamp(0, 255)
            if size is not None and tuple(xb.shape[-2:]) != (size, size):
                xb = torch.nn.functional.interpolate(xb, size=(size, size), mode="bilinear", align_corners=False)
            # channels_last input: about twice the images a second on a CPU (oneDNN's NHWC convolutions;
            # measured 73 vs 45 per second for EfficientNet-Lite0 at 224 px on 2 cores), same features
            xb = ((xb / 255.0 - m) / s).contiguous(memory_format=torch.channels_last)
            out.append(model(xb).float())
            if on_batch is not None:
                on_batch(len(xb))
    if not out:
        return np.zeros((0, int(getattr(model, "out_features", 0))), np.float32)
    return torch.cat(out).numpy()
