"""One EfficientNet-Lite0 fine-tuned with cross-entropy, then frozen: the CIFAR-10 ``cpu`` backbone of
papers 2 and 4.

With Lite0's ImageNet weights frozen as they are, the heads of the ``"features"`` mode
(:func:`lib.nets.image_training.backbone_features`) reached .72-.76 on CIFAR-10 at 224 px, just under
both pages' accuracy floors; fine-tuning its last stage and head convolution for five epochs on 10,000
disjoint images lifted a cross-entropy head to .800 (the head convolution alone: .777), at about 16 s
an epoch on two cores. For PACS (``tune`` of :func:`lib.features.pacs_features.pacs_features`) it did
not help.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
from lib.engine import progress
from lib.engine.loop import fit
from lib.engine.cache import Run
from lib.nets.extractors import extract
from lib.nets.lite0_split import Lite0Stem, Lite0Tail
from lib.validation import check_int, check_positive

__all__ = ["TUNE_BATCH_SIZE", "TUNE_WEIGHT_DECAY", "tune_tail"]

TUNE_BATCH_SIZE = 64
"""Batch size of the fine-tuning (as the CIFAR-10H page's runs at ``cpu`` scale)."""

TUNE_WEIGHT_DECAY = 1e-4
"""Adam's weight decay in the fine-tuning (as the CIFAR-10H page's)."""


def tune_tail(
    x: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
    size: int,
    epochs: int,
    lr: float,
    run: Run | None = None,
    seed: int = 0,
) -> tuple[nn.Module, nn.Linear]:
    """:class:`lib.nets.lite0_split.Lite0Tail` (``cut = "last_stage"``) and a linear classifier
    fine-tuned with cross-entropy (Adam, ``lr``, ``epochs``; none keeps the package's weights) on ``x``:
    the stem's activations (rows) of ``size`` px images, or uint8 images (N, 3, H, W), upsampled and
    run once through the frozen stem (in half precision); checkpoints to ``run``. Returns (the frozen
    network from ``x``'s kind of input to 1280-d features; the frozen classifier)."""
    check_int(epochs, "epochs", minimum=0)
    check_positive(lr, "lr")
    if len(x) != len(labels):
        raise ValueError(f"labels: {len(labels)} labels for {len(x)} images")
    if epochs and len(x) < TUNE_BATCH_SIZE:
        raise ValueError(f"images: {len(x)} images, fewer than one batch of {TUNE_BATCH_SIZE}")
    stem: nn.Module | None = None
    tuning: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if x.ndim == 4:  # images: through the frozen stem once
        stem = Lite0Stem(pretrained=True, cut="last_stage")
        with progress.session(f"EfficientNet-Lite0 up to its last stage ({size} px)", len(x), unit="image") as line:
            rows = extract(stem, x, IMAGENET_MEAN, IMAGENET_STD, on_batch=line.update, size=size)
        x = torch.from_numpy(rows.astype(np.float16))  # half precision: 10,000 images at 224 px take 188 MB
        tuning = progress.session("fine-tuning its last stage and head convolution", epochs, quiet_if_idle=True)
    torch.manual_seed(seed)  # the classifier's initial weights
    tail = Lite0Tail(size, pretrained=True, cut="last_stage")
    classifier = nn.Linear(tail.out_features, num_classes)
    if epochs:  # the engine wants one epoch at least; none leaves the package's weights
        with tuning:  # fit counts epochs
            fit(
                nn.Sequential(tail, classifier),
                lambda out, y, _epoch: F.cross_entropy(out, y),
                (x, labels.long()),
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
    network = tail if stem is None else nn.Sequential(stem, tail)
    network.out_features = tail.out_features  # type: ignore[assignment]
    return network.eval().requires_grad_(False), classifier.eval().requires_grad_(False)
