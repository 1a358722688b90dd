"""Tests of lib.data.pacs_features: PACS as frozen features (mirrored training rows, the cache, the
progress line's total), with a fake linear extractor whose features can be recomputed by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from lib.data.features import extract


def _fake_pacs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, int]:
    """PACS with 8x8 random images per domain and a fixed random linear 'extractor' (192 -> 1280),
    so features can be recomputed by hand; returns how many images each extraction saw."""
    import lib.data.image_files as files
    from lib.data import features

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

    monkeypatch.setattr(features, "extractor_model", lambda name: (Linear, "fake"))
    seen["domains"] = domains  # type: ignore[assignment]
    seen["model"] = Linear()  # type: ignore[assignment]
    return seen


def test_pacs_features_mirror_the_training_images_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
    from lib.data.pacs_features import pacs_features

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
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, progress_totals: list[int]
) -> None:
    """The progress total is known before extraction starts (its time left holds from the first
    image): every image of every feature file not yet cached, the cached ones not counted."""
    from lib.data import pacs_features as feats

    _fake_pacs(monkeypatch, tmp_path)
    totals = progress_totals
    feats.pacs_features("sketch", size=32, copies=1)
    feats.pacs_features("sketch", size=32, copies=2, flip=True)  # new: a second filtered copy, mirrored rows
    feats.pacs_features("sketch", size=32, copies=2, flip=True)  # all cached
    # sources 20+16+24 = 60 images, target 12: clean all (72) + one filtered copy of the sources (60);
    # then only the second copy (60) and the mirrored sources (60); then nothing
    assert totals == [132, 120, 0]
