"""Tests of lib.features.pacs_features: PACS as frozen features (the rows by hand, the cache, the
progress line's total), with a fake linear extractor whose features can be recomputed by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from lib.nets.extractors import extract


def _fake_pacs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, times: int = 1) -> dict[str, int]:
    """PACS with 8x8 random images per domain and a fixed random linear 'extractor' (192 -> 1280),
    so features can be recomputed by hand; returns how many images each extraction saw."""
    from lib.features import frozen as features
    from lib.features import pacs_features as module

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    sizes = {"photo": 20 * times, "art_painting": 16 * times, "cartoon": 24 * times, "sketch": 12 * times}
    gen = torch.Generator().manual_seed(0)
    domains = {
        d: (
            torch.randint(0, 256, (n, 3, 8, 8), generator=gen, dtype=torch.uint8),
            torch.randint(0, 7, (n,), generator=gen),
        )
        for d, n in sizes.items()
    }
    monkeypatch.setattr(module, "pacs_domain", lambda d, size, data_dir=None: (*domains[d], "/fake/pacs"))
    pooled, stage = torch.randn(192, 1280, generator=gen) / 16, torch.randn(192, 192, generator=gen) / 16
    seen: dict[str, int] = {"images": 0}

    class Linear(nn.Module):
        def __init__(self, weight: torch.Tensor = pooled) -> None:
            super().__init__()
            self.weight = weight

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen["images"] += len(x)
            return x.flatten(1) @ self.weight

    def model(name: str):  # stage extractors: 192 columns, Lite0's last-stage input at 32 px
        return (lambda: Linear(stage)) if name in features.STAGE_EXTRACTORS else Linear, "fake"

    monkeypatch.setattr(features, "extractor_model", model)
    seen["domains"] = domains  # type: ignore[assignment]
    seen["model"] = Linear()  # type: ignore[assignment]
    seen["stage_model"] = Linear(stage)  # type: ignore[assignment]
    return seen


def test_pacs_features_are_the_extractors_rows_standardized_with_the_clean_training_rows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
    from lib.features.pacs_features import pacs_features

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    seen = _fake_pacs(monkeypatch, tmp_path)
    got = pacs_features("sketch", size=32, copies=1)
    # 3 source domains clean + filtered, the target clean: 7 extractions of 20+16+24 and 12 images
    assert seen["images"] == 2 * 60 + 12
    err = capsys.readouterr().err
    assert "PACS features" in err and "image 132/132" in err.splitlines()[-1]
    # a training row is its image's feature (cached as float16), standardized with the clean training
    # rows, followed by its filtered copy; validation rows (clean only) are the other 10% of the sources
    src_x = torch.cat([seen["domains"][d][0] for d in ("photo", "art_painting", "cartoon")])
    raw = torch.from_numpy(extract(seen["model"], src_x, IMAGENET_MEAN, IMAGENET_STD))
    perm = np.random.default_rng(0).permutation(60)
    train_idx = np.sort(perm[int(round(0.1 * 60)) :])
    mu, sd = raw[train_idx].mean(0), raw[train_idx].std(0, unbiased=False) + 1e-6
    val_idx = np.sort(perm[: int(round(0.1 * 60))])
    assert got.train_x.shape == (len(train_idx), 2 * 1280) and got.val_x.shape == (len(val_idx), 1280)
    for rows, idx in ((got.train_x[:, :1280], train_idx), (got.val_x, val_idx)):
        torch.testing.assert_close(rows, (raw[idx].half().float() - mu) / sd, atol=2e-2, rtol=1e-2)
    assert got.test_x.shape == (12, 1280) and "JPEG" in got.source
    before = seen["images"]
    capsys.readouterr()
    again = pacs_features("sketch", size=32, copies=1)  # all cached: no extraction, no progress line
    assert seen["images"] == before and capsys.readouterr().err == ""
    assert torch.equal(again.train_x, got.train_x) and again.fingerprint() == got.fingerprint()


def test_pacs_features_count_every_uncached_image_before_the_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, progress_totals: list[int]
) -> None:
    """The progress total is known before extraction starts (its time left holds from the first
    image): every image of every feature file not yet cached, the cached ones not counted."""
    from lib.features import pacs_features as feats

    _fake_pacs(monkeypatch, tmp_path)
    totals = progress_totals
    feats.pacs_features("sketch", size=32, copies=1)
    feats.pacs_features("sketch", size=32, copies=2)  # new: a second filtered copy
    feats.pacs_features("sketch", size=32, copies=2)  # all cached
    # sources 20+16+24 = 60 images, target 12: clean all (72) + one filtered copy of the sources (60);
    # then only the second copy (60); then nothing
    assert totals == [132, 60, 0]
