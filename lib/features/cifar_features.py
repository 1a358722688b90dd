"""CIFAR-10 / CIFAR-10H as frozen ImageNet features (:mod:`lib.features.frozen`): the CIFAR-10H page's
data at ``cpu`` scale.

The paper trains a CIFAR ResNet-18 from scratch on 45,000 images for 50 epochs. On two cores a
from-scratch network on a 10,000-image subset reached .37-.50 accuracy in 15 minutes, too little to
judge the paper's claims. Here EfficientNet-Lite0's ImageNet stages (offline, from a PyPI package)
see each 32 px image upsampled to ``size`` px once; their activations are cached, and every run
fine-tunes the head convolution (:class:`lib.nets.lite0_split.Lite0Tail`) with its MoE head."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

from lib.data.images import ImageBundle
from lib.features.frozen import FeatureBundle, cached_features, extract_job, feature_source, jpeg_note, row_normalizer


def cifar10h_features(
    images: ImageBundle,
    size: int = 224,
    copies: int = 1,
    qualities: Sequence[int] = (15, 18, 25),
    extractor: str = "efficientnet_lite0_blocks",
    seed: int = 0,
) -> FeatureBundle:
    """``images`` (:func:`lib.data.images.load_cifar10h`) as frozen features of ``extractor``, each image
    upsampled to ``size`` px (:func:`lib.nets.extractors.extract`). Each split's features are cached
    once, keyed by a hash of its images, the size, the extractor's weights and the filtering; training
    rows carry ``copies`` JPEG-filtered copies behind the clean features (each image at a quality drawn
    from ``qualities``, fixed ``seed`` per copy), normalized by :func:`lib.features.frozen.row_normalizer`.
    The hard mask, "all" sample, human labels and test images carry over. ``ValueError`` for a bundle
    that is not CIFAR-10H, ``RuntimeError`` when the extractor's weights are absent."""
    if not isinstance(images, ImageBundle) or images.name != "cifar10h":
        raise ValueError("images: expected the CIFAR-10H ImageBundle of lib.data.images.load_cifar10h")
    qualities, dim, model, weights = feature_source(extractor, size, copies, qualities)
    splits = {"train": images.train_x, "val": images.val_x, "test": images.test_x}
    # each split's images hashed once: same images, same feature file
    tags = {s: hashlib.sha256(x.contiguous().numpy().tobytes()).hexdigest()[:12] for s, x in splits.items()}

    def job(split: str, copy: int | None) -> tuple[str, int, Callable[[Callable[[int], None]], np.ndarray]]:
        key, x = f"cifar10_{tags[split]}_{size}px_{extractor}-{weights}", splits[split]
        return extract_job(key, len(x), lambda: x, model, qualities, seed, copy, size=size)

    plan = [("train", None), ("val", None), ("test", None)] + [("train", c) for c in range(copies)]
    out = cached_features(f"CIFAR-10 features ({extractor}, {size} px)", {sc: job(*sc) for sc in plan})
    train = np.concatenate([out["train", None]] + [out["train", c] for c in range(copies)], axis=1)
    norm = row_normalizer(out["train", None], extractor, dim)

    filt = jpeg_note("training", "each", copies, qualities)
    b = images
    return FeatureBundle.from_pairs(
        "cifar10h-features",
        (norm(train), b.train_y),
        (norm(out["val", None]), b.val_y),
        (norm(out["test", None]), b.test_y),
        hard_mask=b.hard_mask,
        classes=b.classes,
        source=f"{b.source}; as frozen {extractor} ImageNet features (weights {weights}) of the images "
        f"upsampled to {size} px{filt}",
        dim=dim,
        copies=copies,
        qualities=qualities,
        extractor=f"{extractor}/{weights}/{size}px",
        info=b.info,
        all_mask=b.all_mask,
        human_probs=b.human_probs,
        test_images=b.test_x,
    )
