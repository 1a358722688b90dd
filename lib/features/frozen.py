"""Frozen ImageNet features as a data set: computed once, cached on disk, MoE heads trained on them.

At ``cpu`` scale two cores cannot fine-tune an ImageNet backbone, and one trained from scratch on a
few thousand images learns little; so the pretrained backbone (:mod:`lib.nets.extractors`) is
frozen, every image's features are computed once and cached (:func:`cached_features`), and every
method's MoE head trains on them through the same engine (backbone ``"features:<extractor>"``).
A :class:`FeatureBundle`'s training rows carry each image's JPEG-filtered copies behind its clean
features, FGR's filtered inputs (:func:`lib.moe.fgr.feature_batch`).
The data sets: :func:`lib.features.pacs_features.pacs_features`, :func:`lib.features.cifar_features.cifar10h_features`.
"""

from __future__ import annotations

import functools
import json
import os
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from lib.config import cache_dir
from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
from lib.data.bundle import TensorSplits, strided
from lib.engine import progress
from lib.data.locate import sha256_file
from lib.nets.backbones import extractor_model
from lib.nets.extractors import STAGE_EXTRACTORS, extract, feature_dim
from lib.validation import check_int


def _features_dir() -> Path:
    path = cache_dir() / "features"
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_cached(key: str) -> np.ndarray | None:
    """The cached array of ``key`` (float32), else None: when the ``.npy`` or its ``.json`` (SHA-256
    and shape) is missing, does not match or is unreadable (those two with a warning)."""
    folder = _features_dir()
    path, meta = folder / f"{key}.npy", folder / f"{key}.json"
    if not (path.exists() and meta.exists()):
        return None
    try:
        info = json.loads(meta.read_text())
        if info.get("sha256") == sha256_file(path):
            arr = np.load(path)
            if list(arr.shape) == info.get("shape"):
                return arr.astype(np.float32)
    except (OSError, ValueError):
        pass  # corrupt: the caller recomputes
    warnings.warn(f"features cache {path}: damaged (hash, shape or file); computing it again", stacklevel=2)
    return None


def _store(key: str, values: np.ndarray) -> np.ndarray:
    """Write ``values`` as ``<key>.npy`` (float16) with ``<key>.json`` holding its SHA-256 and shape
    (each to a temporary file, then renamed); return them as float32."""
    folder = _features_dir()
    arr = np.asarray(values, dtype=np.float16)
    tmp, tmp_meta = folder / f"{key}.{os.getpid()}.tmp.npy", folder / f"{key}.{os.getpid()}.tmp.json"
    np.save(tmp, arr)
    tmp_meta.write_text(json.dumps({"sha256": sha256_file(tmp), "shape": list(arr.shape)}))
    os.replace(tmp, folder / f"{key}.npy")
    os.replace(tmp_meta, folder / f"{key}.json")
    return arr.astype(np.float32)


def cached_features(
    title: str, jobs: Mapping[Hashable, tuple[str, int, Callable[[Callable[[int], None]], np.ndarray]]]
) -> dict[Hashable, np.ndarray]:
    """Each job's array, ``(key, images, compute(on_batch))``, cached on disk (:func:`load_cached`): a
    file that is missing, does not match its hash or fails to load is recomputed. What is not cached
    is computed under one progress line (:mod:`lib.engine.progress`, none when all is cached) whose
    total, counted before the first image, is every image not yet cached."""
    found = {j: load_cached(key) for j, (key, _, _) in jobs.items()}  # verified once, before counting
    todo = sum(n for j, (_, n, _) in jobs.items() if found[j] is None)
    out: dict[Hashable, np.ndarray] = {}
    with progress.session(title, todo, unit="image", quiet_if_idle=True) as line:
        for j, (key, _, compute) in jobs.items():
            arr = found[j]
            out[j] = arr if arr is not None else _store(key, compute(line.update))
    return out


