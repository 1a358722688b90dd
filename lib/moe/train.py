"""Paper 1's runs: one trained MoE (or Single Expert) per config, through the book's engine.

Paper: "Calibrated mixture-of-experts under distribution shift", section 5 and Appendix D
(Table 4 settings, evaluation). :func:`train_run` trains one :class:`lib.moe.config.TrainConfig`
through :func:`lib.engine.loop.fit`, cached by config, data and code version and resumable;
:func:`prepare_run` / :func:`finish_run`, the steps before and after the loop, are shared with the
packed grids of :mod:`lib.moe.grid`. ``mocae`` is the ``vanilla`` run of the same config, calibrated
post hoc. The cosine schedule spans all epochs, warmup included."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
from torch import nn

from lib.data.augment import IMAGENET_MEAN, IMAGENET_STD, Augment, default_padding, to_float
from lib.nets import backbones
from lib.engine.device import device_name, resolve_device, seed_everything
from lib.engine.loop import Diverged, FitResult, Member, fit_packed, predict
from lib.engine.packed import OwnStep
from lib.data.bundle import Bundle, check_bundle
from lib.engine.cache import Run, cached_run, load_artifact, provenance, training
from lib.moe import fgr
from lib.moe.config import TrainConfig
from lib.moe.evaluate import evaluate, mocae_calibrate
from lib.moe.methods import (
    FGR_METHODS,
    WARMUP_METHODS,
    Inputs,
    LossFn,
    StepFn,
    Runner,
    build_model,
    method_step,
    objective,
)

GROUP = "moe"  # calibook.runs group of paper-1 runs

__all__ = [
    "backbone_identity",
    "compute_run",
    "finish_run",
    "fit_alone",
    "fit_runs",
    "load_predictions",
    "mocae_view",
    "prepare_run",
    "run_config",
    "train_run",
]

_SPLITS = ("train", "val", "test")


@dataclass
class _Prepared:
    train: tuple[Inputs, torch.Tensor]
    val: tuple[Inputs, torch.Tensor]
    test: tuple[Inputs, torch.Tensor]
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    fgr_inputs: Callable[..., Any] | None = None  # FGR's input rule (images or frozen features; text: None)


def _prepare(cfg: TrainConfig, data: Bundle, backbone: nn.Module | None) -> _Prepared:
    kind = getattr(data, "kind", "images")
    if kind == "text":
        from lib.data.text import tokenize

        tok = getattr(backbone, "tokenizer", None)
        if tok is None:
            raise ValueError(f"backbone: {cfg.backbone!r} has no .tokenizer; text data needs a text backbone")
        enc = [tokenize(getattr(data, f"{s}_texts"), tok, cfg.max_length) for s in _SPLITS]
        return _Prepared(*zip(enc, (data.train_y, data.val_y, data.test_y)))
    splits = [(getattr(data, f"{s}_x"), getattr(data, f"{s}_y")) for s in _SPLITS]
    if kind == "features":  # frozen feature vectors: no pixels, no augmentation
        return _Prepared(*splits, fgr_inputs=partial(fgr.feature_batch, dim=data.dim, copies=data.copies))
    size = int(data.train_x.shape[-1])
    if cfg.image_size is not None and cfg.image_size != size:
        raise ValueError(f"image_size: config says {cfg.image_size} px but the data has {size} px images")
    if backbones.family(cfg.backbone) == "imagenet":  # normalized by ImageNet's statistics, else the images' own
        mean, std = IMAGENET_MEAN, IMAGENET_STD
    else:
        xf = data.train_x[: min(len(data.train_x), 20000)].float() / 255.0
        mean = tuple(round(float(v), 4) for v in xf.mean(dim=(0, 2, 3)))
        std = tuple(round(float(v), 4) for v in xf.std(dim=(0, 2, 3)).clamp_min(1e-3))
    return _Prepared(*splits, mean, std, fgr.image_inputs(mean, std))


def backbone_identity(cfg: TrainConfig) -> str:
    """Which backbone a run actually gets here: pretrained ImageNet weights and DistilBERT fall back
    to random init and the bundled MiniLM when unavailable, and the two must not share a cache key."""
    if backbones.family(cfg.backbone) == "imagenet" and cfg.pretrained:
        return cfg.backbone + "/" + ("pretrained" if backbones.weights_available(cfg.backbone) else "random-init")
    if backbones.family(cfg.backbone) == "text":
        name = cfg.backbone[len("text:") :]
        if cfg.text_fallback and not backbones.text_model_available(name):
            return "text:all-MiniLM-L6-v2 (fallback)"
    return cfg.backbone


def run_config(cfg: TrainConfig, data: Bundle) -> dict[str, Any]:
    """The cache key of a run: the config's result-determining fields, the backbone it actually
    gets when that can differ from the config (:func:`backbone_identity`) and the data's fingerprint."""
    key = {"train": cfg.key(), "data": {"name": data.name, "fingerprint": data.fingerprint()}}
    identity = backbone_identity(cfg)
    if identity != cfg.backbone:
        key["backbone"] = identity
    return key


