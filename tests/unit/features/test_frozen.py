"""Tests of lib.features.frozen: the on-disk feature cache (corruption detected), extraction, FGR's filtered
rows on frozen features, and every paper-1 method training on a feature bundle through the engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from lib.features import frozen
from lib.features.frozen import FeatureBundle
from lib.moe.fgr import feature_batch
from lib.nets.extractors import FeatureInput, extract


def test_cached_features_computes_once_and_recomputes_a_corrupt_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(frozen, "_features_dir", lambda: tmp_path)
    calls = []

    def compute(on_batch) -> np.ndarray:
        calls.append(1)
        on_batch(3)
        return np.arange(12, dtype=np.float32).reshape(3, 4)

    def cached() -> np.ndarray:
        return frozen.cached_features("t", {"j": ("k", 3, compute)})["j"]

    a, b = cached(), cached()
    assert len(calls) == 1 and np.array_equal(a, b) and a.dtype == np.float32
    raw = bytearray((tmp_path / "k.npy").read_bytes())
    raw[-1] ^= 0xFF  # one flipped byte in the data
    (tmp_path / "k.npy").write_bytes(bytes(raw))
    with pytest.warns(UserWarning, match="k.npy: damaged"):
        c = cached()
    assert len(calls) == 2 and np.array_equal(c, a)
    (tmp_path / "k.npy").write_bytes(b"")  # truncated
    with pytest.warns(UserWarning, match="damaged"):
        cached()
    assert len(calls) == 3


class _MeanPool(nn.Module):
    out_features = 3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3))


def test_extract_normalizes_and_filters() -> None:
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (5, 3, 16, 16), dtype=torch.uint8, generator=g)
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    f = extract(_MeanPool(), images, mean, std, batch_size=2)
    m, s = torch.tensor(mean).view(1, 3, 1, 1), torch.tensor(std).view(1, 3, 1, 1)
    assert np.allclose(f, ((images.float() / 255 - m) / s).mean(dim=(2, 3)).numpy(), atol=1e-5)
    from lib.data.jpeg import jpeg_filter

    q = np.array([10, 50, 90, 10, 50])
    ff = extract(_MeanPool(), images, mean, std, quality=q, batch_size=2)
    want = ((jpeg_filter(images.float(), torch.tensor(q, dtype=torch.float32)).clamp(0, 255) / 255 - m) / s).mean(
        dim=(2, 3)
    )
    assert np.allclose(ff, want.numpy(), atol=1e-4) and not np.allclose(ff, f)
    with pytest.raises(ValueError, match="images"):
        extract(_MeanPool(), images.float(), mean, std)


def test_extract_resizes_after_filtering() -> None:
    """With ``size`` each (filtered) image is upsampled bilinearly before the network: a constant image
    stays constant, and a mean-pooling network sees the interpolated image's mean."""
    g = torch.Generator().manual_seed(1)
    images = torch.randint(0, 256, (3, 3, 8, 8), dtype=torch.uint8, generator=g)
    mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    seen: list[tuple[int, ...]] = []

    class Shape(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(tuple(x.shape))
            return x[:, :, 5, 7]  # one pixel of the upsampled image

    f = extract(Shape(), images, mean, std, size=32)
    assert seen == [(3, 3, 32, 32)]
    # pixel (5, 7) of a 4x bilinear upsampling (half-pixel centres): source coordinates (5.5/4 - 0.5,
    # 7.5/4 - 0.5) = (0.875, 1.375), between source rows 0-1 and columns 1-2
    x = images.float() / 255
    r, c = 0.875, 1.375
    top = (1 - (c - 1)) * x[:, :, 0, 1] + (c - 1) * x[:, :, 0, 2]
    bottom = (1 - (c - 1)) * x[:, :, 1, 1] + (c - 1) * x[:, :, 1, 2]
    assert np.allclose(f, ((1 - r) * top + r * bottom).numpy(), atol=1e-6)
    flat = torch.full((1, 3, 8, 8), 77, dtype=torch.uint8)
    assert np.allclose(extract(_MeanPool(), flat, mean, std, size=24), 77 / 255, atol=1e-6)
    with pytest.raises(ValueError, match="size"):
        extract(_MeanPool(), flat, mean, std, size=0)


def _bundle(n: int = 200, dim: int = 6, copies: int = 2, seed: int = 0) -> FeatureBundle:
    g = torch.Generator().manual_seed(seed)
    centres = 3 * torch.randn(3, dim, generator=g)

    def draw(k: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 3, (k,), generator=g)
        return centres[y] + torch.randn(k, dim, generator=g), y

    x, y = draw(n)
    blocks = [x] + [x + 0.1 * (c + 1) for c in range(copies)]  # filtered copy c: shifted by 0.1 (c + 1)
    vx, vy = draw(60)
    tx, ty = draw(60)
    return FeatureBundle(
        name="toy-features",
        train_x=torch.cat(blocks, 1),
        train_y=y,
        val_x=vx,
        val_y=vy,
        test_x=tx,
        test_y=ty,
        hard_mask=torch.ones(60, dtype=torch.bool),
        classes=("a", "b", "c"),
        source="toy",
        dim=dim,
        copies=copies,
        qualities=(15, 25),
    )


def test_fgr_feature_batch_puts_a_filtered_copy_in_front_of_five_percent_of_the_rows() -> None:
    b = _bundle()
    x = b.train_x[:64]
    out, main = feature_batch(x, torch.Generator().manual_seed(1), dim=b.dim, copies=b.copies)
    m = max(1, int(0.05 * 64))
    assert out.shape == (64 + m, x.shape[1]) and torch.equal(out[:64], x)
    assert main.shape == (64,) and int((main >= 64).sum()) == m
    filtered_src = torch.nonzero(main >= 64).flatten()
    for i in filtered_src.tolist():
        row = out[int(main[i])]
        shift = (row[: b.dim] - x[i, : b.dim]).mean().item()
        assert min(abs(shift - 0.1), abs(shift - 0.2)) < 1e-5  # one of the image's own filtered copies
        assert torch.equal(row[b.dim :], x[i, b.dim :])
    unfiltered = [i for i in range(64) if i not in set(filtered_src.tolist())]
    assert torch.equal(main[unfiltered], torch.tensor(unfiltered))
    plain = _bundle(copies=0)
    same, rows = feature_batch(plain.train_x[:10], dim=plain.dim, copies=plain.copies)
    assert torch.equal(same, plain.train_x[:10]) and torch.equal(rows, torch.arange(10))


def test_bundle_fingerprint_and_the_backbone_checks_its_extractor() -> None:
    b = _bundle()
    assert b.fingerprint() != _bundle(seed=1).fingerprint() and b.sizes()["hard"] == 60
    body = FeatureInput("efficientnet_lite0")
    assert body.out_features == 1280 and torch.equal(
        body(torch.arange(2 * 2560.0).view(2, 2560)), torch.arange(2 * 2560.0).view(2, 2560)[:, :1280]
    )
    with pytest.raises(ValueError, match="extractor"):
        FeatureInput("vgg")


def test_every_method_trains_on_features_through_the_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    from lib.nets import extractors
    from lib.moe import experiment as exp
    from lib.moe.grid import run_grid

    monkeypatch.setitem(extractors.FEATURE_EXTRACTORS, "toy", 6)
    data = _bundle()
    seen = []
    from lib.moe import fgr

    real = fgr.feature_batch
    monkeypatch.setattr(fgr, "feature_batch", lambda x, *a, **k: seen.append(x.shape) or real(x, *a, **k))
    settings = {
        "dataset": "toy",
        "epochs": 4,
        "batch_size": 32,
        "lr": 0.01,
        "backbone": "features:toy",
        "pretrained": True,
        "augment": False,
        "num_experts": 2,
        "router_hidden": 8,
        "methods": list(exp.METHODS),
        "seeds": [0],
    }
    records = run_grid(exp.train_configs(settings), data, stack=8)
    accs = {r["method"]: r["metrics"]["all"]["accuracy"] for r in records}
    assert set(accs) == set(exp.METHODS)
    assert min(accs.values()) > 0.7, accs  # three separated clusters (chance 1/3): every method learns them
    assert seen and all(s[1] == 18 for s in seen)  # FGR's filtered rows came from the bundle's copies
    assert all(r["backbone"].startswith("toy (ImageNet weights, frozen") and r["pretrained"] for r in records)