@dataclass
class FeatureBundle(TensorSplits):
    """Frozen features as a :class:`lib.data.bundle.Bundle` (``kind == "features"``): ``train_x`` is
    (N, (1 + copies) * dim), the clean features then ``copies`` blocks of the same image's JPEG-filtered
    features; ``val_x``/``test_x`` are (N, dim). The ``"features"`` backbone reads the first ``dim``
    columns, so every method sees clean features except where FGR's
    :func:`lib.moe.fgr.feature_batch` puts a filtered copy in front. ``all_mask``, ``human_probs``
    and ``test_images`` are those of :class:`lib.data.images.ImageBundle`, where the data set has them."""

    dim: int
    copies: int = 0
    qualities: tuple[int, ...] = ()
    extractor: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    all_mask: torch.Tensor | None = None
    human_probs: torch.Tensor | None = None
    test_images: torch.Tensor | None = None
    kind: str = "features"

    def fingerprint(self) -> str:
        """Hash of the name, extractor, qualities, sizes, labels and a strided sample of features."""
        header = f"{self.name}|{self.extractor}|{self.qualities}|{self.copies}|{self.sizes()}|{self.dim}"
        return self.digest(header, [strided(self.train_x), strided(self.test_x)])


def feature_source(
    extractor: str, size: int, copies: int, qualities: Sequence[int]
) -> tuple[tuple[int, ...], int, Callable[[], nn.Module], str]:
    """A feature data set's checked ``size``, ``copies`` and ``qualities``: returns (qualities as a tuple, the
    width of one clean block, the extractor's builder and weights tag, :func:`lib.nets.backbones.extractor_model`);
    the builder builds the network on its first call only (a warm cache never loads it)."""
    check_int(size, "size", minimum=32)
    check_int(copies, "copies", minimum=0)
    qualities = tuple(int(q) for q in qualities)
    if copies and not qualities:
        raise ValueError("qualities: is empty but copies > 0")
    build, weights = extractor_model(extractor)
    return qualities, feature_dim(extractor, size), functools.cache(build), weights


def extract_job(
    key: str,
    n: int,
    images: Callable[[], torch.Tensor],
    model: Callable[[], nn.Module],
    qualities: Sequence[int],
    seed: int,
    copy: int | None,
    stream: Sequence[int] = (),
    size: int | None = None,
) -> tuple[str, int, Callable[[Callable[[int], None]], np.ndarray]]:
    """A job of :func:`cached_features`: the features (:func:`lib.nets.extractors.extract`, ImageNet
    normalization, ``size`` px) of the ``n`` images ``images()`` (loaded only to compute them), clean
    (``copy`` None) or as JPEG copy ``copy``: each image at a quality drawn from ``qualities`` by
    ``numpy.random.default_rng([seed, *stream, copy])`` (``stream`` tells apart image sets that share a
    seed, e.g. PACS's domains), the copy's suffix joining ``key``."""
    quality = None
    if copy is not None:
        draw = np.random.default_rng([seed, *stream, copy])
        quality = np.asarray(qualities)[draw.integers(len(qualities), size=n)]
        key += f"_jpeg{'-'.join(map(str, qualities))}_s{seed}c{copy}"
    return (
        key,
        n,
        lambda on: extract(model(), images(), IMAGENET_MEAN, IMAGENET_STD, quality=quality, on_batch=on, size=size),
    )


def jpeg_note(images: str, each: str, copies: int, qualities: Sequence[int]) -> str:
    """What a feature data set's ``source`` says of its JPEG copies ("" without copies)."""
    if not copies:
        return ""
    n = f"{copies} cop{'y' if copies == 1 else 'ies'}"
    return f"; {images} images also JPEG-filtered ({n}, {each} at a quality drawn from {list(qualities)}) for FGR"


def row_normalizer(clean: np.ndarray, extractor: str, dim: int) -> Callable[[np.ndarray], torch.Tensor]:
    """How a feature data set turns its arrays into rows: pooled features standardized, block by
    block of ``dim`` columns, with the mean and standard deviation of the ``clean`` training rows;
    the activations of a ``STAGE_EXTRACTORS`` extractor kept as the network computed them (the
    tail's pretrained weights expect them). Returns float32 tensors."""
    raw = extractor in STAGE_EXTRACTORS
    mu = np.float32(0.0) if raw else clean.mean(0)
    sd = np.float32(1.0) if raw else clean.std(0) + 1e-6

    def norm(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(((a.reshape(len(a), -1, dim) - mu) / sd).reshape(len(a), -1).astype(np.float32))

    return norm