@dataclass
class PreparedRun:
    """Everything one run needs before its training loop: the model (wrapped so the backbone runs
    under autocast), data on the host, augmentation, the method's step and where to evaluate."""

    cfg: TrainConfig
    device: torch.device
    prep: _Prepared
    runner: nn.Module
    transform: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None
    eval_prep: Callable[[torch.Tensor], torch.Tensor] | None
    loss_fn: LossFn
    step_fn: StepFn | None
    channels_last: bool = False  # images in channels_last on CUDA: the run's (and its pack's) layout

    def member(self, run: Run | None, alone: bool = False, callbacks: Sequence[Callable[..., Any]] = ()) -> Member:
        """This run as a member of :func:`lib.engine.loop.fit_packed`: ``alone``, its model trained as it
        is with its method's own step (FGR's); else as a member of a pack, where runs of one method and
        lambda share one loss call over their leading run dimension and FGR takes its packed step."""
        cfg, step = self.cfg, None
        marks = (self.mark, *callbacks)
        if alone:
            return Member(
                self.runner, self.loss_fn, cfg.seed, self.transform, run, callbacks=marks, step_fn=self.step_fn
            )
        if cfg.method in FGR_METHODS:  # from warmup on, FGR's filtered forward and packed update
            main = partial(objective, cfg.method, lam=cfg.lam, robust_active=True)
            step = OwnStep("fgr", cfg.warmup, main, fgr.packed_fgr_gradients, self.prep.fgr_inputs)
        loss_key = (cfg.method, cfg.lam, cfg.warmup)
        return Member(self.runner, self.loss_fn, cfg.seed, self.transform, run, step, marks, loss_key)

    def optimizer(self, params: Any) -> torch.optim.Optimizer:
        """AdamW (App. D.4: lr, weight decay of the config)."""
        return torch.optim.AdamW(params, lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)

    def scheduler(self, opt: torch.optim.Optimizer) -> Any:
        """Cosine annealing over all epochs."""
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=self.cfg.epochs)

    def mark(self, epoch: int, entry: dict[str, Any], _m: nn.Module) -> None:
        """Record which objective an epoch used (epochs 1..warmup are ERM)."""
        active = self.cfg.method in WARMUP_METHODS and epoch > self.cfg.warmup
        entry["objective"] = ("fgr" if self.cfg.method in FGR_METHODS else "robust") if active else "erm"


def prepare_run(cfg: TrainConfig, data: Bundle, packed: bool = False) -> PreparedRun:
    """Build the model of ``cfg`` (weights from ``cfg.seed``) and its per-step functions for ``data``
    (``packed``: as a run of a pack, whose engine compiles the pack instead of the backbone)."""
    device = resolve_device(cfg.device)
    if cfg.threads is not None and device.type == "cpu":
        torch.set_num_threads(cfg.threads)
    model = build_model(cfg, data.num_classes)
    prep = _prepare(cfg, data, model.backbone)
    pixels = prep.mean is not None
    use_cl = cfg.channels_last and device.type == "cuda" and pixels
    if use_cl:
        model = model.to(memory_format=torch.channels_last)
    runner = Runner(model, compile_backbone=cfg.compile and not packed)
    seed_everything(cfg.seed)
    transform = eval_prep = None
    if pixels:
        pad = cfg.padding if cfg.padding is not None else default_padding(int(prep.train[0].shape[-1]))
        transform = Augment(tuple(prep.mean), tuple(prep.std), pad, use_cl, crop_flip=cfg.augment)
        eval_prep = partial(to_float, mean=prep.mean, std=prep.std, channels_last=use_cl)
    loss_fn, step_fn = method_step(cfg, device, prep.fgr_inputs)
    return PreparedRun(cfg, device, prep, runner, transform, eval_prep, loss_fn, step_fn, use_cl)


