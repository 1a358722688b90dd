"""Tests of lib.rr.experiment: temperature-scaling metrics, the compared losses' settings,
claims computed from the numbers, and one tiny end-to-end training through the engine (cached,
shared with the L2D CIFAR-10 run)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lib.rr import losses as rw
from lib.nets import image_training as imt
from lib.rr import experiment as rx


def test_evaluate_logits_metrics():
    rng = np.random.default_rng(0)
    n, c = 4000, 5
    z = rng.normal(size=(n, c)) * 2
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = np.array([rng.choice(c, p=row) for row in p])  # labels drawn from the model: calibrated
    m = rx.evaluate_logits(z[:2000], y[:2000], z[2000:], y[2000:])
    assert m["accuracy"] == m["accuracy_ts"]  # a temperature never changes the argmax
    assert m["ece"] < 0.04 and abs(m["temperature"] - 1) < 0.15
    hot = rx.evaluate_logits(3 * z[:2000], y[:2000], 3 * z[2000:], y[2000:])
    assert hot["conf_gap"] > 0.05  # sharpened logits: overconfident
    assert hot["temperature"] == pytest.approx(3.0, rel=0.15)
    assert hot["ece_ts"] < hot["ece"]
    for k in ("ece", "ece_a", "cwece", "cwece_a"):
        assert 0 <= hot[k] <= 1


def test_make_loss_binds_the_settings():
    torch.manual_seed(0)
    z, y = torch.randn(64, 10), torch.randint(0, 10, (64,))
    assert float(rx.make_loss("xe")(z, y)) == pytest.approx(float(F.cross_entropy(z, y)))
    assert float(rx.make_loss("au", coverage=0.6, nu=0.05, n_bins=10)(z, y)) == pytest.approx(
        float(rw.au_loss(z, y, csf="msp", coverage=0.6, nu=0.05, n_bins=10))
    )
    assert float(rx.make_loss("dual_focal")(z, y)) == pytest.approx(
        float(rw.dual_focal_loss(z, y, 5.0, variant="released"))
    )
    with pytest.raises(ValueError, match="name"):
        rx.make_loss("hinge")


def test_end_to_end_runs_are_cached(tmp_path, monkeypatch, tiny_image_cfg):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    cfg = dict(tiny_image_cfg)
    data = imt.image_data(cfg)
    rec = rx.run_loss("au", cfg, data)
    assert 0 <= rec["metrics"]["accuracy"] <= 1 and math.isfinite(rec["metrics"]["ece"])
    assert rx.run_logits(rec)["test"].shape == (32, 10)
    again = rx.run_loss("au", cfg, data)
    assert again["key"] == rec["key"] and again["provenance"] == rec["provenance"]  # loaded, not retrained


def test_evaluate_logits_both_labels_each_temperature_by_its_criterion():
    # Group A: 200 examples with logits [2, 0], 160 correct (label 0); the NLL of group A alone is
    # minimised where sigmoid(2 / T) = 0.8, i.e. T = 2 / ln 4 (hand-computed).
    y = np.r_[np.zeros(160), np.ones(40)].astype(int)
    z = np.tile([2.0, 0.0], (200, 1))
    both = rx.evaluate_logits_both(z, y, z, y, n_bins=1)
    assert both["temperature_nll"] == pytest.approx(2 / math.log(4), rel=1e-4)
    assert both["ece_ts_nll"] == pytest.approx(0.0, abs=1e-4)
    # Add group B (logits [4, 0], all 100 correct): with one bin the ECE fit makes the mean
    # confidence equal the accuracy (300 - 40) / 300 exactly, the NLL fit does not.
    yb = np.r_[y, np.zeros(100, dtype=int)]
    zb = np.r_[z, np.tile([4.0, 0.0], (100, 1))]
    both = rx.evaluate_logits_both(zb, yb, zb, yb, n_bins=1)
    assert both["ece_ts"] == pytest.approx(0.0, abs=2e-3)
    assert both["ece_ts_nll"] > 0.01
    assert both["temperature"] != pytest.approx(both["temperature_nll"], rel=0.05)
    # each label is what evaluate_logits gives with that criterion
    assert both["temperature"] == rx.evaluate_logits(zb, yb, zb, yb, n_bins=1, ts_criterion="ece")["temperature"]
    assert both["temperature_nll"] == rx.evaluate_logits(zb, yb, zb, yb, n_bins=1, ts_criterion="nll")["temperature"]


def test_feature_heads_keep_their_training_accuracy_and_a_diverged_head_is_a_record(
    tmp_path, monkeypatch, tiny_image_cfg
):
    """At mode "features" a record keeps the head's accuracy on its own training features (an XE head
    fits well above chance); a head whose learning rate blows it up leaves a record of NaN
    metrics with the epoch it diverged in, no logits, and the AU sweep shows it as a blank point that
    the page's note names."""
    from lib.rr.pages.losses_cifar10 import au_fit_note, sweep_table

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    cfg = {**tiny_image_cfg, "mode": "features", "n_train": 96, "n_backbone": 32, "backbone_epochs": 1,
           "head_hidden": 8, "head_epochs": 20, "head_lr": 0.05, "coverages": [0.8], "nus": [0.1]}  # fmt: skip
    data = imt.image_data(cfg)
    xe = rx.run_loss("xe", cfg, data)
    assert "diverged_epoch" not in xe and 0.2 < xe["train_accuracy"] <= 1.0  # 10 classes: chance .1
    blown = {**cfg, "head_lr": 1e30, "head_epochs": 5}
    rec = rx.run_loss("au", blown, data)
    assert rec["diverged_epoch"] in range(1, 6) and "train_accuracy" not in rec
    assert all(math.isnan(v) for v in rec["metrics"].values())
    with pytest.raises(ValueError, match="logits"):
        rx.run_logits(rec)
    sweep = sweep_table({"blown": rec}, cfg)  # the sweep's one point (0.8, 0.1)
    assert sweep["val ECE x100"].isna().all() and sweep["diverged epoch"].tolist() == [rec["diverged_epoch"]]
    au = rx.run_loss("au", cfg, data)
    fine = sweep_table({"au": au}, cfg)
    assert fine["diverged epoch"].isna().all() and 0 <= fine["train accuracy"][0] <= 1
    note = au_fit_note({"xe": xe, "au": au}, sweep)
    assert f"{au['train_accuracy']:.3f}" in note and f"{xe['train_accuracy']:.3f}" in note
    assert f"κ = 0.8, ν = 0.1 (epoch {rec['diverged_epoch']})" in note
    assert au_fit_note({"au": au}, sweep) == ""  # nothing to compare with
