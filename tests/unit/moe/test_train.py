"""Tests of lib.moe.train (paper 1 runs through lib.engine): resume equals an uninterrupted run, caching, warmup, every method end to end, schedule."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import lib.moe.methods as methods
import lib.moe.train as train
from lib.data.synthetic import synthetic_images
from lib.engine.loop import fit as fit_classifier
from lib.moe.methods import METHODS
from lib.moe.config import TrainConfig, tiny_config
from lib.moe.train import load_predictions, train_run


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def data():
    return synthetic_images(n_train=96, n_val=48, n_test=64, size=8, num_classes=3, seed=1, hard_frac=0.3)


def tiny(method: str = "vanilla", epochs: int = 1, **kw) -> TrainConfig:
    return tiny_config(method, **{"epochs": epochs, "batch_size": 32, "warmup_epochs": None, **kw})


def _metrics_close(a: dict, b: dict) -> None:
    for split in ("all", "hard"):
        for k, v in a["metrics"][split].items():
            assert v == pytest.approx(b["metrics"][split][k], rel=1e-6, abs=1e-9), (split, k)


def test_resumed_run_equals_uninterrupted_run(data, tmp_path, monkeypatch):
    cfg = tiny("robust", epochs=3, warmup_epochs=1)
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "a"))
    full = train_run(cfg, data)

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "b"))

    class Interrupt(Exception):
        pass

    def stop_after_first(epoch, entry, model):
        if epoch == 1:
            raise Interrupt

    with pytest.raises(Interrupt):
        train_run(cfg, data, callbacks=[stop_after_first])
    assert list((tmp_path / "b").rglob("checkpoint.pt")), "an interrupted run must leave a checkpoint"
    resumed = train_run(cfg, data)
    assert resumed["resumed_from"] == 1 and full["resumed_from"] is None
    assert [h["loss"] for h in resumed["history"]] == pytest.approx([h["loss"] for h in full["history"]], rel=1e-6)
    _metrics_close(resumed, full)
    assert not list((tmp_path / "b").rglob("checkpoint.pt")), "checkpoint removed once the result exists"


def test_finished_run_is_loaded_not_recomputed(data, cache, monkeypatch):
    cfg = tiny("vanilla")
    first = train_run(cfg, data)

    def boom(*args, **kwargs):
        raise AssertionError("recomputed a finished run")

    monkeypatch.setattr(train, "compute_run", boom)
    second = train_run(cfg, data)
    assert second == first
    with pytest.raises(AssertionError):  # a different config is not in the cache
        train_run(cfg.replace(seed=1), data)


def test_mocae_is_vanilla_model_calibrated_post_hoc(data, cache):
    vanilla = train_run(tiny("vanilla", epochs=2), data)
    mocae = train_run(tiny("mocae", epochs=2), data)
    assert mocae["trained_as"]["key"] == vanilla["key"]  # one trained model for both
    assert mocae["history"] == vanilla["history"]
    assert mocae["metrics"]["vanilla_accuracy"]["all"] == vanilla["metrics"]["all"]["accuracy"]
    temps = mocae["metrics"]["expert_temperatures"]
    assert len(temps) == 2 and all(0.1 <= t <= 10 for t in temps)
    # routing is untouched by per-expert temperatures: identical routing entropy
    assert mocae["metrics"]["routing_entropy"] == vanilla["metrics"]["routing_entropy"]
    pv, pm = load_predictions(vanilla), load_predictions(mocae)
    np.testing.assert_array_equal(pv["routing"], pm["routing"])
    np.testing.assert_array_equal(pv["probs_mocae"], pm["probs"])


def test_mocae_accuracy_equals_vanilla_when_temperatures_preserve_argmax():
    """With equal temperatures T_k = 1 the MoCaE mixture is the Vanilla mixture, so accuracy is equal;
    with one expert (K=1) any T_1 leaves the argmax unchanged."""
    from lib.moe.mocae import mocae_probs

    g = torch.Generator().manual_seed(0)
    z = torch.randn(200, 3, 5, generator=g, dtype=torch.float64)
    r = torch.softmax(torch.randn(200, 3, generator=g, dtype=torch.float64), dim=1)
    vanilla = (r[:, :, None] * torch.softmax(z, -1)).sum(1)
    same = mocae_probs(z, r, torch.ones(3, dtype=torch.float64))
    assert torch.allclose(same, vanilla)
    one = mocae_probs(z[:, :1], torch.ones(200, 1, dtype=torch.float64), torch.tensor([3.0], dtype=torch.float64))
    assert torch.equal(one.argmax(1), z[:, 0].argmax(1))


@pytest.mark.parametrize("method", METHODS)
def test_each_method_runs_one_epoch_with_finite_metrics(method, data, cache):
    rec = train_run(tiny(method, warmup_epochs=0), data)
    for split in ("all", "hard"):
        block = rec["metrics"][split]
        assert block["n"] == (64 if split == "all" else int(data.hard_mask.sum()))
        for k in ("accuracy", "ece", "ece_ts", "nll", "brier"):
            assert math.isfinite(block[k]), (method, split, k)
        assert 0 <= block["accuracy"] <= 1 and 0 <= block["ece"] <= 1
    assert rec["history"][0]["objective"] == (
        "erm" if method in ("single", "vanilla", "mocae") else "fgr" if method.startswith("fgr") else "robust"
    )
    preds = load_predictions(rec)
    assert preds["probs"].dtype == np.float16 and preds["probs"].shape == (64, 3)
    np.testing.assert_array_equal(preds["labels"], data.test_y.numpy())


def test_warmup_defaults_to_forty_percent():
    assert TrainConfig(method="robust", epochs=50).warmup == 20
    assert TrainConfig(method="fgr", epochs=5).warmup == 2
    assert TrainConfig(method="robust_filtered", epochs=5, warmup_epochs=0).warmup == 0
    assert TrainConfig(method="vanilla", epochs=50).warmup == 0
    with pytest.raises(ValueError, match="method"):
        TrainConfig(method="nope")
    with pytest.raises(ValueError, match="warmup_epochs"):
        TrainConfig(epochs=3, warmup_epochs=4)


def test_robust_loss_inactive_during_warmup(data, cache, monkeypatch):
    calls = {"n": 0}
    real = methods.tilted_mean

    def spy(l, lam):
        calls["n"] += 1
        return real(l, lam)

    monkeypatch.setattr(methods, "tilted_mean", spy)
    seen = []
    rec = train_run(tiny("robust", epochs=4), data, callbacks=[lambda e, entry, m: seen.append((e, calls["n"]))])
    # 40% of 4 epochs = 2 warmup epochs: no robust loss in epochs 1-2, then one call per step
    steps = -(-96 // 32)
    assert seen == [(1, 0), (2, 0), (3, steps), (4, 2 * steps)]
    assert [h["objective"] for h in rec["history"]] == ["erm", "erm", "robust", "robust"]


def test_fit_classifier_cosine_schedule_and_learning(tmp_path):
    """Generic core: lr follows the closed-form cosine, the loss falls on separable data, and a
    run object makes the second call resume after the last epoch (no further steps)."""
    from calibook.runs import Run

    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 2, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    torch.manual_seed(0)
    model = nn.Linear(2, 2)
    run = Run("test", {"t": 1}, root=tmp_path)
    res = fit_classifier(
        model,
        lambda out, yy, e: nn.functional.cross_entropy(out, yy),
        (x, y),
        5,
        optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.5),
        scheduler_factory=lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5),
        run=run,
        batch_size=64,
        device="cpu",
        progress=False,
    )
    lrs = [h["lr"] for h in res.history]
    assert lrs == pytest.approx([0.5 * (1 + math.cos(math.pi * e / 5)) / 2 for e in range(5)])
    assert res.history[-1]["loss"] < res.history[0]["loss"] < math.log(2) + 0.2
    w = model.weight.detach().clone()
    again = fit_classifier(
        model,
        lambda out, yy, e: nn.functional.cross_entropy(out, yy),
        (x, y),
        5,
        optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.5),
        run=run,
        batch_size=64,
        device="cpu",
        progress=False,
    )
    assert again.resumed_from == 5 and torch.equal(model.weight, w)


def test_inputs_are_validated(data):
    with pytest.raises(ValueError, match="cfg"):
        train_run({"method": "vanilla"}, data)
    with pytest.raises(ValueError, match="data"):
        train_run(tiny(), object())
    with pytest.raises(ValueError, match="epochs"):
        fit_classifier(
            nn.Linear(2, 2),
            lambda o, y, e: o.sum(),
            (torch.zeros(2, 2), torch.zeros(2)),
            0,
            optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1),
        )


def test_cache_key_records_which_backbone_a_run_really_gets(monkeypatch) -> None:
    """A from-scratch fallback must never be reused for a run that could load pretrained weights."""
    import lib.nets.backbones as backbones
    from lib.moe.config import TrainConfig
    from lib.moe.train import backbone_identity

    cfg = TrainConfig(dataset="pacs", method="vanilla", backbone="imagenet_resnet18", pretrained=True)
    monkeypatch.setattr(backbones, "imagenet_weights_available", lambda: False)
    assert backbone_identity(cfg) == "imagenet_resnet18/random-init"
    monkeypatch.setattr(backbones, "imagenet_weights_available", lambda: True)
    assert backbone_identity(cfg) == "imagenet_resnet18/pretrained"
    text = cfg.replace(backbone="text:distilbert-base-uncased", pretrained=False)
    monkeypatch.setattr(backbones, "text_model_available", lambda name: False)
    assert "MiniLM" in backbone_identity(text)
    assert backbone_identity(cfg.replace(backbone="cifar_resnet18", pretrained=False)) == "cifar_resnet18"


def test_the_smoke_scale_tiny_bert_is_its_own_backbone_in_the_key() -> None:
    """The smoke scale's tiny BERT is named, not pathed, in the config and is made on demand, so the
    key names it (not the MiniLM fallback) and no machine path (:func:`lib.moe.train.run_config`)."""
    from lib.moe.config import TrainConfig
    from lib.moe.train import backbone_identity
    from lib.nets.backbones import text_model_available

    assert text_model_available("tiny-random-bert")
    tiny = TrainConfig(dataset="civilcomments", method="vanilla", backbone="text:tiny-random-bert", pretrained=False)
    assert backbone_identity(tiny) == "text:tiny-random-bert"
