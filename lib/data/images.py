"""Image data of the MoE paper as experiments use it: CIFAR-10 with CIFAR-10H human labels, and PACS.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1),
Table 4 and Appendix D (splits, hard subsets). :func:`load_cifar10h` and :func:`load_pacs` return an
:class:`ImageBundle`. The images themselves are read and decoded (once, then
memory-mapped from the cache) by :mod:`lib.data.image_files`; the CIFAR-10H labels are found
through :func:`lib.data.locate.locate` (explicit argument, ``$CALIBOOK_DATA``, ``../shared/data``,
the cache, then the official download when online).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lib.data.bundle import TensorSplits, strided
from lib.data.image_files import (
    CIFAR10_CLASSES,
    PACS_CLASSES,
    PACS_DOMAINS,
    cifar10_arrays,
    pacs_domain,
    resolve_pacs_domain,
)
from lib.data.locate import describe, locate, reading
from lib.validation import check_choice, check_int

HARD_THRESHOLD = 0.7  # CIFAR-10H hard subset: max human probability < 0.7 (MoE paper, Appendix D)
CIFAR_VAL_SIZE = 5000
SPLIT_SEED = 0  # the train/validation split of CIFAR-10 is the same for every training seed
VAL_FRAC = 0.1  # PACS: the share of the source domains' images held out for validation

__all__ = ["ImageBundle", "load_cifar10h", "load_pacs", "natural_test_subset", "pacs_examples", "source_split"]


@dataclass
class ImageBundle(TensorSplits):
    """Train/validation/test uint8 images (N, C, H, W) and int64 labels: ``hard_mask`` marks the hard test
    subset, ``all_mask`` (``None``: every test image) the natural-proportion sample of the "all" metrics,
    ``human_probs`` (N_test, C) human label distributions where they exist; ``info``: CIFAR-10H's hard
    shares and test indices."""

    human_probs: torch.Tensor | None = None
    info: dict[str, Any] = field(default_factory=dict)
    all_mask: torch.Tensor | None = None

    kind: str = "images"

    @property
    def test_images(self) -> torch.Tensor:
        """The test images (``test_x``; a :class:`lib.features.frozen.FeatureBundle` keeps them apart
        from its rows), for figures."""
        return self.test_x

    def fingerprint(self) -> str:
        """A short hash of the bundle's name, sizes, labels and hard mask (part of run cache keys)."""
        # a strided sample of pixels distinguishes images with the same labels (e.g. other sizes)
        return self.digest(f"{self.name}|{self.sizes()}|{tuple(self.train_x.shape)}", [strided(self.test_x)])


# --- CIFAR-10 / CIFAR-10H ---

_CIFAR10H_HOW = (
    "download cifar10h-probs.npy from https://github.com/jcpeterson/cifar-10h (data/) and put it in "
    "a folder cifar10h/ under $CALIBOOK_DATA or ../shared/data."
)


def _download_cifar10h(cache: Path) -> Path:
    import urllib.request

    dest = cache / "cifar10h" / "cifar10h-probs.npy"
    dest.parent.mkdir(parents=True, exist_ok=True)
    url = "https://github.com/jcpeterson/cifar-10h/raw/master/data/cifar10h-probs.npy"
    urllib.request.urlretrieve(url, dest)  # noqa: S310 - fixed https URL
    return dest