def _outputs(out: Any) -> dict[str, torch.Tensor]:
    return {"probs": out.probs, "routing": out.routing, "expert_logits": out.expert_logits}


def finish_run(pr: PreparedRun, data: Bundle, run: Run, fitted: FitResult) -> dict[str, Any]:
    """Evaluate a trained run (validation and test predictions, :func:`lib.moe.evaluate.evaluate`, MoCaE
    for Vanilla), save its ``predictions`` artifact and return its record."""
    cfg, device = pr.cfg, pr.device
    t0 = time.perf_counter()
    val = predict(pr.runner, pr.prep.val[0], device, cfg.eval_batch_size, pr.eval_prep, cfg.amp, collect=_outputs)
    test = predict(pr.runner, pr.prep.test[0], device, cfg.eval_batch_size, pr.eval_prep, cfg.amp, collect=_outputs)
    routing = test["routing"] if cfg.method != "single" else None
    groups, all_mask = getattr(data, "test_groups", None), getattr(data, "all_mask", None)

    def scores(v: Any, t: Any) -> tuple[dict[str, Any], np.ndarray]:
        return evaluate(v, data.val_y, t, data.test_y, data.hard_mask, routing, groups, all_mask=all_mask)

    metrics, test_p = scores(val["probs"], test["probs"])
    arrays = {"probs": test_p.astype(np.float16)}
    if cfg.method == "vanilla":  # MoCaE is post hoc on the same trained model; "converged": a diagnostic
        for name, fit in (("mocae", "paper"), ("mocae_converged", "converged")):
            mv, mt, temps = mocae_calibrate(val, data.val_y, test, fit=fit)
            metrics[name], mocae_p = scores(mv, mt)
            metrics[name]["expert_temperatures"] = temps
            if fit == "paper":
                arrays["probs_mocae"] = mocae_p.astype(np.float16)
    eval_seconds = time.perf_counter() - t0
    run.save_arrays(
        "predictions",
        **arrays,
        labels=data.test_y.numpy().astype(np.int16),
        hard=data.hard_mask.numpy().astype(bool),
        routing=test["routing"].numpy().astype(np.float16),
        temperature=np.float32(metrics["temperature"]),
    )
    model = pr.runner.model
    return {
        "method": cfg.method,
        "dataset": cfg.dataset,
        "history": fitted.history,
        "metrics": metrics,
        "wall_time": {"train": fitted.wall_time, "eval": eval_seconds},
        "resumed_from": fitted.resumed_from,
        "device": device_name(device),
        "data": {
            "name": data.name,
            "source": data.source,
            "sizes": data.sizes(),
            "normalization": {"mean": list(pr.prep.mean or ()), "std": list(pr.prep.std or ())},
        },
        "backbone": getattr(model.backbone, "name", cfg.backbone),
        "pretrained": bool(getattr(model.backbone, "pretrained", False)),
        "provenance": provenance(device),
    }


def fit_runs(
    prs: Sequence[PreparedRun],
    runs: Sequence[Run | None],
    desc: str,
    callbacks: Sequence[Callable[..., Any]] = (),
    compile: bool = False,
) -> list[FitResult]:
    """Train prepared runs of one config but method, seed and lambda (resuming from their ``runs``'
    checkpoints) through the engine's one loop, :func:`lib.engine.loop.fit_packed`: one run alone
    (``PreparedRun.member(run, alone=True)``), several as one pack (prepared with ``packed=True``,
    compiled with ``compile`` or the config's)."""
    pr0, cfg, alone = prs[0], prs[0].cfg, len(prs) == 1
    return fit_packed(
        [pr.member(run, alone, callbacks) for pr, run in zip(prs, runs)],
        pr0.prep.train,
        cfg.epochs,
        optimizer_factory=pr0.optimizer,
        scheduler_factory=pr0.scheduler,
        batch_size=cfg.batch_size,
        device=pr0.device,
        amp=cfg.amp,
        compile=not alone and (compile or cfg.compile),  # alone: the backbone compiles itself (Runner)
        channels_last=pr0.channels_last,
        progress=cfg.progress,
        desc=desc,
    )


