"""CIFAR-10 test logits of ResNet-50s trained with different losses, and a synthetic stand-in.

The real files (``../shared/data/cifar10-resnet50-logits/resnet50_<loss>_test.npz``, from the
reweighted-risk paper's authors) hold ``logits`` (10000, 10) and ``targets`` (10000,) in the same
shuffled order for every loss, so models can be paired example by example. ``inverse_focal`` is a
failed run (accuracy 0.14%): it loads only with ``allow_degenerate=True``.
"""

from __future__ import annotations

import os

import numpy as np

from lib.data.locate import locate, reading
from lib.data.mmlu import synthetic_logits
from lib.validation import check_choice, check_int

LOSSES: tuple[str, ...] = ("ce", "focal", "dual_focal", "inverse_focal", "ece_kde", "aurc")
DEGENERATE: tuple[str, ...] = ("inverse_focal",)
FOLDER = "cifar10-resnet50-logits"
HOW_TO_GET = (
    "copy the folder cifar10-resnet50-logits (resnet50_<loss>_test.npz, from "
    "github.com/han678/CalibWeightedRisk @ 2b71220) under a data root, or set $CALIBOOK_DATA to a "
    "folder holding it. At smoke scale use synthetic_resnet_logits() instead."
)


def load_resnet50_logits(
    loss: str, root: str | os.PathLike[str] | None = None, allow_degenerate: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``(logits (N, 10) float64, targets (N,) int64)`` of the ResNet-50 trained with ``loss``."""
    check_choice(loss, LOSSES, "loss")
    if loss in DEGENERATE and not allow_degenerate:
        raise ValueError(f"loss: {loss!r} is a failed run (accuracy 0.14%); pass allow_degenerate=True to load it")
    need = f"resnet50_{loss}_test.npz"  # a folder without this run's file is passed over
    path = locate("cifar10-resnet50-logits", FOLDER, root, how_to_get=HOW_TO_GET, needs=(need,)) / need
    with reading(path, HOW_TO_GET), np.load(path) as d:  # a truncated npz is named in the error
        logits = d["logits"].astype(np.float64)
        targets = d["targets"].astype(np.int64)
    if logits.ndim != 2 or logits.shape[0] != targets.shape[0] or not np.all(np.isfinite(logits)):
        raise ValueError(f"loss: {path.name} holds malformed logits {logits.shape} / {targets.shape}")
    return logits, targets


def load_resnet50_pair(
    losses: tuple[str, ...] = ("ce", "focal"), root: str | os.PathLike[str] | None = None
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Logits of several losses with their shared targets; raises if the orders differ."""
    loaded = {loss: load_resnet50_logits(loss, root) for loss in losses}
    targets = loaded[losses[0]][1]
    for loss, (_, y) in loaded.items():
        if not np.array_equal(targets, y):
            raise ValueError(f"losses: {loss!r} has a different example order (targets differ)")
    return {loss: z for loss, (z, _) in loaded.items()}, targets


# Synthetic stand-in: CE calibrated-ish and focal underconfident, like the real pair (kappa < 1).
SYNTHETIC_RESNETS: dict[str, tuple[float, float]] = {
    "ce": (3.2, 1.6),
    "focal": (3.0, 0.8),
    "dual_focal": (3.1, 1.0),
    "ece_kde": (3.2, 1.4),
    "aurc": (3.0, 1.1),
}


def synthetic_resnet_logits(
    n: int = 2000, losses: tuple[str, ...] = ("ce", "focal"), seed: int = 0, shared: float = 0.3
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Synthetic 10-class logits with the real files' structure (see ``synthetic_logits``)."""
    for loss in losses:
        check_choice(loss, tuple(SYNTHETIC_RESNETS), "losses")
    check_int(n, "n", 10)
    rng = np.random.default_rng(seed)
    targets = rng.integers(0, 10, size=n).astype(np.int64)
    logits = synthetic_logits(targets, {k: SYNTHETIC_RESNETS[k] for k in losses}, 10, shared, rng)
    return logits, targets