def natural_test_subset(hard: np.ndarray, n_test: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Test images for a scaled-down run: a uniform sample of ``n_test`` (the natural share of hard images,
    3.3% in CIFAR-10H: the "all" metrics) plus every hard image it missed (the hard metrics use all).
    Returns ``(indices in official order, all_mask)``, ``all_mask`` marking the uniform sample."""
    hard = np.asarray(hard, dtype=bool)
    if hard.ndim != 1:
        raise ValueError(f"hard: expected a 1-D boolean mask, got shape {hard.shape}")
    check_int(n_test, "n_test", 1, len(hard))
    sample = rng.choice(len(hard), n_test, replace=False)
    idx = np.union1d(sample, np.flatnonzero(hard))  # sorted
    return idx, np.isin(idx, sample)


def _check_count(value: int | None, name: str, maximum: int) -> None:
    if value is not None:
        check_int(value, name, 1, maximum)


def load_cifar10h(
    n_train: int | None = None, n_test: int | None = None, seed: int = 0, n_val: int | None = None
) -> ImageBundle:
    """CIFAR-10 with CIFAR-10H human labels on the test set (MoE paper Table 4).

    Train/validation 45,000/5,000 (``SPLIT_SEED`` for every training seed); the 10,000 test images in
    the official order, ``hard_mask`` = max human probability < 0.7 (327 images). ``cpu`` scale subsets:
    ``n_train`` drawn with ``seed`` (validation ``n_val``, default ``n_train // 9``), ``n_test`` by
    :func:`natural_test_subset`.
    """
    _check_count(n_train, "n_train", 50000 - CIFAR_VAL_SIZE)
    _check_count(n_test, "n_test", 10000)
    _check_count(n_val, "n_val", CIFAR_VAL_SIZE)
    arrays, source = cifar10_arrays(None)
    (tr_x, tr_y), (te_x, te_y) = arrays["train"], arrays["test"]
    hp_path = locate("cifar10h", "cifar10h/cifar10h-probs.npy", download=_download_cifar10h, how_to_get=_CIFAR10H_HOW)
    with reading(hp_path, _CIFAR10H_HOW):
        human = np.load(hp_path).astype(np.float64)
    if human.shape != (len(te_y), 10):
        raise ValueError(f"{hp_path}: expected human probabilities of shape ({len(te_y)}, 10), got {human.shape}")
    human = human / human.sum(axis=1, keepdims=True)
    hard = human.max(axis=1) < HARD_THRESHOLD

    perm = np.random.default_rng(SPLIT_SEED).permutation(len(tr_y))
    val_idx, train_idx = perm[:CIFAR_VAL_SIZE], perm[CIFAR_VAL_SIZE:]
    rng = np.random.default_rng(seed)
    if n_train is not None:
        train_idx = np.sort(rng.choice(train_idx, n_train, replace=False))
        n_val = n_val if n_val is not None else max(1, min(CIFAR_VAL_SIZE, n_train // 9))
    if n_val is not None:
        val_idx = np.sort(rng.choice(val_idx, n_val, replace=False))
    test_idx, all_mask = np.arange(len(te_y)), None
    if n_test is not None and n_test < len(te_y):
        test_idx, all_mask = natural_test_subset(hard, n_test, rng)
    sample = test_idx if all_mask is None else test_idx[all_mask]
    info = {  # the CIFAR-10H page's table of hard shares
        "hard_fraction_full_test": float(hard.mean()),
        "hard_fraction_all_sample": float(hard[sample].mean()),
        "test_index": test_idx.tolist() if len(test_idx) < len(te_y) else "all",
    }

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a))

    return ImageBundle.from_pairs(
        "cifar10h",
        (t(tr_x[train_idx]), t(tr_y[train_idx])),
        (t(tr_x[val_idx]), t(tr_y[val_idx])),
        (t(te_x[test_idx]), t(te_y[test_idx])),
        hard_mask=t(hard[test_idx]),
        all_mask=None if all_mask is None else t(all_mask),
        human_probs=t(human[test_idx]).float(),
        classes=CIFAR10_CLASSES,
        source=f"{source}; CIFAR-10H human labels ({describe(hp_path)})",
        info=info,
    )


# --- PACS ---


def source_split(perm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PACS's source split (no official one exists): sorted (validation, training) indices, the first
    ``VAL_FRAC`` of the permutation ``perm`` (at least one) held out for validation."""
    n_val = max(1, int(round(VAL_FRAC * len(perm))))
    return np.sort(perm[:n_val]), np.sort(perm[n_val:])


def load_pacs(target: str, size: int = 224, seed: int = 0, n_per_domain: int | None = None) -> ImageBundle:
    """Leave-one-domain-out PACS (MoE paper section 5, Table 2).

    ``target`` is the test and hard set; of the other three domains ``VAL_FRAC`` is held out with ``seed``
    (PACS has no official split). Images are resized to ``size`` px; ``n_per_domain`` (cpu scale) draws
    that many images per domain.
    """
    target = resolve_pacs_domain(target)
    _check_count(n_per_domain, "n_per_domain", 10000)
    rng = np.random.default_rng(seed)

    def domain(d: str) -> tuple[torch.Tensor, torch.Tensor, str]:
        x, y, root = pacs_domain(d, size)
        if n_per_domain is not None and n_per_domain < len(y):
            keep = torch.from_numpy(np.sort(rng.choice(len(y), n_per_domain, replace=False)))
            x, y = x[keep], y[keep]
        return x, y, root

    sources = [domain(d) for d in PACS_DOMAINS if d != target]
    src_x, src_y = torch.cat([x for x, _, _ in sources]), torch.cat([y for _, y, _ in sources])
    val_idx, train_idx = map(torch.from_numpy, source_split(np.random.default_rng(seed).permutation(len(src_y))))
    te_x, te_y, root = domain(target)
    return ImageBundle.from_pairs(
        f"pacs-{target}",
        (src_x[train_idx], src_y[train_idx]),
        (src_x[val_idx], src_y[val_idx]),
        (te_x, te_y),
        hard_mask=torch.ones(len(te_y), dtype=torch.bool),
        classes=PACS_CLASSES,
        source=f"PACS from {describe(root)} (resized 227->{size}px; sketch grayscale->RGB)",
    )


def pacs_examples(
    classes: Sequence[str] = ("dog", "guitar", "house"), size: int = 64
) -> tuple[torch.Tensor, list[str]]:
    """The first image of each of ``classes`` in each PACS domain (domain by domain, the layout of
    paper 1's Figure D.1): uint8 images (len(domains) x len(classes), 3, size, size) and captions."""
    for c in classes:
        check_choice(c, PACS_CLASSES, "classes")
    images, captions = [], []
    for d in PACS_DOMAINS:
        x, y, _ = pacs_domain(d, size)
        for c in classes:
            images.append(x[int(torch.nonzero(y == PACS_CLASSES.index(c))[0])])
            captions.append(f"{d.replace('_', ' ')}: {c}")
    return torch.stack(images), captions
