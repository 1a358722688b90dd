"""One EfficientNet-Lite0 fine-tuned with cross-entropy, then frozen: the CIFAR-10 ``cpu`` backbone of
papers 2 and 4.

Their ``"features"`` mode trains one backbone with cross-entropy on a part of the training images,
freezes it, and lets every loss or surrogate train a small head on its features of the other images
(:func:`lib.nets.image_training.backbone_features`). With EfficientNet-Lite0's ImageNet weights
frozen as they are, the heads reached .72-.76 on CIFAR-10 upsampled to 224 px, just under both
pages' accuracy floors. Fine-tuning Lite0's last stage and head convolution for five epochs on
10,000 disjoint images (the network up to that stage frozen, its activations computed once) lifted a
cross-entropy head on 10,000 other images to .800 (measured; the head convolution alone: .777), at
about 16 s an epoch on two cores.

* :func:`tune_tail` -- fine-tune :class:`lib.nets.lite0_split.Lite0Tail` (``cut = "last_stage"``)
  with a linear classifier through the engine (:func:`lib.engine.loop.fit`) on cached stem
  activations; :func:`tail_features` -- the tuned tail's pooled features of such activations.
* :func:`tuned_lite0` -- the same from images: the whole network, frozen (stem then tuned tail),
  with the classifier.

PACS features can do the same once per target on the source domains' images
(:func:`lib.features.pacs_features.pacs_features` with ``tune``); measured there, it did not help, and
no PACS scale uses it.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
from lib.engine import progress
from lib.engine.loop import fit, predict
from lib.engine.runs import Run
from lib.nets.extractors import extract
from lib.nets.lite0_split import Lite0Stem, Lite0Tail, blocks_dim
from lib.validation import check_int, check_positive

__all__ = ["TUNE_BATCH_SIZE", "TUNE_WEIGHT_DECAY", "tail_features", "tune_tail", "tuned_lite0"]

TUNE_BATCH_SIZE = 64
"""Batch size of the fine-tuning (as the CIFAR-10H page's runs at ``cpu`` scale)."""

TUNE_WEIGHT_DECAY = 1e-4
"""Adam's weight decay in the fine-tuning (as the CIFAR-10H page's)."""


def _check_tuning(n_images: int, n_labels: int, epochs: int, lr: float) -> None:
    """The checks shared by :func:`tune_tail` and :func:`tuned_lite0`, each naming its argument."""
    check_int(epochs, "epochs", minimum=0)
    check_positive(lr, "lr")
    if n_images != n_labels:
        raise ValueError(f"labels: {n_labels} labels for {n_images} images")
    if epochs and n_images < TUNE_BATCH_SIZE:
        raise ValueError(f"images: {n_images} images, fewer than one batch of {TUNE_BATCH_SIZE}")


def tune_tail(
    rows: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
    size: int,
    epochs: int,
    lr: float,
    run: Run | None = None,
    seed: int = 0,
) -> tuple[nn.Module, nn.Linear]:
    """EfficientNet-Lite0's last stage and head convolution (:class:`lib.nets.lite0_split.Lite0Tail`,
    ``cut = "last_stage"``, the package's ImageNet weights) fine-tuned with cross-entropy (Adam,
    ``lr``, weight decay :data:`TUNE_WEIGHT_DECAY`, batch :data:`TUNE_BATCH_SIZE`, ``epochs`` epochs,
    no augmentation) together with a linear classifier, on ``rows`` (the stem's activations of
    ``size`` px images, :class:`lib.nets.lite0_split.Lite0Stem` with ``cut = "last_stage"``; any float
    dtype) and ``labels``; ``epochs = 0`` leaves the package's weights. Training checkpoints to ``run``
    and resumes. Returns (the tail, frozen, in evaluation mode; the classifier, likewise)."""

    _check_tuning(len(rows), len(labels), epochs, lr)
    if rows.ndim != 2 or rows.shape[1] < blocks_dim(size, "last_stage"):
        raise ValueError(
            f"rows: expected (N, >= {blocks_dim(size, 'last_stage')}) last-stage activations of {size} px images, "
            f"got {tuple(rows.shape)}"
        )
    torch.manual_seed(seed)  # the classifier's initial weights
    tail = Lite0Tail(size, pretrained=True, cut="last_stage")
    classifier = nn.Linear(tail.out_features, num_classes)
    if epochs:  # the engine wants one epoch at least; none leaves the package's weights
        fit(
            nn.Sequential(tail, classifier),
            lambda out, y, _epoch: F.cross_entropy(out, y),
            (rows, labels.long()),
            epochs,
            optimizer_factory=lambda p: torch.optim.Adam(p, lr=lr, weight_decay=TUNE_WEIGHT_DECAY),
            run=run,
            batch_size=TUNE_BATCH_SIZE,
            seed=seed,
            device="cpu",
            transform=lambda xb, _gen: xb.float(),
            amp=False,
            progress=False,
            drop_last=True,
        )
    return tail.eval().requires_grad_(False), classifier.eval().requires_grad_(False)


def tail_features(tail: nn.Module, rows: torch.Tensor, batch_size: int = 256) -> np.ndarray:
    """The 1280-d pooled features of ``tail`` (from :func:`tune_tail`) for stem ``rows``, ``batch_size``
    rows at a time, without gradients (the engine's :func:`lib.engine.loop.predict`). Returns (N, 1280)
    float32."""
    out = predict(tail, rows, device="cpu", batch_size=batch_size, prep=lambda xb: xb.float(), amp=False)
    return out.numpy().reshape(len(rows), int(tail.out_features))


def tuned_lite0(
    images: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
    size: int,
    epochs: int,
    lr: float,
    run: Run | None = None,
    seed: int = 0,
) -> tuple[nn.Module, nn.Linear]:
    """:func:`tune_tail` on uint8 ``images`` (N, 3, H, W), upsampled to ``size`` px: the frozen part
    (:class:`lib.nets.lite0_split.Lite0Stem`, ``cut = "last_stage"``) sees each image once, its
    activations kept in half precision. Two progress lines (:mod:`lib.engine.progress`): the images
    through the frozen part, then the fine-tuning's epochs. Returns (the whole network in evaluation
    mode, images to 1280-d pooled features; the classifier)."""
    _check_tuning(len(images), len(labels), epochs, lr)  # before the costly extraction
    stem = Lite0Stem(pretrained=True, cut="last_stage")
    with progress.session(f"EfficientNet-Lite0 up to its last stage ({size} px)", len(images), unit="image") as line:
        rows = torch.from_numpy(
            extract(stem, images, IMAGENET_MEAN, IMAGENET_STD, on_batch=line.update, size=size).astype(np.float16)
        )  # half precision: 10,000 images at 224 px take 188 MB instead of 376
    with progress.session("fine-tuning its last stage and head convolution", epochs, quiet_if_idle=True):
        tail, classifier = tune_tail(
            rows, labels, num_classes, size, epochs, lr, run=run, seed=seed
        )  # fit counts epochs
    network = nn.Sequential(stem, tail).eval().requires_grad_(False)
    network.out_features = tail.out_features  # type: ignore[assignment]
    return network, classifier
