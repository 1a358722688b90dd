"""Leave-one-domain-out PACS as frozen ImageNet features (:mod:`lib.features.frozen`): the PACS page's
data at ``cpu`` scale."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from lib.data.image_files import PACS_CLASSES, PACS_DOMAINS, pacs_domain, resolve_pacs_domain
from lib.data.images import VAL_FRAC, source_split
from lib.engine import progress
from lib.features.frozen import (
    FeatureBundle,
    cached_array,
    cached_features,
    extract_job,
    feature_source,
    jpeg_note,
    row_normalizer,
)
from lib.nets.lite0_tuning import tail_features, tune_tail


def pacs_features(
    target: str,
    size: int = 160,
    n_per_domain: int | None = None,
    copies: int = 1,
    extractor: str = "efficientnet_lite0",
    seed: int = 0,
    flip: bool = False,
    tune: tuple[int, float] | None = None,
) -> FeatureBundle:
    """Leave-one-domain-out PACS as frozen ImageNet features of ``extractor`` at ``size`` px, with the
    split of :func:`lib.data.images.load_pacs` (:func:`lib.data.images.source_split`, same ``seed`` and
    ``n_per_domain`` draws).
    Each domain's features are computed once and cached (keyed by data folder, domain, size, extractor
    weights and filtering); source images also get ``copies`` JPEG-filtered versions (each image at a
    quality drawn once from 15, 18 and 25, fixed per domain and copy): FGR's filtered copies. With
    ``flip`` the training rows are followed by those of the same images mirrored left-right, each
    carrying its unmirrored image's filtered copies. Rows are normalized by
    :func:`lib.features.frozen.row_normalizer` (with the clean, unmirrored training rows).
    ``RuntimeError`` when the extractor's weights are absent.

    ``tune = (epochs, lr)`` (extractor ``efficientnet_lite0_last_stage``) fine-tunes EfficientNet-Lite0's
    last stage and head convolution once, with cross-entropy, on the clean training rows of the
    sources (:func:`lib.nets.lite0_tuning.tune_tail`; never the target's images nor the validation
    rows), then freezes it: every row becomes the tuned network's pooled 1280-d features (cached)."""
    target = resolve_pacs_domain(target)
    if not isinstance(flip, bool):
        raise ValueError(f"flip: expected a bool, got {flip!r}")
    qualities, dim, model, weights = feature_source(extractor, size, copies, (15, 18, 25))
    if tune is not None and extractor != "efficientnet_lite0_last_stage":
        raise ValueError(f"tune: needs the extractor 'efficientnet_lite0_last_stage', got {extractor!r}")
    if tune is not None and not (isinstance(tune, (tuple, list)) and len(tune) == 2):
        raise ValueError(f"tune: expected (epochs, lr), got {tune!r}")
    if tune is not None and flip:
        raise ValueError("flip: mirrored rows are not supported with tune")

    @functools.cache
    def labels(domain: str) -> tuple[np.ndarray, str]:  # and the data folder, read once per domain
        _, y, root = pacs_domain(domain, size)
        return y.numpy(), root

    def job(domain: str, copy: int | None, mirror: bool) -> tuple[str, int, Callable[[Any], np.ndarray]]:
        """One domain's features (clean, JPEG copy ``copy`` or mirrored): cache key, size, how to compute."""
        y, root = labels(domain)

        def images() -> torch.Tensor:
            x = pacs_domain(domain, size)[0]
            return x.flip(-1) if mirror else x

        base = f"pacs_{hashlib.sha256(root.encode()).hexdigest()[:6]}_{domain}_{size}px_{extractor}-{weights}"
        key, n, compute = extract_job(base, len(y), images, model, qualities, seed, copy, (PACS_DOMAINS.index(domain),))
        return key + ("_flip" if mirror else ""), n, compute

    sources = [d for d in PACS_DOMAINS if d != target]
    plan = [(d, None, False) for d in PACS_DOMAINS]
    plan += [(d, c, False) for d in sources for c in range(copies)]
    plan += [(d, None, True) for d in sources] if flip else []
    jobs = {j: job(*j) for j in plan}
    feats = cached_features(f"PACS features ({extractor}, {size} px, target {target})", jobs)
    rng = np.random.default_rng(seed)
    blocks: list[np.ndarray] = []
    mirrored: list[np.ndarray] = []
    ys = []
    for d in sources:
        y = labels(d)[0]
        keep = np.arange(len(y))
        if n_per_domain is not None and n_per_domain < len(y):
            keep = np.sort(rng.choice(len(y), n_per_domain, replace=False))
        filtered = [feats[d, c, False][keep] for c in range(copies)]
        blocks.append(np.concatenate([feats[d, None, False][keep]] + filtered, axis=1))
        if flip:
            mirrored.append(np.concatenate([feats[d, None, True][keep]] + filtered, axis=1))
        ys.append(y[keep])
    te, te_y = feats[target, None, False], labels(target)[0]
    src, src_y = np.concatenate(blocks), np.concatenate(ys)
    val_idx, train_idx = source_split(np.random.default_rng(seed).permutation(len(src_y)))
    if n_per_domain is not None and n_per_domain < len(te_y):
        keep = np.sort(rng.choice(len(te_y), n_per_domain, replace=False))
        te, te_y = te[keep], te_y[keep]
    if tune is not None:
        key = hashlib.sha256(
            repr(([jobs[j][0] for j in plan], target, VAL_FRAC, seed, n_per_domain, flip, tuple(tune))).encode()
        ).hexdigest()[:16]
        src, te, dim = _tuned_rows(src, src_y, te, train_idx, dim, size, tune, f"pacs_tuned_{key}", len(PACS_CLASSES))
        extractor = "efficientnet_lite0"  # the rows are now pooled features: standardized as such
        weights = (
            f"{weights}, last stage and head convolution fine-tuned on the sources ({tune[0]} epochs, lr {tune[1]:g})"
        )
    norm = row_normalizer(src[train_idx, :dim], extractor, dim)
    train_rows, train_labels = src[train_idx], src_y[train_idx]
    if flip:
        train_rows = np.concatenate([train_rows, np.concatenate(mirrored)[train_idx]])
        train_labels = np.concatenate([train_labels, train_labels])
    as_labels = lambda a: torch.from_numpy(np.asarray(a, dtype=np.int64))  # noqa: E731
    mirror = "; training images also mirrored left-right (features of both, same labels)" if flip else ""
    return FeatureBundle.from_pairs(
        f"pacs-{target}-features",
        (norm(train_rows), as_labels(train_labels)),
        (norm(src[val_idx, :dim]), as_labels(src_y[val_idx])),
        (norm(te), as_labels(te_y)),
        hard_mask=torch.ones(len(te_y), dtype=torch.bool),
        classes=PACS_CLASSES,
        source=f"PACS as frozen {extractor} ImageNet features (weights {weights}) of {size} px images"
        + jpeg_note("source", "each image", copies, qualities)
        + mirror,
        dim=dim,
        copies=copies,
        qualities=qualities,
        extractor=f"{extractor}/{weights}/{size}px",
    )


