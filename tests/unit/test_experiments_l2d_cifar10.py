"""Tests of lib.experiments.l2d_cifar10: one tiny end-to-end run of the CIFAR-10 study through the
engine, on paper 4's synthetic image data (cached)."""

from __future__ import annotations

from lib.experiments import l2d_cifar10
from lib.experiments import reweighted as rx


def test_end_to_end_run_on_synthetic_images(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    cfg = {"data": "synthetic", "n_train": 64, "n_val": 32, "n_test": 32, "image_size": 8, "mode": "end_to_end",
           "arch": "tiny_cnn", "width": 4, "epochs": 1, "lr": 0.05, "weight_decay": 5e-4, "batch_size": 32,
           "milestones": [60], "warmup": 0, "head_hidden": 0, "head_epochs": 0, "head_lr": 0.0,
           "backbone_epochs": 0, "n_backbone": 0, "coverage": 0.8, "nu": 0.1, "n_bins": 15, "threads": 1}
    data = rx.image_data(cfg)
    out = l2d_cifar10.run_cifar("specialized", 2, "ova", 0, {**cfg, "patience": 5}, data)
    assert len(out["ece_per_expert"]) == 2 and 0 <= out["system_accuracy"] <= 1
