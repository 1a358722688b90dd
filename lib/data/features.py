"""Frozen ImageNet features as a data set: compute once, cache on disk, train MoE heads on them.

At ``cpu`` scale the PACS page cannot fine-tune an ImageNet backbone on two cores, and a backbone
trained from scratch on a few thousand images learns next to nothing. Instead the pretrained
backbone (:func:`lib.nets.pretrained.efficientnet_lite0`) is frozen: every image's 1280-d feature vector
is computed once and cached, and every method's MoE head is trained on the vectors through the same
engine (:mod:`lib.moe.grid`, backbone ``"features"``: identity on feature vectors).

* :class:`FeatureInput` -- the ``"features:<extractor>"`` backbone (:func:`lib.nets.backbones.build`).
* :func:`cached_array` -- one float16 array on disk under ``<cache>/features`` with a SHA-256
  sidecar; a missing, truncated or altered file is detected and recomputed (:func:`load_cached`:
  what is already there, computing nothing).
* :func:`extract` -- features of uint8 images, optionally JPEG-filtered first (lib.moe.jpeg).
* :class:`FeatureBundle` -- a :class:`lib.data.bundle.Bundle` of ``kind == "features"``: training
  rows hold the clean features followed by the features of the same image JPEG-filtered at each of
  ``qualities``; validation and test rows hold clean features only.
* :meth:`FeatureBundle.fgr_inputs` -- FGR on frozen features: the "filtered copies" of a batch are
  the features of its JPEG-filtered images, drawn as :func:`lib.moe.jpeg.filtered_rows` draws them
  (max(1, int(0.05 B)) random rows, a quality per row from ``qualities``).
* :func:`pacs_features` -- leave-one-domain-out PACS as a FeatureBundle (the split of
  :func:`lib.data.images.load_pacs`): pooled features, or with the ``efficientnet_lite0_blocks``
  extractor the last stage's activations, the rows of a fine-tuned head convolution
  (:mod:`lib.nets.lite0_split`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from lib.data.bundle import TensorSplits
from lib.validation import check_int

__all__ = [
    "cached_array",
    "load_cached",
    "extract",
    "FeatureBundle",
    "FeatureInput",
    "FEATURE_EXTRACTORS",
    "STAGE_EXTRACTORS",
    "feature_dim",
    "pacs_features",
    "FEATURE_FRAC",
]

FEATURE_FRAC = 0.05  # FGR filters 5% of a batch (lib.moe.jpeg.filtered_rows' default frac)


FEATURE_EXTRACTORS: dict[str, int] = {"efficientnet_lite0": 1280, "resnet18": 512}  # name -> feature dimension
# Extractors of intermediate activations (rows for a trainable tail, lib.nets.lite0_split), not pooled
# features: the row width depends on the image size, and the rows are not standardized (the tail's
# pretrained weights expect the network's own activations).
STAGE_EXTRACTORS: tuple[str, ...] = ("efficientnet_lite0_blocks",)


def feature_dim(extractor: str, size: int) -> int:
    """Width of one clean row of ``extractor``'s features of ``size`` px images."""
    if extractor in STAGE_EXTRACTORS:
        from lib.nets.lite0_split import blocks_dim

        return blocks_dim(size)
    if extractor not in FEATURE_EXTRACTORS:
        valid = ", ".join([*FEATURE_EXTRACTORS, *STAGE_EXTRACTORS])
        raise ValueError(f"extractor: unknown {extractor!r}; valid: {valid}")
    return FEATURE_EXTRACTORS[extractor]


class FeatureInput(nn.Module):
    """The backbone of MoE heads trained on frozen features: the first ``dim`` columns of each row
    (a row may carry filtered copies after them, :class:`lib.data.features.FeatureBundle`). No parameters."""

    def __init__(self, extractor: str) -> None:
        super().__init__()
        if extractor not in FEATURE_EXTRACTORS:
            raise ValueError(f"extractor: unknown {extractor!r}; valid: {', '.join(FEATURE_EXTRACTORS)}")
        self.out_features = FEATURE_EXTRACTORS[extractor]
        self.pretrained = True  # the features come from the ImageNet weights (lib.data.features needs them)
        self.name = f"{extractor} (ImageNet weights, frozen: heads on cached {self.out_features}-d features)"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, : self.out_features]


def _features_dir() -> Path:
    from lib.config import cache_dir

    path = cache_dir() / "features"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _load_valid(path: Path, meta: Path) -> np.ndarray | None:
    """The array at ``path`` if it matches the SHA-256 and shape in ``meta``; None when either file is
    missing, altered or unreadable."""
    if not (path.exists() and meta.exists()):
        return None
    try:
        info = json.loads(meta.read_text())
        if info.get("sha256") == _sha(path):
            arr = np.load(path)
            if list(arr.shape) == info.get("shape"):
                return arr
    except (OSError, ValueError):
        pass  # corrupt: the caller recomputes
    return None


