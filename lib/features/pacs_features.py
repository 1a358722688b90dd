"""Leave-one-domain-out PACS as frozen ImageNet features (:mod:`lib.features.frozen`): the PACS page's
data at ``cpu`` scale.

* :func:`pacs_features` -- the split of :func:`lib.data.images.load_pacs` as a
  :class:`lib.features.frozen.FeatureBundle`: pooled features, or with the ``efficientnet_lite0_blocks``
  extractor the last stage's activations, the rows of a fine-tuned head convolution
  (:mod:`lib.nets.lite0_split`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
from lib.data.image_files import PACS_CLASSES, PACS_DOMAINS, pacs_domain, resolve_pacs_domain
from lib.engine import progress
from lib.features.frozen import FeatureBundle, cached_array, feature_source, jpeg_copy, load_cached, row_normalizer
from lib.nets.extractors import extract
from lib.nets.lite0_tuning import tail_features, tune_tail

__all__ = ["pacs_features"]


def pacs_features(
    target: str,
    size: int = 160,
    n_per_domain: int | None = None,
    qualities: Sequence[int] = (15, 18, 25),
    copies: int = 1,
    extractor: str = "efficientnet_lite0",
    val_frac: float = 0.1,
    seed: int = 0,
    data_dir: str | None = None,
    flip: bool = False,
    tune: tuple[int, float] | None = None,
) -> FeatureBundle:
    """Leave-one-domain-out PACS as frozen ImageNet features of ``extractor`` (EfficientNet-Lite0 by
    default, :mod:`lib.nets.pretrained`; or the paper's ResNet-18 when its hub weights load) at ``size``
    px, with the split of :func:`lib.data.images.load_pacs` (same ``val_frac``, ``seed`` and
    ``n_per_domain`` draws). Each domain's features are computed once for all its images and cached
    (:func:`lib.features.frozen.cached_array`, keyed by data folder, domain, size, extractor weights and filtering);
    source images also get ``copies`` JPEG-filtered versions, each image at a quality drawn once
    from ``qualities`` (fixed seed per domain and copy): FGR's filtered copies. With ``flip`` the
    training rows are followed by the features of the same training images mirrored left-right
    (augmentation at feature level; validation and test rows stay unmirrored), each mirrored row
    carrying the filtered copies of its unmirrored image. Pooled features are standardized
    with the training rows' clean (unmirrored) mean and standard deviation; the activations of a
    ``STAGE_EXTRACTORS`` extractor (``efficientnet_lite0_blocks``: the input of a fine-tuned tail,
    :class:`lib.nets.lite0_split.Lite0Tail`) are kept as the network computed them. What is computed shows as one progress line
    (:mod:`lib.engine.progress`, none when all is cached) whose total, counted before the first image,
    is every image not yet cached, so its time left holds from the start. Raises ``RuntimeError`` when the
    extractor's weights are absent.

    ``tune = (epochs, lr)`` (with the ``efficientnet_lite0_last_stage`` extractor) fine-tunes
    EfficientNet-Lite0's last stage and head convolution once, with cross-entropy, on the clean
    training rows of the source domains (:func:`lib.nets.lite0_tuning.tune_tail`; never the target's
    images, nor the validation rows), then freezes it: every row (clean, JPEG copies, target) becomes
    the tuned network's pooled 1280-d features, standardized as pooled features are. The tuned rows
    are cached, keyed by the stage activations' keys, the split and the tuning."""
    target = resolve_pacs_domain(target)
    if not 0 < float(val_frac) < 1:
        raise ValueError(f"val_frac: must lie in (0, 1), got {val_frac!r}")
    if not isinstance(flip, bool):
        raise ValueError(f"flip: expected a bool, got {flip!r}")
    qualities, dim, build, weights = feature_source(extractor, size, copies, qualities)
    if tune is not None and extractor != "efficientnet_lite0_last_stage":
        raise ValueError(f"tune: needs the extractor 'efficientnet_lite0_last_stage', got {extractor!r}")
    if tune is not None and not (isinstance(tune, (tuple, list)) and len(tune) == 2):
        raise ValueError(f"tune: expected (epochs, lr), got {tune!r}")
    if tune is not None and flip:
        raise ValueError("flip: mirrored rows are not supported with tune")
    model: list[nn.Module] = []  # built on first need: a warm cache never loads it

    domains: dict[str, tuple[torch.Tensor, str]] = {}  # labels and data folder, read once per domain
    cached: dict[str, np.ndarray] = {}  # features found on disk (verified once, while counting what is left)

    def info(domain: str) -> tuple[torch.Tensor, str]:
        if domain not in domains:
            _, y, root = pacs_domain(domain, size, data_dir)
            domains[domain] = (y, root)
        return domains[domain]

    def job(domain: str, copy: int | None, mirror: bool = False) -> tuple[str, Any]:
        """The cache key of one domain's features (clean, JPEG copy ``copy`` or mirrored) and the
        per-image JPEG qualities of a copy (None when clean)."""
        y, root = info(domain)
        quality = None
        tag = hashlib.sha256(root.encode()).hexdigest()[:6]
        key = f"pacs_{tag}_{domain}_{size}px_{extractor}-{weights}"
        if copy is not None:
            suffix, quality = jpeg_copy(qualities, len(y), seed, copy, stream=(PACS_DOMAINS.index(domain),))
            key += suffix
        if mirror:
            key += "_flip"
        return key, quality

    def feats(
        domain: str, copy: int | None, line: progress.Line, mirror: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        y = info(domain)[0]
        key, quality = job(domain, copy, mirror)
        if key in cached:
            return cached.pop(key), y.numpy()

        def compute() -> np.ndarray:
            if not model:
                model.append(build())
            x = pacs_domain(domain, size, data_dir)[0]  # the images: only to compute what is not cached
            return extract(
                model[0],
                x.flip(-1) if mirror else x,
                IMAGENET_MEAN,
                IMAGENET_STD,
                quality=quality,
                on_batch=line.update,
            )

        return cached_array(key, compute), y.numpy()

    sources = [d for d in PACS_DOMAINS if d != target]
    plan = [(d, None, False) for d in PACS_DOMAINS]
    plan += [(d, c, False) for d in sources for c in range(copies)]
    plan += [(d, None, True) for d in sources] if flip else []
    todo = 0
    for d, c, m in plan:
        key = job(d, c, m)[0]
        arr = load_cached(key)
        if arr is None:
            todo += len(info(d)[0])
        else:
            cached[key] = arr

    rng = np.random.default_rng(seed)
    blocks: list[np.ndarray] = []
    mirrored: list[np.ndarray] = []
    ys = []
    with progress.session(
        f"PACS features ({extractor}, {size} px, target {target})", todo, unit="image", quiet_if_idle=True
    ) as line:
        for d in PACS_DOMAINS:
            if d == target:
                continue
            clean, y = feats(d, None, line)
            keep = np.arange(len(y))
            if n_per_domain is not None and n_per_domain < len(y):
                keep = np.sort(rng.choice(len(y), n_per_domain, replace=False))
            filtered = [feats(d, c, line)[0][keep] for c in range(copies)]
            blocks.append(np.concatenate([clean[keep]] + filtered, axis=1))
            if flip:
                mirrored.append(np.concatenate([feats(d, None, line, mirror=True)[0][keep]] + filtered, axis=1))
            ys.append(y[keep])
        te, te_y = feats(target, None, line)
    src, src_y = np.concatenate(blocks), np.concatenate(ys)
    perm = np.random.default_rng(seed).permutation(len(src_y))
    n_val = max(1, int(round(val_frac * len(src_y))))
    val_idx, train_idx = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    if n_per_domain is not None and n_per_domain < len(te_y):
        keep = np.sort(rng.choice(len(te_y), n_per_domain, replace=False))
        te, te_y = te[keep], te_y[keep]
    if tune is not None:
        key = hashlib.sha256(
            repr(
                ([job(d, c, m)[0] for d, c, m in plan], target, val_frac, seed, n_per_domain, flip, tuple(tune))
            ).encode()
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

    def labels(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.asarray(a, dtype=np.int64))

    filt = (
        (
            f"; source images also JPEG-filtered ({copies} cop{'y' if copies == 1 else 'ies'}, each image at a "
            f"quality drawn from {list(qualities)}) for FGR"
        )
        if copies
        else ""
    )
    mirror = "; training images also mirrored left-right (features of both, same labels)" if flip else ""
    return FeatureBundle(
        name=f"pacs-{target}-features",
        train_x=norm(train_rows),
        train_y=labels(train_labels),
        val_x=norm(src[val_idx, :dim]),
        val_y=labels(src_y[val_idx]),
        test_x=norm(te),
        test_y=labels(te_y),
        hard_mask=torch.ones(len(te_y), dtype=torch.bool),
        classes=PACS_CLASSES,
        source=f"PACS as frozen {extractor} ImageNet features (weights {weights}) of {size} px images{filt}{mirror}",
        dim=dim,
        copies=copies,
        qualities=qualities,
        extractor=f"{extractor}/{weights}/{size}px",
        info={
            "target": target,
            "sources": [d for d in PACS_DOMAINS if d != target],
            "val_frac": val_frac,
            "seed": seed,
            "n_per_domain": n_per_domain,
            "size": size,
            "extractor": extractor,
            "flip": flip,
        },
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
