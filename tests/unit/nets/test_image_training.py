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
    with pytest.raises(ValueError, match="arch"):
        imt.build_network("vgg16", 8, 10)
    assert isinstance(imt.make_head(4, 0, 3), torch.nn.Linear)
