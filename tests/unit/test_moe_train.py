"""Tests of lib.moe_train (paper 1 runs through lib.engine): resume equals an uninterrupted run, caching, warmup, methods, losses, schedule."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import lib.moe_train as train
from lib.data.synthetic import synthetic_images
from lib.engine.loop import fit as fit_classifier
from lib.moe_train import METHODS, TrainConfig, load_predictions, objective, train_run

torch.set_num_threads(2)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def data():
    return synthetic_images(n_train=96, n_val=48, n_test=64, size=8, num_classes=3, seed=1, hard_frac=0.3)


def tiny(method: str = "vanilla", epochs: int = 1, **kw) -> TrainConfig:
    base = dict(dataset="synthetic", method=method, epochs=epochs, batch_size=32, backbone="tiny_cnn",
                width=4, lr=3e-3, num_experts=2, router_hidden=8, progress=False)
    base.update(kw)
    return TrainConfig(**base)


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

    monkeypatch.setattr(train, "_compute", boom)
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
    from lib.mocae import mocae_probs

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
    assert rec["history"][0]["objective"] == ("erm" if method in ("single", "vanilla", "mocae") else
                                              "fgr" if method.startswith("fgr") else "robust")
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
    real = train._robust

    def spy(l, lam):
        calls["n"] += 1
        return real(l, lam)

    monkeypatch.setattr(train, "_robust", spy)
    seen = []
    rec = train_run(tiny("robust", epochs=4), data, callbacks=[lambda e, entry, m: seen.append((e, calls["n"]))])
    # 40% of 4 epochs = 2 warmup epochs: no robust loss in epochs 1-2, then one call per step
    steps = -(-96 // 32)
    assert seen == [(1, 0), (2, 0), (3, steps), (4, 2 * steps)]
    assert [h["objective"] for h in rec["history"]] == ["erm", "erm", "robust", "robust"]


def _fake_output(n=16, k=3, c=4, seed=0):
    from lib.moe import MoEOutput

    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, c, generator=g, dtype=torch.float64, requires_grad=True)
    r = torch.softmax(torch.randn(n, k, generator=g, dtype=torch.float64), 1)
    pk = torch.softmax(z, 2)
    p = (r[:, :, None] * pk).sum(1)
    return MoEOutput(probs=p, routing=r, expert_probs=pk, expert_logits=z), torch.randint(0, c, (n,), generator=g)


def test_sync_free_losses_equal_lib_robust():
    """The engine's per-step losses equal lib.moe/lib.robust (whose math their own tests check)."""
    from lib.moe import expert_nll, mixture_nll
    from lib.robust import robust_filtered_loss, robust_moe_loss, routing_relevant_mask

    out, y = _fake_output()
    l = mixture_nll(out, y)
    for method, ref in (
        ("vanilla", l.mean()),
        ("robust", robust_moe_loss(l, 2.0)),
        ("fgr_robust", robust_moe_loss(l, 2.0)),
        ("robust_filtered", robust_filtered_loss(
            l, routing_relevant_mask(l, expert_nll(out, y), out.routing, out.expert_probs, out.probs), 2.0)),
    ):
        mine = objective(method, out, y, 2.0, robust_active=True)
        assert mine.item() == pytest.approx(ref.item(), rel=1e-12)
        g1 = torch.autograd.grad(mine, out.expert_logits, retain_graph=True)[0]
        g2 = torch.autograd.grad(ref, out.expert_logits, retain_graph=True)[0]
        assert torch.allclose(g1, g2, atol=1e-12)
    assert objective("robust", out, y, 2.0, robust_active=False).item() == pytest.approx(l.mean().item())


def test_robust_filtered_empty_set_is_twice_the_mean():
    """S empty (one expert agreeing with the mixture: no regret, no disagreement) -> mean + mean."""
    from lib.moe import MoEOutput

    z = torch.randn(8, 1, 3, dtype=torch.float64)
    pk = torch.softmax(z, 2)
    out = MoEOutput(probs=pk[:, 0], routing=torch.ones(8, 1, dtype=torch.float64), expert_probs=pk, expert_logits=z)
    y = torch.zeros(8, dtype=torch.long)
    l = -pk[:, 0, 0].log()
    assert objective("robust_filtered", out, y, 2.0, True).item() == pytest.approx(2 * l.mean().item(), rel=1e-12)


