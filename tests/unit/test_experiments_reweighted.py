"""Tests of lib.experiments.reweighted: temperature-scaling metrics, the compared losses' settings,
claims computed from the numbers, and one tiny end-to-end training through the engine (cached)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lib import reweighted as rw
from lib.experiments import reweighted as rx


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
        float(rw.au_loss(z, y, csf="msp", coverage=0.6, nu=0.05, n_bins=10)))
    assert float(rx.make_loss("dual_focal")(z, y)) == pytest.approx(float(rw.dual_focal_loss(z, y, 5.0, as_released=True)))
    with pytest.raises(ValueError, match="name"):
        rx.make_loss("hinge")


def test_reweighted_claims_follow_the_numbers():
    base = {"accuracy": 0.9, "ece": 0.03, "cwece": 0.006, "conf_gap": 0.0, "ece_ts": 0.02}
    m = {"xe": dict(base), "au": {**base, "ece": 0.01, "cwece": 0.004, "accuracy": 0.89},
         "fl53": {**base, "conf_gap": 0.03}, "inverse_focal": {**base, "conf_gap": -0.03},
         "aurc": {**base, "conf_gap": 0.03}}
    v = {r["claim"]: r["verdict"] for r in rx.reweighted_claims(m, tol=0.005)}
    assert v["AU loss has lower ECE than XE"] == "held"
    assert v["AU loss costs little accuracy (at most 2.5 points below XE)"] == "held"
    assert v["focal loss leaves the model overconfident (mean confidence > accuracy)"] == "held"
    assert v["inverse focal loss leaves the model underconfident"] == "held"
    assert v["AURC loss leaves the model underconfident"] == "did not hold"
    m["au"]["ece"] = 0.029
    v = {r["claim"]: r["verdict"] for r in rx.reweighted_claims(m, tol=0.005)}
    assert v["AU loss has lower ECE than XE"] == "inconclusive at this scale"


def test_standardize_and_train_head():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    x = rng.normal(size=(600, 8)) + 4 * np.eye(3, 8)[y]
    feats = {"head_x": x[:400] * 3 + 1, "val_x": x[400:500] * 3 + 1, "test_x": x[500:] * 3 + 1}
    f = rx.standardize(feats)
    np.testing.assert_allclose(f["head_x"].mean(0).numpy(), 0, atol=1e-5)
    np.testing.assert_allclose(f["head_x"].std(0, unbiased=False).numpy(), 1, atol=1e-3)
    cfg = {"head_hidden": 16, "head_epochs": 30, "head_lr": 0.1, "weight_decay": 5e-4, "batch_size": 64}
    head = rx.train_head(f["head_x"], torch.as_tensor(y[:400]), rx.make_loss("xe"), cfg, 3)
    acc = float((head(f["test_x"]).argmax(1).numpy() == y[500:]).mean())
    assert acc > 0.95  # Bayes accuracy of these clusters is about 0.99


def test_end_to_end_runs_are_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    cfg = {"data": "synthetic", "n_train": 64, "n_val": 32, "n_test": 32, "image_size": 8, "mode": "end_to_end",
           "arch": "tiny_cnn", "width": 4, "epochs": 1, "lr": 0.05, "weight_decay": 5e-4, "batch_size": 32,
           "milestones": [60], "warmup": 0, "head_hidden": 0, "head_epochs": 0, "head_lr": 0.0,
           "backbone_epochs": 0, "n_backbone": 0, "coverage": 0.8, "nu": 0.1, "n_bins": 15, "threads": 1}
    data = rx.image_data(cfg)
    rec = rx.run_loss("au", cfg, data)
    assert 0 <= rec["metrics"]["accuracy"] <= 1 and math.isfinite(rec["metrics"]["ece"])
    assert rx.run_logits(rec)["test"].shape == (32, 10)
    again = rx.run_loss("au", cfg, data)
    assert again["key"] == rec["key"] and again["provenance"] == rec["provenance"]  # loaded, not retrained
    from lib.experiments import l2d as lx

    out = lx.run_cifar("specialized", 2, "ova", 0, {**cfg, "patience": 5}, data)
    assert len(out["ece_per_expert"]) == 2 and 0 <= out["system_accuracy"] <= 1


def test_paper4_plot_helpers_draw_their_data():
    from lib import plots

    x = np.linspace(0.1, 0.9, 9)
    chart = plots.curves_chart(x, {"a": x, "b": 10 * x}, y_domain=(0, 2))
    data = chart.layer[0].data
    assert set(data["curve"]) == {"a", "b"}
    assert data["y"].max() <= 2  # values outside the domain are dropped, not drawn off-axis
    with pytest.raises(ValueError, match="curves"):
        plots.curves_chart(x, {"a": x[:3]})
    import pandas as pd

    df = pd.DataFrame({"k": [0.5, 0.8], "nu": [0.1, 0.1], "v": [1.0, 2.0]})
    hm = plots.heatmap(df, "k", "nu", "v")
    assert any(isinstance(d, pd.DataFrame) and d.equals(df) for d in (hm.data, *(layer.data for layer in hm.layer)))


def test_image_data_prefixes_hold_every_class():
    cfg = {"data": "synthetic", "n_train": 400, "n_val": 20, "n_test": 20, "image_size": 8}
    data = rx.image_data(cfg)
    assert set(data["train_y"][:100].tolist()) == set(range(10))
    assert rx.image_data(cfg)["tag"] == data["tag"]
