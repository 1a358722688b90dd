"""Tests of lib.data.features: the on-disk feature cache (corruption detected), extraction, FGR's filtered
rows on frozen features, and every paper-1 method training on a feature bundle through the engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from lib.data.features import FeatureBundle, FeatureInput, cached_array, extract


def test_cached_array_computes_once_and_recomputes_a_corrupt_file(tmp_path: Path) -> None:
    calls = []

    def compute() -> np.ndarray:
        calls.append(1)
        return np.arange(12, dtype=np.float32).reshape(3, 4)

    a = cached_array("k", compute, folder=tmp_path)
    b = cached_array("k", compute, folder=tmp_path)
    assert len(calls) == 1 and np.array_equal(a, b) and a.dtype == np.float32
    raw = bytearray((tmp_path / "k.npy").read_bytes())
    raw[-1] ^= 0xFF  # one flipped byte in the data
    (tmp_path / "k.npy").write_bytes(bytes(raw))
    c = cached_array("k", compute, folder=tmp_path)
    assert len(calls) == 2 and np.array_equal(c, a)
    (tmp_path / "k.npy").write_bytes(b"")  # truncated
    cached_array("k", compute, folder=tmp_path)
    assert len(calls) == 3
    with pytest.raises(ValueError, match="key"):
        cached_array("a/b", compute, folder=tmp_path)


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
    from lib.moe.jpeg import jpeg_filter

    q = np.array([10, 50, 90, 10, 50])
    ff = extract(_MeanPool(), images, mean, std, quality=q, batch_size=2)
    want = ((jpeg_filter(images.float(), torch.tensor(q, dtype=torch.float32)).clamp(0, 255) / 255 - m) / s).mean(
        dim=(2, 3)
    )
    assert np.allclose(ff, want.numpy(), atol=1e-4) and not np.allclose(ff, f)
    with pytest.raises(ValueError, match="images"):
        extract(_MeanPool(), images.float(), mean, std)


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


def test_fgr_inputs_put_a_filtered_copy_in_front_of_five_percent_of_the_rows() -> None:
    b = _bundle()
    x = b.train_x[:64]
    out, main = b.fgr_inputs(x, torch.Generator().manual_seed(1))
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
    same, rows = plain.fgr_inputs(plain.train_x[:10])
    assert torch.equal(same, plain.train_x[:10]) and torch.equal(rows, torch.arange(10))


def test_bundle_and_backbone_validate_their_shapes() -> None:
    b = _bundle()
    with pytest.raises(ValueError, match="train_x"):
        FeatureBundle(**{**b.__dict__, "copies": 1})
    with pytest.raises(ValueError, match="test_x"):
        FeatureBundle(**{**b.__dict__, "test_x": b.test_x[:, :3]})
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
    import lib.data.features as features
    from lib.moe import experiment as exp

    monkeypatch.setitem(features.FEATURE_EXTRACTORS, "toy", 6)
    data = _bundle()
    seen = []
    real = FeatureBundle.fgr_inputs
    monkeypatch.setattr(FeatureBundle, "fgr_inputs", lambda self, x, g=None: seen.append(x.shape) or real(self, x, g))
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
    records = exp.run_methods(exp.train_configs(settings), data, stack=8)
    accs = {r["method"]: r["metrics"]["all"]["accuracy"] for r in records}
    assert set(accs) == set(exp.METHODS)
    assert min(accs.values()) > 0.7, accs  # three separated clusters (chance 1/3): every method learns them
    assert seen and all(s[1] == 18 for s in seen)  # FGR's filtered rows came from the bundle's copies
    assert all(r["backbone"].startswith("toy (ImageNet weights, frozen") and r["pretrained"] for r in records)


def _fake_pacs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, int]:
    """PACS with 8x8 random images per domain and a fixed random linear 'extractor' (192 -> 1280),
    so features can be recomputed by hand; returns how many images each extraction saw."""
    import lib.data.image_files as files
    import lib.data.features as feats

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    sizes = {"photo": 20, "art_painting": 16, "cartoon": 24, "sketch": 12}
    gen = torch.Generator().manual_seed(0)
    domains = {
        d: (
            torch.randint(0, 256, (n, 3, 8, 8), generator=gen, dtype=torch.uint8),
            torch.randint(0, 7, (n,), generator=gen),
        )
        for d, n in sizes.items()
    }
    monkeypatch.setattr(files, "pacs_domain", lambda d, size, data_dir=None: (*domains[d], "/fake/pacs"))
    weight = torch.randn(192, 1280, generator=gen) / 16
    seen: dict[str, int] = {"images": 0}

    class Linear(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen["images"] += len(x)
            return x.flatten(1) @ weight

    monkeypatch.setattr(feats, "_extractor", lambda name: (Linear, "fake"))
    seen["domains"] = domains  # type: ignore[assignment]
    seen["model"] = Linear()  # type: ignore[assignment]
    return seen


def test_pacs_features_mirror_the_training_images_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
    from lib.data.features import pacs_features

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    seen = _fake_pacs(monkeypatch, tmp_path)
    plain = pacs_features("sketch", size=32, copies=1)
    # 3 source domains clean + filtered, the target clean: 7 extractions of 20+16+24 and 12 images
    assert seen["images"] == 2 * 60 + 12
    err = capsys.readouterr().err
    assert "PACS features" in err and "image 132/132" in err.splitlines()[-1]
    flipped = pacs_features("sketch", size=32, copies=1, flip=True)
    assert seen["images"] == 2 * 60 + 12 + 60  # only the mirrored sources were new
    n = len(plain.train_y)
    assert flipped.train_x.shape == (2 * n, 2 * 1280) and torch.equal(flipped.train_y, torch.cat([plain.train_y] * 2))
    # clean rows, validation, test and the standardization are those without mirroring
    torch.testing.assert_close(flipped.train_x[:n], plain.train_x)
    torch.testing.assert_close(flipped.val_x, plain.val_x)
    torch.testing.assert_close(flipped.test_x, plain.test_x)
    # a mirrored row is the mirrored image's feature, standardized as the clean rows, with the
    # unmirrored image's filtered copy behind it
    src_x = torch.cat([seen["domains"][d][0] for d in ("photo", "art_painting", "cartoon")])
    before = seen["images"]
    raw = torch.from_numpy(extract(seen["model"], src_x, IMAGENET_MEAN, IMAGENET_STD))
    raw_m = torch.from_numpy(extract(seen["model"], src_x.flip(-1), IMAGENET_MEAN, IMAGENET_STD))
    perm = np.random.default_rng(0).permutation(60)
    train_idx = np.sort(perm[int(round(0.1 * 60)) :])
    mu, sd = raw[train_idx].mean(0), raw[train_idx].std(0, unbiased=False) + 1e-6
    expect = (raw_m[train_idx].half().float() - mu) / sd  # cached as float16
    torch.testing.assert_close(flipped.train_x[n:, :1280], expect, atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(flipped.train_x[n:, 1280:], plain.train_x[:, 1280:])
    assert flipped.fingerprint() != plain.fingerprint() and "mirrored" in flipped.source
    capsys.readouterr()
    pacs_features("sketch", size=32, copies=1, flip=True)  # all cached: no extraction, no progress line
    assert seen["images"] == before + 120 and capsys.readouterr().err == ""  # only this test's own two
    with pytest.raises(ValueError, match="flip"):
        pacs_features("sketch", size=32, flip="yes")  # type: ignore[arg-type]


def test_pacs_features_count_every_uncached_image_before_the_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The progress total is known before extraction starts (its time left holds from the first
    image): every image of every feature file not yet cached, the cached ones not counted."""
    from lib.data import features as feats
    from lib.engine import progress

    _fake_pacs(monkeypatch, tmp_path)
    totals: list[int] = []
    real = progress.session

    def spy(desc: str, epochs: int, *args: object, **kw: object):  # type: ignore[no-untyped-def]
        totals.append(epochs)
        return real(desc, epochs, *args, **kw)

    monkeypatch.setattr(progress, "session", spy)
    feats.pacs_features("sketch", size=32, copies=1)
    feats.pacs_features("sketch", size=32, copies=2, flip=True)  # new: a second filtered copy, mirrored rows
    feats.pacs_features("sketch", size=32, copies=2, flip=True)  # all cached
    # sources 20+16+24 = 60 images, target 12: clean all (72) + one filtered copy of the sources (60);
    # then only the second copy (60) and the mirrored sources (60); then nothing
    assert totals == [132, 120, 0]