def test_fit_classifier_cosine_schedule_and_learning(tmp_path):
    """Generic core: lr follows the closed-form cosine, the loss falls on separable data, and a
    run object makes the second call resume after the last epoch (no further steps)."""
    from lib.engine.runs import Run

    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 2, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    torch.manual_seed(0)
    model = nn.Linear(2, 2)
    run = Run("test", {"t": 1}, root=tmp_path)
    res = fit_classifier(
        model, lambda out, yy, e: nn.functional.cross_entropy(out, yy), (x, y), 5,
        optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.5),
        scheduler_factory=lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5),
        run=run, batch_size=64, device="cpu", progress=False,
    )
    lrs = [h["lr"] for h in res.history]
    assert lrs == pytest.approx([0.5 * (1 + math.cos(math.pi * e / 5)) / 2 for e in range(5)])
    assert res.history[-1]["loss"] < res.history[0]["loss"] < math.log(2) + 0.2
    w = model.weight.detach().clone()
    again = fit_classifier(
        model, lambda out, yy, e: nn.functional.cross_entropy(out, yy), (x, y), 5,
        optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.5), run=run, batch_size=64, device="cpu", progress=False,
    )
    assert again.resumed_from == 5 and torch.equal(model.weight, w)


def test_inputs_are_validated(data):
    with pytest.raises(ValueError, match="cfg"):
        train_run({"method": "vanilla"}, data)
    with pytest.raises(ValueError, match="data"):
        train_run(tiny(), object())
    with pytest.raises(ValueError, match="epochs"):
        fit_classifier(nn.Linear(2, 2), lambda o, y, e: o.sum(), (torch.zeros(2, 2), torch.zeros(2)), 0,
                       optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1))


def test_cache_key_records_which_backbone_a_run_really_gets(monkeypatch) -> None:
    """A from-scratch fallback must never be reused for a run that could load pretrained weights."""
    import lib.backbones as backbones
    from lib.moe_train import TrainConfig, backbone_identity

    cfg = TrainConfig(dataset="pacs", method="vanilla", backbone="imagenet_resnet18", pretrained=True)
    monkeypatch.setattr(backbones, "imagenet_weights_available", lambda: False)
    assert backbone_identity(cfg) == "imagenet_resnet18/random-init"
    monkeypatch.setattr(backbones, "imagenet_weights_available", lambda: True)
    assert backbone_identity(cfg) == "imagenet_resnet18/pretrained"
    text = cfg.replace(backbone="text:distilbert-base-uncased", pretrained=False)
    monkeypatch.setattr(backbones, "text_model_available", lambda name: False)
    assert "MiniLM" in backbone_identity(text)
    assert backbone_identity(cfg.replace(backbone="cifar_resnet18", pretrained=False)) == "cifar_resnet18"


class _HostReads(torch.utils._python_dispatch.TorchDispatchMode):
    """Records every op that would make the host wait for the device: reading a value
    (``aten._local_scalar_dense``: ``.item()``, ``float(t)``, ``bool(t)``, ``if t:``) and ops whose
    output size depends on values (``nonzero``, boolean-mask indexing, ...). Training runs on the
    meta device, which holds shapes but no values, so each such read is recorded (with the caller's
    file and line) and answered with a zero; on CUDA each would be a host synchronisation."""

    DATA_DEPENDENT = {
        torch.ops.aten.nonzero.default, torch.ops.aten.masked_select.default,
        torch.ops.aten._unique2.default, torch.ops.aten.unique_consecutive.default,
        torch.ops.aten.repeat_interleave.Tensor,
    }

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def _where(self) -> str:
        import traceback

        frames = [f for f in traceback.extract_stack() if "/lib/" in f.filename and "site-packages" not in f.filename]
        return f"{frames[-1].filename.rsplit('/lib/', 1)[1]}:{frames[-1].lineno}" if frames else "?"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        on_meta = any(isinstance(a, torch.Tensor) and a.device.type == "meta"
                      for a in torch.utils._pytree.tree_leaves((args, kwargs)))
        if on_meta and func is torch.ops.aten._local_scalar_dense.default:
            self.reads.append(self._where())
            return False if args[0].dtype == torch.bool else 0
        bool_index = func is torch.ops.aten.index.Tensor and any(
            i is not None and i.dtype == torch.bool for i in args[1])
        if on_meta and (func in self.DATA_DEPENDENT or bool_index):
            self.reads.append(f"{func} at {self._where()}")
        return func(*args, **kwargs)


