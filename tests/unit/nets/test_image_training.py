"""Tests of lib.nets.image_training: the standardized features and a head trained on them
recover well-separated clusters, and every prefix of the shuffled training images holds every class."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lib.nets import image_training as imt


def test_standardize_and_train_head():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    x = rng.normal(size=(600, 8)) + 4 * np.eye(3, 8)[y]
    feats = {"head_x": x[:400] * 3 + 1, "val_x": x[400:500] * 3 + 1, "test_x": x[500:] * 3 + 1}
    f = imt.standardize(feats)
    np.testing.assert_allclose(f["head_x"].mean(0).numpy(), 0, atol=1e-5)
    np.testing.assert_allclose(f["head_x"].std(0, unbiased=False).numpy(), 1, atol=1e-3)
    cfg = {"head_hidden": 16, "head_epochs": 30, "head_lr": 0.1, "weight_decay": 5e-4, "batch_size": 64}
    head = imt.train_head(f["head_x"], torch.as_tensor(y[:400]), torch.nn.functional.cross_entropy, cfg, 3)
    acc = float((head(f["test_x"]).argmax(1).numpy() == y[500:]).mean())
    assert acc > 0.95  # Bayes accuracy of these clusters is about 0.99


def test_image_data_prefixes_hold_every_class():
    cfg = {"data": "synthetic", "n_train": 400, "n_val": 20, "n_test": 20, "image_size": 8}
    data = imt.image_data(cfg)
    assert set(data["train_y"][:100].tolist()) == set(range(10))
    assert imt.image_data(cfg)["tag"] == data["tag"]


def test_bad_input_raises_naming_argument():
    with pytest.raises(ValueError, match="data"):
        imt.image_data({"data": "imagenet", "n_train": 10, "n_val": 10, "n_test": 10, "image_size": 8})
    with pytest.raises(ValueError, match="spec"):
        imt.fit_images(10, torch.nn.functional.cross_entropy, (None, None), None, {"arch": "vgg16", "width": 8}, None)
    assert isinstance(imt.make_head({"head_hidden": 0}, 4, 3), torch.nn.Linear)


def test_a_tuned_backbone_is_trained_on_its_own_images_and_scored_by_its_classifier(monkeypatch, tmp_path):
    """With arch efficientnet_lite0 the network comes from lib.nets.lite0_tuning.tune_tail, given the
    first n_backbone training images only; the head, validation and test features are that network's
    features of the images upsampled to feature_size px (here a fake: a 16 px image's mean colour,
    checked by hand), computed once; the cache key records the tuning, and backbone_test_accuracy is
    the tuned classifier's accuracy on the test features (a fake that always says class 3)."""
    import torch.nn.functional as F
    from torch import nn

    from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    got, seen = {}, {"images": 0, "sizes": set()}

    class MeanColour(nn.Module):
        out_features = 3

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen["images"] += len(x)
            seen["sizes"].add(tuple(x.shape[-2:]))
            return x.mean((2, 3))

    def fake_tuned(images, labels, num_classes, size, epochs, lr, run=None, seed=0, on_batch=None):
        got.update(n=len(images), labels=labels.clone(), epochs=epochs, lr=lr, size=size)
        always3 = nn.Linear(3, num_classes)
        with torch.no_grad():
            always3.weight.zero_()
            always3.bias.copy_(torch.eye(num_classes)[3])
        return MeanColour(), always3

    monkeypatch.setattr(imt, "tune_tail", fake_tuned)
    monkeypatch.setattr(imt, "extractor_model", lambda name: (MeanColour, "fake"))
    data = imt.image_data({"data": "synthetic", "n_train": 120, "n_val": 20, "n_test": 40, "image_size": 8})
    cfg = {"arch": "efficientnet_lite0", "n_backbone": 20, "feature_size": 16, "tune_epochs": 2, "tune_lr": 1e-3}
    f = imt.backbone_features(cfg, data)
    assert got["n"] == 20 and got["epochs"] == 2 and got["lr"] == 1e-3 and got["size"] == 16
    assert torch.equal(got["labels"], data["train_y"][:20])
    assert seen == {"images": 100 + 20 + 40, "sizes": {(16, 16)}}
    m, s = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    up = F.interpolate(data["test_x"].float() / 255, size=(16, 16), mode="bilinear", align_corners=False)
    np.testing.assert_allclose(f["test_x"], ((up - m) / s).mean((2, 3)).numpy(), atol=1e-5)
    np.testing.assert_array_equal(f["head_y"], data["train_y"][20:].numpy())
    assert f["head_x"].shape == (100, 3)
    assert f["backbone_test_accuracy"] == pytest.approx(float((data["test_y"] == 3).float().mean()))
    got.clear()
    again = imt.backbone_features(cfg, data)
    assert got == {} and seen["images"] == 160 and np.array_equal(again["test_x"], f["test_x"])  # cached
    imt.backbone_features({**cfg, "tune_lr": 3e-3}, data)
    assert got["lr"] == 3e-3  # the tuning is part of the key
    assert "fine-tuned with XE for 2 epochs on 20 images" in imt.backbone_summary(cfg)
    assert "16 px" in imt.backbone_summary(cfg)
    scratch = {"arch": "resnet18", "width": 16, "n_backbone": 5000, "backbone_epochs": 5}
    assert imt.backbone_summary(scratch) == "resnet18 (width 16) trained with XE on 5000 images for 5 epochs and frozen"
    with pytest.raises(ValueError, match="tune_epochs"):
        imt.backbone_features({**cfg, "tune_epochs": 0}, data)