def _tuned_rows(
    src: np.ndarray,
    src_y: np.ndarray,
    te: np.ndarray,
    train_idx: np.ndarray,
    dim: int,
    size: int,
    tune: tuple[int, float],
    key: str,
    num_classes: int,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The source rows (each block of ``dim`` stage-activation columns: clean, then JPEG copies) and
    the target rows as pooled features of EfficientNet-Lite0 with its last stage and head convolution
    fine-tuned (:func:`lib.nets.lite0_tuning.tune_tail`) on the clean blocks of the ``train_idx``
    rows; cached under ``key`` (source and target arrays). Returns (source rows, target rows, 1280)."""
    epochs, lr = int(tune[0]), float(tune[1])
    tuned: list[nn.Module] = []  # tuned on first need: when both arrays are cached, never

    def tail() -> nn.Module:
        if not tuned:
            rows = torch.from_numpy(src[train_idx, :dim].astype(np.float16))
            with progress.session(
                "PACS: fine-tuning Lite0's last stage and head convolution", epochs, quiet_if_idle=True
            ):
                tuned.append(tune_tail(rows, torch.from_numpy(src_y[train_idx]), num_classes, size, epochs, lr)[0])
        return tuned[0]

    def rows_of(a: np.ndarray) -> np.ndarray:
        blocks = [torch.from_numpy(a[:, b * dim : (b + 1) * dim]) for b in range(a.shape[1] // dim)]
        return np.concatenate([tail_features(tail(), x) for x in blocks], axis=1)

    out_src = cached_array(f"{key}_src", lambda: rows_of(src))
    out_te = cached_array(f"{key}_target", lambda: rows_of(te))
    return out_src, out_te, out_te.shape[1]
