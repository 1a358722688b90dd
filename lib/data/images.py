"""Image data of the MoE paper as experiments use it: CIFAR-10 with CIFAR-10H human labels, and PACS.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1),
Table 4 and Appendix D (splits, hard subsets).

* :func:`load_cifar10h` -- 45,000 train / 5,000 validation (fixed split seed) / 10,000 test in the
  official test order; the test set carries the CIFAR-10H human label distributions and the hard
  subset "max human probability < 0.7" (327 images).
* :func:`load_pacs` -- leave-one-domain-out: the three source domains (90/10 train/validation split
  with a fixed seed) and the whole target domain as test and hard set.

Both return an :class:`ImageBundle`. The images themselves are read and decoded (once, then
memory-mapped from the cache) by :mod:`lib.data.image_files`; the CIFAR-10H labels are found
through :func:`lib.data.locate.locate` (explicit argument, ``$CALIBOOK_DATA``, ``../shared/data``,
the cache, then the official download when online).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lib.data.bundle import TensorSplits
from lib.data.image_files import (
    CIFAR10_CLASSES,
    PACS_CLASSES,
    PACS_DOMAINS,
    cifar10_arrays,
    pacs_domain,
    resolve_pacs_domain,
)
from lib.data.locate import describe, locate, reading
from lib.validation import check_choice, check_open_unit

HARD_THRESHOLD = 0.7  # CIFAR-10H hard subset: max human probability < 0.7 (MoE paper, Appendix D)
CIFAR_VAL_SIZE = 5000
SPLIT_SEED = 0  # the train/validation split of CIFAR-10 is the same for every training seed

__all__ = ["ImageBundle", "load_cifar10h", "load_pacs", "natural_test_subset", "pacs_examples"]


@dataclass
class ImageBundle(TensorSplits):
    """Train/validation/test images (uint8 tensors NCHW) and int64 labels of one experiment.

    ``hard_mask`` (bool, one per test image) marks the hard subset; ``all_mask`` (bool or ``None`` =
    every test image) marks the images that stand for the whole test distribution in the "all"
    metrics (a natural-proportion sample when the test set is subsampled); ``human_probs`` (N_test, C)
    holds human label distributions where they exist (CIFAR-10H, synthetic blends), else ``None``.
    ``source`` says where the data came from; ``info`` records how it was split or subsampled.
    """

    human_probs: torch.Tensor | None = None
    info: dict[str, Any] = field(default_factory=dict)
    all_mask: torch.Tensor | None = None

    kind: str = "images"

    @property
    def image_size(self) -> int:
        return int(self.train_x.shape[-1])

    @property
    def test_images(self) -> torch.Tensor:
        """The test images (``test_x``; a :class:`lib.features.frozen.FeatureBundle` keeps them apart
        from its rows), for figures."""
        return self.test_x

    def fingerprint(self) -> str:
        """A short hash of the bundle's name, sizes, labels and hard mask (part of run cache keys)."""
        h = hashlib.sha256()
        h.update(f"{self.name}|{self.sizes()}|{tuple(self.train_x.shape)}".encode())
        masks = () if self.all_mask is None else (self.all_mask,)
        for t in (self.train_y, self.val_y, self.test_y, self.hard_mask, *masks):
            h.update(t.cpu().numpy().tobytes())
        # a strided sample of pixels distinguishes images with the same labels (e.g. other sizes)
        flat = self.test_x.reshape(-1)
        h.update(flat[:: max(1, flat.numel() // 4096)].cpu().numpy().tobytes())
        return h.hexdigest()[:12]


# ----------------------------------------------------------------------------------------------
# CIFAR-10 / CIFAR-10H
# ----------------------------------------------------------------------------------------------

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
    """Test images for a scaled-down run: a uniform sample plus every hard image.

    ``n_test`` images are drawn uniformly from the whole test set, so they keep the natural share of
    hard images (CIFAR-10H: 3.3%, 327 of 10,000) and stand for "all" test images; the hard images the
    sample missed are added so the hard metrics still use all of them. Returns ``(indices in
    official order, all_mask)``, where ``all_mask`` marks the uniform sample. (The subset used before
    kept every hard image among ``n_test``, which made 16% of "all" hard and the "all" metrics
    incomparable with the paper's.)
    """
    hard = np.asarray(hard, dtype=bool)
    if hard.ndim != 1:
        raise ValueError(f"hard: expected a 1-D boolean mask, got shape {hard.shape}")
    if not isinstance(n_test, (int, np.integer)) or isinstance(n_test, bool) or not 1 <= n_test <= len(hard):
        raise ValueError(f"n_test: must be an integer in [1, {len(hard)}], got {n_test!r}")
    sample = rng.choice(len(hard), n_test, replace=False)
    idx = np.union1d(sample, np.flatnonzero(hard))  # sorted
    return idx, np.isin(idx, sample)


def _check_count(value: int | None, name: str, maximum: int) -> None:
    if value is None:
        return
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not 1 <= value <= maximum:
        raise ValueError(f"{name}: must be an integer in [1, {maximum}] or None, got {value!r}")


def load_cifar10h(
    data_dir: str | os.PathLike[str] | None = None,
    n_train: int | None = None,
    n_test: int | None = None,
    seed: int = 0,
    n_val: int | None = None,
) -> ImageBundle:
    """CIFAR-10 with CIFAR-10H human labels on the test set (MoE paper Table 4).

    The 50,000 training images are split 45,000/5,000 into train/validation with a fixed seed
    (``SPLIT_SEED``, the same for every training seed); the 10,000 test images keep the official
    order and carry ``human_probs`` (CIFAR-10H) and ``hard_mask`` = max human probability < 0.7
    (327 images). Subsets for the ``cpu`` scale: ``n_train`` images drawn from the 45,000 with
    ``seed`` (validation shrinks to ``n_val``, by default ``n_train // 9``, keeping the 90/10 ratio);
    ``n_test`` draws a uniform (natural-proportion) sample that defines the "all" metrics
    (``all_mask``) and adds every hard image the sample missed, so the hard metrics use all 327
    (see :func:`natural_test_subset`).
    """
    _check_count(n_train, "n_train", 50000 - CIFAR_VAL_SIZE)
    _check_count(n_test, "n_test", 10000)
    _check_count(n_val, "n_val", CIFAR_VAL_SIZE)
    arrays, source = cifar10_arrays(data_dir)
    (tr_x, tr_y), (te_x, te_y) = arrays["train"], arrays["test"]
    hp_path = locate("cifar10h", "cifar10h/cifar10h-probs.npy", data_dir, _download_cifar10h, _CIFAR10H_HOW)
    with reading(hp_path, _CIFAR10H_HOW):
        human = np.load(hp_path).astype(np.float64)
    if human.shape != (len(te_y), 10):
        raise ValueError(f"{hp_path}: expected human probabilities of shape ({len(te_y)}, 10), got {human.shape}")
    human = human / human.sum(axis=1, keepdims=True)
    hard = human.max(axis=1) < HARD_THRESHOLD

    perm = np.random.default_rng(SPLIT_SEED).permutation(len(tr_y))
    val_idx, train_idx = perm[:CIFAR_VAL_SIZE], perm[CIFAR_VAL_SIZE:]
    rng = np.random.default_rng(seed)
    info: dict[str, Any] = {"split_seed": SPLIT_SEED, "subset_seed": seed}
    if n_train is not None:
        train_idx = np.sort(rng.choice(train_idx, n_train, replace=False))
        n_val = n_val if n_val is not None else max(1, min(CIFAR_VAL_SIZE, n_train // 9))
    if n_val is not None:
        val_idx = np.sort(rng.choice(val_idx, n_val, replace=False))
    test_idx, all_mask = np.arange(len(te_y)), None
    if n_test is not None and n_test < len(te_y):
        test_idx, all_mask = natural_test_subset(hard, n_test, rng)
        info["test_subset"] = (
            f"uniform sample of {n_test} test images (the 'all' metrics) "
            f"+ the {int((hard[test_idx] & ~all_mask).sum())} hard images it missed"
        )
    info["hard_fraction_full_test"] = float(hard.mean())
    sample = test_idx if all_mask is None else test_idx[all_mask]
    info["hard_fraction_all_sample"] = float(hard[sample].mean())
    info["test_index"] = test_idx.tolist() if len(test_idx) < len(te_y) else "all"

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a))

    return ImageBundle(
        name="cifar10h",
        train_x=t(tr_x[train_idx]),
        train_y=t(tr_y[train_idx]),
        val_x=t(tr_x[val_idx]),
        val_y=t(tr_y[val_idx]),
        test_x=t(te_x[test_idx]),
        test_y=t(te_y[test_idx]),
        hard_mask=t(hard[test_idx]),
        all_mask=None if all_mask is None else t(all_mask),
        human_probs=t(human[test_idx]).float(),
        classes=CIFAR10_CLASSES,
        source=f"{source}; CIFAR-10H human labels ({describe(hp_path)})",
        info=info,
    )


# ----------------------------------------------------------------------------------------------
# PACS
# ----------------------------------------------------------------------------------------------


def load_pacs(
    target: str,
    size: int = 224,
    data_dir: str | os.PathLike[str] | None = None,
    val_frac: float = 0.1,
    seed: int = 0,
    n_per_domain: int | None = None,
) -> ImageBundle:
    """Leave-one-domain-out PACS (MoE paper section 5, Table 2).

    ``target`` (photo, art_painting -- alias "art" --, cartoon, sketch) is the test set and the hard
    set; the other three domains are the sources, of which ``val_frac`` (10%) is held out for
    temperature scaling with a fixed ``seed`` (PACS has no official split). Images are resized from
    227 to ``size`` px. ``n_per_domain`` (cpu scale) draws that many images per domain with ``seed``.
    """
    target = resolve_pacs_domain(target)
    check_open_unit(val_frac, "val_frac")
    _check_count(n_per_domain, "n_per_domain", 10000)
    rng = np.random.default_rng(seed)
    xs, ys, root = [], [], ""
    for d in PACS_DOMAINS:
        if d == target:
            continue
        x, y, root = pacs_domain(d, size, data_dir)
        if n_per_domain is not None and n_per_domain < len(y):
            keep = torch.from_numpy(np.sort(rng.choice(len(y), n_per_domain, replace=False)))
            x, y = x[keep], y[keep]
        xs.append(x)
        ys.append(y)
    src_x, src_y = torch.cat(xs), torch.cat(ys)
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(len(src_y)))
    n_val = max(1, int(round(val_frac * len(src_y))))
    val_idx, train_idx = perm[:n_val].sort().values, perm[n_val:].sort().values
    te_x, te_y, root = pacs_domain(target, size, data_dir)
    if n_per_domain is not None and n_per_domain < len(te_y):
        keep = torch.from_numpy(np.sort(rng.choice(len(te_y), n_per_domain, replace=False)))
        te_x, te_y = te_x[keep], te_y[keep]
    return ImageBundle(
        name=f"pacs-{target}",
        train_x=src_x[train_idx],
        train_y=src_y[train_idx],
        val_x=src_x[val_idx],
        val_y=src_y[val_idx],
        test_x=te_x,
        test_y=te_y,
        hard_mask=torch.ones(len(te_y), dtype=torch.bool),
        classes=PACS_CLASSES,
        source=f"PACS from {describe(root)} (resized 227->{size}px; sketch grayscale->RGB)",
        info={
            "target": target,
            "sources": [d for d in PACS_DOMAINS if d != target],
            "val_frac": val_frac,
            "seed": seed,
            "n_per_domain": n_per_domain,
        },
    )


def pacs_examples(
    classes: Sequence[str] = ("dog", "guitar", "house"), size: int = 64, data_dir: str | os.PathLike[str] | None = None
) -> tuple[torch.Tensor, list[str]]:
    """The first image of each of ``classes`` in each PACS domain (domain by domain, the layout of
    paper 1's Figure D.1): uint8 images (len(domains) x len(classes), 3, size, size) and captions."""
    for c in classes:
        check_choice(c, PACS_CLASSES, "classes")
    images, captions = [], []
    for d in PACS_DOMAINS:
        x, y, _ = pacs_domain(d, size, data_dir)
        for c in classes:
            images.append(x[int(torch.nonzero(y == PACS_CLASSES.index(c))[0])])
            captions.append(f"{d.replace('_', ' ')}: {c}")
    return torch.stack(images), captions