def fit_alone(
    pr: PreparedRun, run: Run | None = None, callbacks: Sequence[Callable[..., Any]] = (), desc: str = "train"
) -> FitResult:
    """Train a prepared run alone (:func:`fit_runs` of one; resuming from ``run``'s checkpoint):
    :func:`compute_run`'s loop, the one the engine's self-test compares packs against."""
    return fit_runs([pr], [run], desc, callbacks)[0]


def compute_run(
    cfg: TrainConfig, data: Bundle, run: Run, callbacks: Sequence[Callable[..., Any]] = ()
) -> dict[str, Any]:
    """Train (resuming from ``run``'s checkpoint) and evaluate one run alone (:func:`fit_alone`);
    returns its record (not yet saved: :func:`train_run` caches it). A run that diverges raises
    :class:`lib.engine.loop.Diverged`, as in the grid: nothing is cached, its last good checkpoint stays."""
    pr = prepare_run(cfg, data)
    fitted = fit_alone(pr, run, callbacks, f"{data.name} {cfg.method} s{cfg.seed}")
    if fitted.diverged_at is not None:
        raise Diverged(fitted.diverged_at)
    return finish_run(pr, data, run, fitted)


def mocae_view(base: Mapping[str, Any]) -> dict[str, Any]:
    """The MoCaE fields derived from a finished Vanilla MoE record (same trained model, post hoc
    T_k): method, metrics (with the Vanilla accuracies, to check the paper's claim that they are
    equal) and where it came from. The MoCaE run record is this plus its predictions."""
    metrics = dict(base["metrics"]["mocae"])
    metrics["vanilla_accuracy"] = {s: base["metrics"][s].get("accuracy") for s in ("all", "hard")}
    keep = ("dataset", "history", "wall_time", "resumed_from", "device", "data", "backbone", "provenance")
    return {
        "method": "mocae",
        **{k: base.get(k) for k in keep},
        "metrics": metrics,
        "pretrained": base.get("pretrained", False),
        "trained_as": {"method": "vanilla", "key": base["key"]},
    }


def train_run(cfg: TrainConfig, data: Bundle, callbacks: Sequence[Callable[..., Any]] = ()) -> dict[str, Any]:
    """Train and evaluate one paper-1 run (:func:`finish_run`'s record), cached by ``(cfg, data, code
    version)`` and resumable; test predictions: :func:`load_predictions`. "mocae" is the "vanilla" run
    of the same config calibrated post hoc (:func:`mocae_view`), derived even with training off. A run
    whose training diverges raises :class:`lib.engine.loop.Diverged` (it has no record)."""
    if not isinstance(cfg, TrainConfig):
        raise ValueError(f"cfg: expected a TrainConfig, got {type(cfg).__name__}")
    check_bundle(data)
    if cfg.method != "mocae":
        return cached_run(GROUP, run_config(cfg, data), lambda run: compute_run(cfg, data, run, callbacks))
    base = train_run(cfg.replace(method="vanilla"), data, callbacks)  # RunMissing if training is off

    def mocae_record(run: Run) -> dict[str, Any]:
        p = load_predictions(base)
        same = {k: p[k] for k in ("labels", "hard", "routing")}
        t = np.float32(base["metrics"]["mocae"]["temperature"])
        run.save_arrays("predictions", probs=p["probs_mocae"], **same, temperature=t)
        return mocae_view(base)

    with training(True):  # MoCaE only recalibrates that run post hoc: nothing is trained
        return cached_run(GROUP, run_config(cfg, data), mocae_record)


def load_predictions(record: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Test predictions of a finished run: probs (float16), labels, hard mask, routing, temperature;
    verified against the record (committed copy first, then the cache)."""
    return load_artifact(record, "predictions")
