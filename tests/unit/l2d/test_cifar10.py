"""Tests of lib.l2d.cifar10: one tiny end-to-end run of the CIFAR-10 study through the
engine, on paper 4's synthetic image data (cached)."""

from __future__ import annotations

from lib.l2d import cifar10 as l2d_cifar10
from lib.nets import image_training


def test_end_to_end_run_on_synthetic_images(tmp_path, monkeypatch, tiny_image_cfg):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    cfg = dict(tiny_image_cfg)
    data = image_training.image_data(cfg)
    out = l2d_cifar10.run_cifar("specialized", 2, "ova", 0, {**cfg, "patience": 5}, data)
    assert len(out["ece_per_expert"]) == 2 and 0 <= out["system_accuracy"] <= 1