@pytest.mark.parametrize("method", ["single", "vanilla", "robust", "robust_filtered", "fgr", "fgr_robust"])
def test_training_steps_never_wait_for_the_device(method):
    """Issue 8: no host synchronisation per step. Two epochs of the engine's real step for each
    method (augmentation, forward, the method's loss or FGR's rectified step, backward, AdamW,
    cosine schedule) run on the meta device; the only value read is the epoch loss, once per epoch."""

    cfg = tiny(method, epochs=4, warmup_epochs=2, batch_size=8)
    model = train._Runner(train.build_model(cfg, 3))
    x = torch.randint(0, 256, (40, 3, 8, 8), dtype=torch.uint8)  # 5 steps per epoch
    y = torch.randint(0, 3, (40,))
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    meta = torch.device("meta")
    loss_fn, step_fn = train.method_step(cfg, meta, mean, std)
    from lib.augment import augment_batch

    reads = _HostReads()
    with reads:
        fit = fit_classifier(
            model, loss_fn, (x, y), cfg.epochs, step_fn=step_fn,
            optimizer_factory=lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=1e-4),
            scheduler_factory=lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.epochs),
            batch_size=8, device=meta, progress=False,
            transform=lambda xb, g: augment_batch(xb, mean, std, generator=g),
        )
    assert len(fit.history) == cfg.epochs  # warmup epochs (ERM) and robust/FGR epochs both ran
    epoch_reads = [r for r in reads.reads if r.startswith("engine/loop.py")]
    assert len(reads.reads) == cfg.epochs and len(epoch_reads) == cfg.epochs, reads.reads
    assert len(set(epoch_reads)) == 1  # one line: the epoch-loss read in fit_classifier


def test_compiled_backbone_trains_like_the_eager_one():
    """``TrainConfig.compile`` (torch.compile of the backbone, inductor; on CPU here, on CUDA in
    paper-scale runs) changes speed, not results: the same steps from the same start end at the
    same weights (SGD: Adam's normalised steps would amplify rounding on near-zero gradients), and
    the option is left out of the cache key."""
    cfg = tiny("robust", epochs=1, warmup_epochs=0, batch_size=8)
    x = torch.randint(0, 256, (24, 3, 8, 8), dtype=torch.uint8)
    y = torch.randint(0, 3, (24,))
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    loss_fn, _ = train.method_step(cfg, torch.device("cpu"), mean, std)
    from lib.augment import augment_batch

    weights = []
    for compiled in (False, True):
        torch.manual_seed(0)
        model = train.build_model(cfg, 3)
        fit_classifier(
            train._Runner(model, compile_backbone=compiled), loss_fn, (x, y), 1,
            optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1), batch_size=8, device="cpu",
            progress=False, transform=lambda xb, g: augment_batch(xb, mean, std, generator=g),
        )
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert not torch.equal(weights[0], torch.cat([p.detach().flatten() for p in train.build_model(cfg, 3).parameters()]))
    torch.testing.assert_close(weights[1], weights[0], rtol=1e-4, atol=1e-5)
    assert cfg.replace(compile=True).key() == cfg.key()


def test_backbone_in_bf16_head_in_float32_under_autocast():
    """The CUDA recipe (bf16 autocast around the step) checked with CPU autocast: the backbone's
    convolutions run in bf16, the MoE head and its probabilities stay float32 (sums to 1 at float32
    precision, not bf16's ~1e-2)."""
    cfg = tiny("vanilla")
    runner = train._Runner(train.build_model(cfg, 3))
    x = torch.randn(16, 3, 8, 8)
    seen = []
    hook = runner.model.backbone.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = runner(x)
    hook.remove()
    assert seen == [torch.bfloat16]
    assert out.probs.dtype == out.routing.dtype == out.expert_probs.dtype == torch.float32
    assert (out.probs.sum(1) - 1).abs().max() < 1e-6