def load_cached(key: str, folder: Path | None = None) -> np.ndarray | None:
    """The array :func:`cached_array` would load for ``key`` (float32; present and intact on disk),
    else None: what is already computed, without computing anything."""
    folder = folder or _features_dir()
    arr = _load_valid(folder / f"{key}.npy", folder / f"{key}.json")
    return None if arr is None else arr.astype(np.float32)


def cached_array(key: str, compute: Callable[[], np.ndarray], folder: Path | None = None) -> np.ndarray:
    """``compute()`` cached as ``<folder>/<key>.npy`` (float16) with ``<key>.json`` holding its SHA-256
    and shape: a file that is missing, does not match its hash or fails to load is recomputed
    (written to a temporary file, then renamed). Returns float32."""
    if not isinstance(key, str) or not key or "/" in key:
        raise ValueError(f"key: expected a non-empty file name without '/', got {key!r}")
    folder = folder or _features_dir()
    path, meta = folder / f"{key}.npy", folder / f"{key}.json"
    found = load_cached(key, folder)
    if found is not None:
        return found
    arr = np.asarray(compute(), dtype=np.float16)
    tmp = path.with_name(f"{key}.{os.getpid()}.tmp.npy")
    np.save(tmp, arr)
    digest = _sha(tmp)
    os.replace(tmp, path)
    tmp_meta = meta.with_name(f"{key}.{os.getpid()}.tmp.json")
    tmp_meta.write_text(json.dumps({"sha256": digest, "shape": list(arr.shape)}))
    os.replace(tmp_meta, meta)
    return arr.astype(np.float32)


