"""Tests of lib.features.cifar_features: CIFAR-10H as frozen stage activations of upsampled images, with a
fake linear extractor whose rows can be recomputed by hand (upsampling, ImageNet normalization, JPEG)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD
from lib.data.images import ImageBundle
from lib.data.jpeg import jpeg_filter


def _cifar(n_train: int = 12, n_val: int = 4, n_test: int = 6, seed: int = 0) -> ImageBundle:
    g = torch.Generator().manual_seed(seed)

    def imgs(n: int) -> torch.Tensor:
        return torch.randint(0, 256, (n, 3, 8, 8), dtype=torch.uint8, generator=g)

    human = torch.softmax(torch.randn(n_test, 10, generator=g), 1)
    return ImageBundle(
        name="cifar10h",
        train_x=imgs(n_train),
        train_y=torch.arange(n_train) % 10,
        val_x=imgs(n_val),
        val_y=torch.arange(n_val) % 10,
        test_x=imgs(n_test),
        test_y=torch.arange(n_test) % 10,
        hard_mask=torch.arange(n_test) % 3 == 0,
        all_mask=torch.arange(n_test) < n_test - 1,
        human_probs=human,
        classes=tuple("abcdefghij"),
        source="toy CIFAR",
    )


def _fake_extractor(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, object]:
    """A fixed random linear map of the (normalized, 32 px) image to the 320 columns of a 32 px
    stage activation; counts the images it sees."""
    from lib.features import frozen as features

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    weight = torch.randn(3 * 32 * 32, 320, generator=torch.Generator().manual_seed(3)) / 64
    seen: dict[str, object] = {"images": 0, "weight": weight}

    class Linear(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen["images"] = int(seen["images"]) + len(x)  # type: ignore[call-overload]
            return x.flatten(1) @ weight

    monkeypatch.setattr(features, "extractor_model", lambda name: (Linear, "fake"))
    return seen


def _by_hand(x: torch.Tensor, weight: torch.Tensor, quality: np.ndarray | None = None) -> torch.Tensor:
    """The fake extractor's rows for uint8 images ``x``, computed step by step."""
    px = x.float()
    if quality is not None:
        px = jpeg_filter(px, torch.tensor(quality, dtype=torch.float32)).clamp(0, 255)
    up = F.interpolate(px / 255, size=(32, 32), mode="bilinear", align_corners=False)
    m, s = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return ((up - m) / s).flatten(1) @ weight


def test_rows_are_the_upsampled_images_activations_with_a_jpeg_copy_behind(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from lib.features.cifar_features import cifar10h_features

    seen = _fake_extractor(monkeypatch, tmp_path)
    b = _cifar()
    f = cifar10h_features(b, size=32, copies=1, qualities=(15, 25))
    w = seen["weight"]
    assert f.dim == 320 and f.train_x.shape == (12, 640) and f.test_x.shape == (6, 320)
    # stage activations are not standardized; the cache holds float16
    tol = {"atol": 2e-2, "rtol": 1e-2}
    torch.testing.assert_close(f.train_x[:, :320], _by_hand(b.train_x, w), **tol)
    torch.testing.assert_close(f.val_x, _by_hand(b.val_x, w), **tol)
    torch.testing.assert_close(f.test_x, _by_hand(b.test_x, w), **tol)
    q = np.asarray((15, 25))[np.random.default_rng([0, 0]).integers(2, size=12)]
    torch.testing.assert_close(f.train_x[:, 320:], _by_hand(b.train_x, w, q), **tol)
    assert not torch.allclose(f.train_x[:, 320:], f.train_x[:, :320], atol=0.1)
    # the split's labels, masks, human labels and images carry over
    for name in ("train_y", "val_y", "test_y", "hard_mask", "all_mask", "human_probs"):
        assert torch.equal(getattr(f, name), getattr(b, name)), name
    assert torch.equal(f.test_images, b.test_images) and f.sizes() == {
        "train": 12,
        "val": 4,
        "test": 6,
        "hard": 2,
        "all": 5,
    }
    assert seen["images"] == 12 + 4 + 6 + 12


def test_features_are_computed_once_per_image_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, progress_totals: list[int]
) -> None:
    from lib.features import cifar_features as cf

    seen = _fake_extractor(monkeypatch, tmp_path)
    totals = progress_totals
    b = _cifar()
    first = cf.cifar10h_features(b, size=32, copies=1)
    again = cf.cifar10h_features(b, size=32, copies=1)
    assert seen["images"] == 34 and torch.equal(first.train_x, again.train_x)
    assert first.fingerprint() == again.fingerprint()
    cf.cifar10h_features(b, size=32, copies=2)  # only the second copy is new
    other = _cifar(seed=1)  # other images: other files, whatever their labels
    cf.cifar10h_features(other, size=32, copies=0)
    assert totals == [34, 0, 12, 22] and seen["images"] == 34 + 12 + 22
    # a different "all" sample is a different bundle for the run cache
    b.all_mask = torch.ones(6, dtype=torch.bool)
    assert cf.cifar10h_features(b, size=32, copies=1).fingerprint() != first.fingerprint()


def test_bad_input_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from lib.features.cifar_features import cifar10h_features

    _fake_extractor(monkeypatch, tmp_path)
    b = _cifar()
    with pytest.raises(ValueError, match="images: expected the CIFAR-10H ImageBundle"):
        cifar10h_features({"train_x": b.train_x}, size=32)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size"):
        cifar10h_features(b, size=16)
    with pytest.raises(ValueError, match="qualities"):
        cifar10h_features(b, size=32, copies=1, qualities=())
    with pytest.raises(ValueError, match="size: must be a multiple of 32"):
        cifar10h_features(b, size=48)
