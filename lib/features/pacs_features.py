"""Leave-one-domain-out PACS as frozen ImageNet features (:mod:`lib.features.frozen`): the PACS page's
data at ``cpu`` scale."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from lib.data.image_files import PACS_CLASSES, PACS_DOMAINS, pacs_domain, resolve_pacs_domain
from lib.data.images import source_split
from lib.features.frozen import FeatureBundle, cached_features, extract_job, feature_source, jpeg_note, row_normalizer


def pacs_features(
    target: str,
    size: int = 160,
    n_per_domain: int | None = None,
    copies: int = 1,
    extractor: str = "efficientnet_lite0",
    seed: int = 0,
) -> FeatureBundle:
    """Leave-one-domain-out PACS as frozen ImageNet features of ``extractor`` at ``size`` px, with the
    split of :func:`lib.data.images.load_pacs` (:func:`lib.data.images.source_split`, same ``seed`` and
    ``n_per_domain`` draws).
    Each domain's features are computed once and cached (keyed by data folder, domain, size, extractor
    weights and filtering); source images also get ``copies`` JPEG-filtered versions (each image at a
    quality drawn once from 15, 18 and 25, fixed per domain and copy): FGR's filtered copies. Rows are
    normalized by :func:`lib.features.frozen.row_normalizer` (with the clean training rows).
    ``RuntimeError`` when the extractor's weights are absent."""
    target = resolve_pacs_domain(target)
    qualities, dim, model, weights = feature_source(extractor, size, copies, (15, 18, 25))

    @functools.cache
    def labels(domain: str) -> tuple[np.ndarray, str]:  # and the data folder, read once per domain
        _, y, root = pacs_domain(domain, size)
        return y.numpy(), root

    def job(domain: str, copy: int | None) -> tuple[str, int, Callable[[Any], np.ndarray]]:
        """One domain's features (clean, or JPEG copy ``copy``): cache key, size, how to compute."""
        y, root = labels(domain)
        base = f"pacs_{hashlib.sha256(root.encode()).hexdigest()[:6]}_{domain}_{size}px_{extractor}-{weights}"
        images = lambda: pacs_domain(domain, size)[0]  # noqa: E731 -- decoded only if not cached
        return extract_job(base, len(y), images, model, qualities, seed, copy, (PACS_DOMAINS.index(domain),))

    sources = [d for d in PACS_DOMAINS if d != target]
    plan = [(d, None) for d in PACS_DOMAINS] + [(d, c) for d in sources for c in range(copies)]
    feats = cached_features(f"PACS features ({extractor}, {size} px, target {target})", {j: job(*j) for j in plan})
    rng = np.random.default_rng(seed)
    blocks: list[np.ndarray] = []
    ys = []
    for d in sources:
        y = labels(d)[0]
        keep = np.arange(len(y))
        if n_per_domain is not None and n_per_domain < len(y):
            keep = np.sort(rng.choice(len(y), n_per_domain, replace=False))
        blocks.append(np.concatenate([feats[d, None][keep]] + [feats[d, c][keep] for c in range(copies)], axis=1))
        ys.append(y[keep])
    te, te_y = feats[target, None], labels(target)[0]
    src, src_y = np.concatenate(blocks), np.concatenate(ys)
    val_idx, train_idx = source_split(np.random.default_rng(seed).permutation(len(src_y)))
    if n_per_domain is not None and n_per_domain < len(te_y):
        keep = np.sort(rng.choice(len(te_y), n_per_domain, replace=False))
        te, te_y = te[keep], te_y[keep]
    norm = row_normalizer(src[train_idx, :dim], extractor, dim)
    as_labels = lambda a: torch.from_numpy(np.asarray(a, dtype=np.int64))  # noqa: E731
    return FeatureBundle.from_pairs(
        f"pacs-{target}-features",
        (norm(src[train_idx]), as_labels(src_y[train_idx])),
        (norm(src[val_idx, :dim]), as_labels(src_y[val_idx])),
        (norm(te), as_labels(te_y)),
        hard_mask=torch.ones(len(te_y), dtype=torch.bool),
        classes=PACS_CLASSES,
        source=f"PACS as frozen {extractor} ImageNet features (weights {weights}) of {size} px images"
        + jpeg_note("source", "each image", copies, qualities),
        dim=dim,
        copies=copies,
        qualities=qualities,
        extractor=f"{extractor}/{weights}/{size}px",
    )