def extract(
    model: torch.nn.Module,
    images: torch.Tensor,
    mean: Sequence[float],
    std: Sequence[float],
    quality: Any = None,
    batch_size: int = 128,
    on_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Features of uint8 ``images`` (N, 3, H, W): optionally JPEG-filtered at ``quality`` (one
    number, or one per image; :func:`lib.moe.jpeg.jpeg_filter` on the 0..255 pixels), normalized with ``mean``/``std``, through
    ``model`` in evaluation mode without gradients (channels-last input), ``batch_size`` at a time; ``on_batch(n)`` is
    told each batch's ``n`` images (progress). Returns (N, D) float32."""
    from lib.moe.jpeg import jpeg_filter

    if not isinstance(images, torch.Tensor) or images.ndim != 4 or images.dtype != torch.uint8:
        raise ValueError("images: expected a uint8 tensor (N, 3, H, W)")
    check_int(batch_size, "batch_size")
    m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    model.eval()
    out = []
    with torch.inference_mode():
        for i in range(0, len(images), batch_size):
            xb = images[i : i + batch_size].float()
            if quality is not None:
                q = torch.as_tensor(quality, dtype=torch.float32).reshape(-1)
                xb = jpeg_filter(xb, q if q.numel() == 1 else q[i : i + batch_size]).clamp(0, 255)
            # channels_last input: about twice the images a second on a CPU (oneDNN's NHWC convolutions;
            # measured 73 vs 45 per second for EfficientNet-Lite0 at 224 px on 2 cores), same features
            xb = ((xb / 255.0 - m) / s).contiguous(memory_format=torch.channels_last)
            out.append(model(xb).float())
            if on_batch is not None:
                on_batch(len(xb))
    if not out:
        return np.zeros((0, int(getattr(model, "out_features", 0))), np.float32)
    return torch.cat(out).numpy()


@dataclass
class FeatureBundle(TensorSplits):
    """Frozen features as a :class:`lib.data.bundle.Bundle` (``kind == "features"``).

    ``train_x`` is (N, (1 + copies) * dim): the clean features, then ``copies`` blocks of the same
    image's JPEG-filtered features (each image at a quality drawn from ``qualities``);
    ``val_x``/``test_x`` are (N, dim). The ``"features"``
    backbone reads the first ``dim`` columns, so every method sees clean features except where FGR's
    :meth:`fgr_inputs` puts a filtered copy in front."""

    dim: int
    copies: int = 0
    qualities: tuple[int, ...] = ()
    extractor: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    kind: str = "features"

    def __post_init__(self) -> None:
        check_int(self.dim, "dim")
        check_int(self.copies, "copies", minimum=0)
        width = (1 + self.copies) * self.dim
        if self.train_x.ndim != 2 or self.train_x.shape[1] != width:
            raise ValueError(
                f"train_x: expected (N, {width}) rows (clean + {self.copies} filtered blocks of "
                f"{self.dim}), got {tuple(self.train_x.shape)}"
            )
        for name in ("val_x", "test_x"):
            x = getattr(self, name)
            if x.ndim != 2 or x.shape[1] != self.dim:
                raise ValueError(f"{name}: expected (N, {self.dim}), got {tuple(x.shape)}")

    def fingerprint(self) -> str:
        """Hash of the name, extractor, qualities, sizes, labels and a strided sample of features."""
        h = hashlib.sha256(
            f"{self.name}|{self.extractor}|{self.qualities}|{self.copies}|{self.sizes()}|{self.dim}".encode()
        )
        for t in (self.train_y, self.val_y, self.test_y, self.hard_mask):
            h.update(t.cpu().numpy().tobytes())
        for x in (self.train_x, self.test_x):
            flat = x.reshape(-1)
            h.update(flat[:: max(1, flat.numel() // 4096)].cpu().numpy().tobytes())
        return h.hexdigest()[:12]

    def fgr_inputs(
        self, x: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """FGR's one-forward input on a batch of training rows (B, (1 + copies) dim), as
        :func:`lib.moe.fgr.fgr_batch` builds it for images: the B rows, then m = max(1, int(0.05 B))
        random rows whose first ``dim`` columns are replaced by one of their image's filtered copies
        (drawn uniformly); and the (B,) row index of the filtered batch (row i, or B + j where row i
        is the j-th filtered one). Without copies nothing is filtered (every row reads itself)."""
        b, d = x.shape[0], self.dim
        main = torch.arange(b)
        if not self.copies:
            return x, main.to(x.device)
        gdev = generator.device if generator is not None else torch.device("cpu")
        m = max(1, int(FEATURE_FRAC * b))
        idx = torch.randperm(b, generator=generator, device=gdev)[:m].to(x.device)
        q = torch.randint(self.copies, (m,), generator=generator, device=gdev).to(x.device)
        rows = x.index_select(0, idx).clone()
        cols = d * (1 + q)[:, None] + torch.arange(d, device=x.device)[None, :]
        rows[:, :d] = torch.gather(rows, 1, cols)
        main[idx.cpu()] = b + torch.arange(m)
        return torch.cat([x.detach(), rows]), main.to(x.device)


def _extractor(name: str) -> tuple[Callable[[], nn.Module], str]:
    """(build, weights tag) of feature extractor ``name``: the package's EfficientNet-Lite0 or the
    paper's timm ResNet-18 from the hub (its id as the tag)."""
    if name == "efficientnet_lite0":
        from lib.nets.pretrained import efficientnet_lite0, lite0_fingerprint

        return (lambda: efficientnet_lite0(pretrained=True)), lite0_fingerprint()
    if name == "efficientnet_lite0_blocks":
        from lib.nets.lite0_split import Lite0Stem
        from lib.nets.pretrained import lite0_fingerprint

        return (lambda: Lite0Stem(pretrained=True)), lite0_fingerprint()
    if name == "resnet18":
        from lib.nets.backbones import IMAGENET_RESNET18_HUB_ID, imagenet_resnet18

        return (lambda: imagenet_resnet18(pretrained=True)), IMAGENET_RESNET18_HUB_ID.replace("/", "-")
    raise ValueError(f"extractor: unknown {name!r}; valid: {', '.join([*FEATURE_EXTRACTORS, *STAGE_EXTRACTORS])}")


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
) -> FeatureBundle:
    """Leave-one-domain-out PACS as frozen ImageNet features of ``extractor`` (EfficientNet-Lite0 by
    default, :mod:`lib.nets.pretrained`; or the paper's ResNet-18 when its hub weights load) at ``size``
    px, with the split of :func:`lib.data.images.load_pacs` (same ``val_frac``, ``seed`` and
    ``n_per_domain`` draws). Each domain's features are computed once for all its images and cached
    (:func:`cached_array`, keyed by data folder, domain, size, extractor weights and filtering);
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
    extractor's weights are absent."""
    from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
    from lib.data.image_files import PACS_CLASSES, PACS_DOMAINS, pacs_domain, resolve_pacs_domain
    from lib.engine import progress

    target = resolve_pacs_domain(target)
    check_int(size, "size", minimum=32)
    check_int(copies, "copies", minimum=0)
    if not 0 < float(val_frac) < 1:
        raise ValueError(f"val_frac: must lie in (0, 1), got {val_frac!r}")
    if not isinstance(flip, bool):
        raise ValueError(f"flip: expected a bool, got {flip!r}")
    qualities = tuple(int(q) for q in qualities)
    if copies and not qualities:
        raise ValueError("qualities: is empty but copies > 0")
    dim = feature_dim(extractor, size)
    build, weights = _extractor(extractor)
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
            draw = np.random.default_rng([seed, PACS_DOMAINS.index(domain), copy])
            quality = np.asarray(qualities)[draw.integers(len(qualities), size=len(y))]
            key += f"_jpeg{'-'.join(map(str, qualities))}_s{seed}c{copy}"
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
    raw = extractor in STAGE_EXTRACTORS
    mu = np.float32(0.0) if raw else src[train_idx, :dim].mean(0)
    sd = np.float32(1.0) if raw else src[train_idx, :dim].std(0) + 1e-6
    train_rows, train_labels = src[train_idx], src_y[train_idx]
    if flip:
        train_rows = np.concatenate([train_rows, np.concatenate(mirrored)[train_idx]])
        train_labels = np.concatenate([train_labels, train_labels])

    def norm(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(((a.reshape(len(a), -1, dim) - mu) / sd).reshape(len(a), -1).astype(np.float32))

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
