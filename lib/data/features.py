"""Frozen ImageNet features as a data set: compute once, cache on disk, train MoE heads on them.

At ``cpu`` scale the PACS and CIFAR-10H pages cannot fine-tune an ImageNet backbone on two cores,
and a backbone trained from scratch on a few thousand images learns little. Instead the pretrained
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
* The data sets built from them: :func:`lib.data.pacs_features.pacs_features` (leave-one-domain-out
  PACS) and :func:`lib.data.cifar_features.cifar10h_features` (CIFAR-10 / CIFAR-10H, upsampled).
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
    "extractor_model",
    "feature_source",
    "jpeg_copy",
    "row_normalizer",
    "FEATURE_FRAC",
]

FEATURE_FRAC = 0.05  # FGR filters 5% of a batch (lib.moe.jpeg.filtered_rows' default frac)


FEATURE_EXTRACTORS: dict[str, int] = {"efficientnet_lite0": 1280, "resnet18": 512}  # name -> feature dimension
# Extractors of intermediate activations (rows for a trainable tail, lib.nets.lite0_split), not pooled
# features: the row width depends on the image size, and the rows are not standardized (the tail's
# pretrained weights expect the network's own activations).
STAGE_EXTRACTORS: tuple[str, ...] = ("efficientnet_lite0_blocks", "efficientnet_lite0_last_stage")
_STAGE_CUTS = {"efficientnet_lite0_blocks": "head", "efficientnet_lite0_last_stage": "last_stage"}  # lite0_split.CUTS


def feature_dim(extractor: str, size: int) -> int:
    """Width of one clean row of ``extractor``'s features of ``size`` px images."""
    if extractor in STAGE_EXTRACTORS:
        from lib.nets.lite0_split import blocks_dim

        return blocks_dim(size, _STAGE_CUTS[extractor])
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
    size: int | None = None,
) -> np.ndarray:
    """Features of uint8 ``images`` (N, 3, H, W): optionally JPEG-filtered at ``quality`` (one
    number, or one per image; :func:`lib.moe.jpeg.jpeg_filter` on the 0..255 pixels), then resized to
    ``size`` x ``size`` px when given (bilinear: CIFAR's 32 px images upsampled for an ImageNet
    network), normalized with ``mean``/``std``, through
    ``model`` in evaluation mode without gradients (channels-last input), ``batch_size`` at a time; ``on_batch(n)`` is
    told each batch's ``n`` images (progress). Returns (N, D) float32."""
    from lib.moe.jpeg import jpeg_filter

    if not isinstance(images, torch.Tensor) or images.ndim != 4 or images.dtype != torch.uint8:
        raise ValueError("images: expected a uint8 tensor (N, 3, H, W)")
    check_int(batch_size, "batch_size")
    if size is not None:
        check_int(size, "size", minimum=8)
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
            if size is not None and tuple(xb.shape[-2:]) != (size, size):
                xb = torch.nn.functional.interpolate(xb, size=(size, size), mode="bilinear", align_corners=False)
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
    :meth:`fgr_inputs` puts a filtered copy in front. As in :class:`lib.data.images.ImageBundle`,
    ``all_mask`` (or None: every test row) marks the test rows of the "all" metrics and
    ``human_probs`` holds human label distributions where they exist; ``test_images`` keeps the
    test images the features came from (uint8, for figures), where the data set has them."""

    dim: int
    copies: int = 0
    qualities: tuple[int, ...] = ()
    extractor: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    all_mask: torch.Tensor | None = None
    human_probs: torch.Tensor | None = None
    test_images: torch.Tensor | None = None
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
        masks = () if self.all_mask is None else (self.all_mask,)
        for t in (self.train_y, self.val_y, self.test_y, self.hard_mask, *masks):
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


def feature_source(
    extractor: str, size: int, copies: int, qualities: Sequence[int]
) -> tuple[tuple[int, ...], int, Callable[[], nn.Module], str]:
    """What a feature data set (:mod:`lib.data.pacs_features`, :mod:`lib.data.cifar_features`) checks
    and needs first: ``copies`` (JPEG copies per image, >= 0) with their ``qualities`` (not empty when
    there are copies), ``size`` (px); returns (qualities as a tuple, the row width of one clean
    block, the extractor's builder, its weights tag) -- :func:`extractor_model`."""
    check_int(size, "size", minimum=32)
    check_int(copies, "copies", minimum=0)
    qualities = tuple(int(q) for q in qualities)
    if copies and not qualities:
        raise ValueError("qualities: is empty but copies > 0")
    build, weights = extractor_model(extractor)
    return qualities, feature_dim(extractor, size), build, weights


def jpeg_copy(
    qualities: Sequence[int], n: int, seed: int, copy: int, stream: Sequence[int] = ()
) -> tuple[str, np.ndarray]:
    """JPEG copy ``copy`` of ``n`` images in a feature data set: the cache-key suffix of its features
    and each image's quality, drawn from ``qualities`` by ``numpy.random.default_rng([seed, *stream, copy])``
    (``stream`` tells apart image sets that share a seed, e.g. PACS's domains)."""
    draw = np.random.default_rng([seed, *stream, copy])
    quality = np.asarray(qualities)[draw.integers(len(qualities), size=n)]
    return f"_jpeg{'-'.join(map(str, qualities))}_s{seed}c{copy}", quality


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


def extractor_model(name: str) -> tuple[Callable[[], nn.Module], str]:
    """(build, weights tag) of feature extractor ``name``: the package's EfficientNet-Lite0 (pooled, or its
    stages up to a tail's cut: ``efficientnet_lite0_blocks`` all seven, ``efficientnet_lite0_last_stage``
    the first six) or the paper's timm ResNet-18 from the hub (its id as the tag)."""
    if name == "efficientnet_lite0":
        from lib.nets.pretrained import efficientnet_lite0, lite0_fingerprint

        return (lambda: efficientnet_lite0(pretrained=True)), lite0_fingerprint()
    if name in STAGE_EXTRACTORS:
        from lib.nets.lite0_split import Lite0Stem
        from lib.nets.pretrained import lite0_fingerprint

        return (lambda: Lite0Stem(pretrained=True, cut=_STAGE_CUTS[name])), lite0_fingerprint()
    if name == "resnet18":
        from lib.nets.backbones import IMAGENET_RESNET18_HUB_ID, imagenet_resnet18

        return (lambda: imagenet_resnet18(pretrained=True)), IMAGENET_RESNET18_HUB_ID.replace("/", "-")
    raise ValueError(f"extractor: unknown {name!r}; valid: {', '.join([*FEATURE_EXTRACTORS, *STAGE_EXTRACTORS])}")
