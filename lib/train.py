"""The training engine: one loop for every method of paper 1, built on a reusable generic core.

Paper: "Calibrated mixture-of-experts under distribution shift" (papers/calibrated-moe-under-shift.txt),
section 5 and Appendix D; SPEC section 2 (objectives, warmup, Table 4 settings, evaluation).

Two layers:

* :func:`fit_classifier` -- the generic core: a model, a loss ``loss_fn(output, y, epoch)``, data on
  the device, an optimizer and scheduler factory, and an optional :class:`lib.runs.Run` for
  checkpoint-every-epoch and resume. Anything that trains a classifier in the book (the
  learning-to-defer and reweighted-loss notebooks, with their own losses and SGD schedules) can
  reuse it; see its docstring for the contract.
* :func:`train_run` -- paper 1: a :class:`TrainConfig` (dataset, method, epochs, ...) and a data
  bundle -> a cached result record (config, per-epoch losses, final metrics on all test points and
  on the hard subset, routing entropy, wall time, device, provenance) plus test predictions saved as
  a compressed npz (:func:`load_predictions`). :func:`run_grid` runs many configs, sequentially or
  as separate processes sharing one GPU.

Methods: ``single`` (backbone + one linear layer), ``vanilla`` (MoE, mean mixture NLL), ``mocae``
(not trained again: it loads or trains the ``vanilla`` run of the same config and fits per-expert
temperatures on validation post hoc), ``robust`` (tilted objective, eq. 6/12), ``robust_filtered`` (App. D.3),
``fgr`` and ``fgr_robust`` (lib.fgr, App. D.1). Robust methods and FGR train with plain ERM on the
mixture loss for the first ``warmup_epochs`` (default 40% of the epochs); the cosine schedule spans
all epochs and ignores the switch. Every method does exactly one backbone forward per step, except
FGR's two (by design).

Speed: images stay uint8 on the device and are augmented there (lib.augment); on CUDA the backbone
runs under bf16 autocast in channels_last memory format while the MoE head and all losses run in
float32; the epoch loss is accumulated on the device and read once per epoch: no step of any
method synchronises with the host. The per-step losses are the sync-free cores of lib.moe and
lib.robust (label_nll, tilted_mean, filtered_tilted_mean), whose checked public versions validate
their input with host syncs; tests/unit/test_train.py checks that they agree and, by running
whole epochs on PyTorch's meta device (where any read of a value fails), that the step is sync-free.

Used in: notebooks/cifar10h, notebooks/pacs, notebooks/civilcomments, notebooks/sensitivity,
notebooks/l2d_cifar10 and notebooks/losses_cifar10 (through fit_classifier), bench/bench_epoch.py.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import random
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from lib.augment import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    BatchIterator,
    augment_batch,
    default_padding,
    epoch_generator,
    to_float,
)
from lib.moe import label_nll
from lib.robust import filtered_tilted_mean, relevant_mask, tilted_mean
from lib.runs import Run, autocast, cached_run, device_name, provenance
from lib.validation import check_choice, check_positive

METHODS: tuple[str, ...] = ("single", "vanilla", "mocae", "fgr", "robust", "robust_filtered", "fgr_robust")
ROBUST_METHODS: tuple[str, ...] = ("robust", "robust_filtered", "fgr_robust")
WARMUP_METHODS: tuple[str, ...] = ("fgr", "robust", "robust_filtered", "fgr_robust")
FGR_METHODS: tuple[str, ...] = ("fgr", "fgr_robust")
WARMUP_FRACTION = 0.4  # SPEC section 2: 20 of 50 epochs (images), 2 of 5 (text)
GROUP = "moe"  # lib.runs group of paper-1 runs: <cache>/runs/moe/<key>/, results/moe/<key>.json
N_BINS = 15

__all__ = [
    "METHODS",
    "TrainConfig",
    "FitResult",
    "fit_classifier",
    "train_run",
    "run_grid",
    "load_predictions",
    "commit_result",
    "build_model",
    "objective",
    "method_step",
    "predict",
    "evaluate",
    "resolve_device",
]


# ----------------------------------------------------------------------------------------------
# Generic core
# ----------------------------------------------------------------------------------------------


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; anything else is passed to ``torch.device``."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device: cannot be parsed ({err})") from None


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA) global generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@dataclass
class FitResult:
    """What :func:`fit_classifier` returns: per-epoch history, wall time (summed over resumed
    sessions) and the epoch a run resumed from (``None`` if it started fresh)."""

    history: list[dict[str, Any]]
    wall_time: float
    resumed_from: int | None = None


Inputs = Any  # a tensor or a dict of tensors (tokenized text)
LossFn = Callable[[Any, torch.Tensor, int], torch.Tensor]
StepFn = Callable[[nn.Module, Inputs, torch.Tensor, torch.optim.Optimizer, int, torch.Generator], "torch.Tensor | None"]


def fit_classifier(
    model: nn.Module,
    loss_fn: LossFn,
    data: tuple[Inputs, torch.Tensor],
    epochs: int,
    optimizer_factory: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer],
    scheduler_factory: Callable[[torch.optim.Optimizer], Any] | None = None,
    run: Run | None = None,
    *,
    batch_size: int = 128,
    seed: int = 0,
    device: str | torch.device = "auto",
    transform: Callable[[Inputs, torch.Generator], Inputs] | None = None,
    forward: Callable[[nn.Module, Inputs], Any] | None = None,
    step_fn: StepFn | None = None,
    scheduler_interval: str = "epoch",
    amp: bool = True,
    callbacks: Sequence[Callable[[int, dict[str, Any], nn.Module], None]] = (),
    progress: bool = True,
    desc: str = "train",
    drop_last: bool = False,
) -> FitResult:
    """Train ``model`` for ``epochs`` epochs, checkpointing every epoch and resuming if ``run`` has one.

    Contract (for the paper-1 loop and the notebooks that reuse it):

    * ``data = (x, y)``: training inputs (uint8 image tensor, float tensor, or a dict of tensors such
      as tokenized text) and targets (any tensor whose first dimension is N, e.g. labels, or labels
      with expert predictions for learning to defer). They are moved to the device once.
    * Each epoch e draws its batch order from ``(seed, e)`` and passes a CPU generator seeded by
      ``(seed, e)`` to ``transform(x_batch, generator)`` (device-side augmentation and
      normalization), so a resumed run sees the same batches and augmentations.
    * Per step: ``out = forward(model, inputs)`` (default ``model(inputs)``) under bf16 autocast on
      CUDA when ``amp``; ``loss = loss_fn(out, y_batch, epoch)``; backward; ``optimizer.step()``.
      ``step_fn(model, inputs, y, optimizer, epoch, generator)``, when given, may take over a step
      (do its own backward and ``optimizer.step()``) and return the detached loss, or return
      ``None`` to use the default step (paper 1's FGR after warmup).
    * ``optimizer_factory(params)`` and ``scheduler_factory(optimizer)`` build them;
      ``scheduler_interval`` = "epoch" (cosine over epochs, paper 1) or "step".
    * With ``run`` (a :class:`lib.runs.Run`), a checkpoint (model, optimizer, scheduler, history,
      global RNG states, elapsed time) is written after every epoch; if one exists when called, the
      run continues after its last epoch and ends with the same weights as an uninterrupted run.
    * ``callbacks(epoch, entry, model)`` run after each epoch's checkpoint (raising in one
      interrupts the run; the checkpoint survives).

    The epoch loss is summed on the device and read once per epoch. Returns a :class:`FitResult`
    whose ``history`` holds ``{"epoch", "loss", "lr", "seconds"}`` (plus keys a ``step_fn`` or
    callback adds to the entry).
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model: expected an nn.Module, got {type(model).__name__}")
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs: must be a positive integer, got {epochs!r}")
    if not callable(loss_fn):
        raise ValueError("loss_fn: must be callable as loss_fn(output, y, epoch)")
    check_choice(scheduler_interval, ("epoch", "step"), "scheduler_interval")
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise ValueError("data: expected a pair (x, y)")
    dev = resolve_device(device)
    model.to(dev)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = optimizer_factory(params)
    scheduler = scheduler_factory(optimizer) if scheduler_factory is not None else None
    batches = BatchIterator(data[0], data[1], batch_size, shuffle=True, seed=seed, device=dev, drop_last=drop_last)
    fwd = forward or (lambda m, x: m(x))

    history: list[dict[str, Any]] = []
    start_epoch, elapsed, resumed_from = 0, 0.0, None
    ckpt = run.load_checkpoint() if run is not None else None
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        if scheduler is not None and ckpt.get("scheduler") is not None:
            scheduler.load_state_dict(ckpt["scheduler"])
        history = list(ckpt["history"])
        start_epoch = resumed_from = int(ckpt["epoch"])
        elapsed = float(ckpt.get("elapsed", 0.0))
        _set_rng_state(ckpt["rng"])

    for epoch in range(start_epoch, epochs):
        t0 = time.perf_counter()
        model.train()
        batches.set_epoch(epoch)
        gen = epoch_generator(seed, epoch, stream=2)
        total = torch.zeros((), device=dev)
        count = 0
        lr = optimizer.param_groups[0]["lr"]
        bar = tqdm(batches, total=len(batches), desc=f"{desc} epoch {epoch + 1}/{epochs}",
                   leave=False, disable=not progress)
        for xb, yb in bar:
            inputs = transform(xb, gen) if transform is not None else xb
            loss = step_fn(model, inputs, yb, optimizer, epoch, gen) if step_fn is not None else None
            if loss is None:
                with autocast(dev, amp):
                    out = fwd(model, inputs)
                    loss = loss_fn(out, yb, epoch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            if scheduler is not None and scheduler_interval == "step":
                scheduler.step()
            n = int(yb.shape[0])
            total += loss.detach().float() * n
            count += n
        if scheduler is not None and scheduler_interval == "epoch":
            scheduler.step()
        seconds = time.perf_counter() - t0
        elapsed += seconds
        entry = {"epoch": epoch + 1, "loss": float(total.item()) / max(count, 1), "lr": lr, "seconds": seconds}
        history.append(entry)
        if run is not None:
            run.save_checkpoint({
                "epoch": epoch + 1,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict() if scheduler is not None else None,
                "history": history,
                "rng": _rng_state(),
                "elapsed": elapsed,
            })
        for cb in callbacks:
            cb(epoch + 1, entry, model)
    return FitResult(history=history, wall_time=elapsed, resumed_from=resumed_from)


# ----------------------------------------------------------------------------------------------
# Paper 1: configuration, model, losses
# ----------------------------------------------------------------------------------------------

# Fields that change how fast a run goes but not what it computes: left out of the cache key.
_RUNTIME_FIELDS = ("compile", "num_workers", "threads", "progress", "eval_batch_size")


@dataclass
class TrainConfig:
    """One training run of paper 1 (SPEC section 2, Table 4). Defaults: the CIFAR-10H row.

    ``backbone``: "cifar_resnet18" (width ``width``), "imagenet_resnet18" (``pretrained``),
    "text:<hf name>" (lib.backbones.text_encoder with ``text_fallback``) or "tiny_cnn" (smoke scale).
    ``warmup_epochs=None`` means 40% of ``epochs`` for robust methods and FGR, 0 otherwise.
    ``image_size=None`` takes the data's size; ``padding=None`` is size/8 (4 at 32 px, 28 at 224 px).
    """

    dataset: str = "cifar10h"
    method: str = "vanilla"
    epochs: int = 50
    warmup_epochs: int | None = None
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 1e-4
    lam: float = 2.0
    num_experts: int = 4
    router_hidden: int = 128
    seed: int = 0
    backbone: str = "cifar_resnet18"
    width: int = 64
    pretrained: bool = False
    text_fallback: bool = True
    max_length: int = 128
    image_size: int | None = None
    padding: int | None = None
    augment: bool = True
    device: str = "auto"
    amp: bool = True
    channels_last: bool = True
    compile: bool = False
    num_workers: int = 0  # unused: batches come from device tensors, no DataLoader workers
    threads: int | None = None
    eval_batch_size: int = 512
    progress: bool = True

    def __post_init__(self) -> None:
        check_choice(self.method, METHODS, "method")
        for name in ("epochs", "batch_size", "num_experts", "router_hidden", "width", "max_length", "eval_batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        if self.warmup_epochs is not None and not 0 <= self.warmup_epochs <= self.epochs:
            raise ValueError(f"warmup_epochs: must lie in [0, epochs={self.epochs}], got {self.warmup_epochs!r}")
        check_positive(self.lr, "lr")
        check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        check_positive(self.lam, "lam", allow_zero=True)

    @property
    def warmup(self) -> int:
        """Number of ERM warmup epochs actually used."""
        if self.method not in WARMUP_METHODS:
            return 0
        if self.warmup_epochs is not None:
            return self.warmup_epochs
        return int(round(WARMUP_FRACTION * self.epochs))

    def key(self) -> dict[str, Any]:
        """The config fields that determine the result (runtime-only fields dropped)."""
        d = dataclasses.asdict(self)
        for f in _RUNTIME_FIELDS:
            d.pop(f, None)
        d["warmup_epochs"] = self.warmup
        return d

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)


class _TinyCNN(nn.Module):
    """A 3-layer conv net for the smoke scale and unit tests (seconds on a CPU)."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.out_features = 2 * width
        self.name = f"tiny_cnn(width={width})"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build_backbone(cfg: TrainConfig) -> nn.Module:
    """The feature extractor named by ``cfg.backbone`` (see :class:`TrainConfig`)."""
    spec = cfg.backbone
    if spec == "tiny_cnn":
        return _TinyCNN(cfg.width)
    backbones = importlib.import_module("lib.backbones")
    if spec == "cifar_resnet18":
        return backbones.cifar_resnet18(width=cfg.width)
    if spec == "imagenet_resnet18":
        return backbones.imagenet_resnet18(pretrained=cfg.pretrained, allow_random_init=True)
    if spec.startswith("text:"):
        return backbones.text_encoder(spec[len("text:"):], fallback=cfg.text_fallback)
    raise ValueError(
        f"backbone: unknown value {spec!r}; valid values are 'cifar_resnet18', 'imagenet_resnet18', "
        "'text:<name>', 'tiny_cnn'"
    )


def _out_features(backbone: nn.Module, sample: Inputs) -> int:
    d = getattr(backbone, "out_features", None)
    if isinstance(d, int):
        return d
    was = backbone.training
    backbone.eval()
    with torch.no_grad():
        h = backbone(**sample) if isinstance(sample, Mapping) else backbone(sample)
    backbone.train(was)
    return int(h.shape[1])


def build_model(
    cfg: TrainConfig, num_classes: int, sample: Inputs | None = None, backbone: nn.Module | None = None
) -> nn.Module:
    """lib.moe.MoEModel: backbone + MoEHead (K experts) or SingleExpertHead (method "single").

    The weights depend only on ``cfg.seed`` and the architecture (the backbone, if not given, is
    built right after ``torch.manual_seed(cfg.seed)``), so "mocae" and "vanilla" share a network.
    """
    moe = importlib.import_module("lib.moe")
    if backbone is None:
        torch.manual_seed(cfg.seed)
        backbone = build_backbone(cfg)
    d = _out_features(backbone, sample) if sample is not None else int(backbone.out_features)
    if cfg.method == "single":
        head = moe.SingleExpertHead(d, num_classes)
    else:
        head = moe.MoEHead(d, num_classes, num_experts=cfg.num_experts, router_hidden=cfg.router_hidden)
    return moe.MoEModel(backbone, head)


class _Runner(nn.Module):
    """Backbone under autocast (bf16 on CUDA), head in float32; optionally a compiled backbone.

    Holds the MoEModel as its only submodule, so ``state_dict`` keys are the model's (prefixed).
    """

    def __init__(self, model: nn.Module, compile_backbone: bool = False) -> None:
        super().__init__()
        self.model = model
        feats = torch.compile(model.backbone) if compile_backbone else model.backbone
        object.__setattr__(self, "_features", feats)  # not registered: keeps state_dict keys

    def forward(self, x: Inputs) -> Any:
        h = self._features(**x) if isinstance(x, Mapping) else self._features(x)
        with autocast(h.device):
            return self.model.head(h.float())


_robust = tilted_mean  # module-level name so tests can observe when the robust loss is used


def objective(method: str, out: Any, y: torch.Tensor, lam: float, robust_active: bool) -> torch.Tensor:
    """The training loss of ``method`` on one batch (``robust_active`` False during warmup = ERM)."""
    l = label_nll(out.probs, y)
    if not robust_active or method not in ROBUST_METHODS:
        return l.mean()
    if method == "robust_filtered":
        mask = relevant_mask(l, label_nll(out.expert_probs, y), out.routing, out.expert_probs, out.probs)
        return filtered_tilted_mean(l, mask, lam)
    return _robust(l, lam)  # robust; fgr_robust's main loss


# ----------------------------------------------------------------------------------------------
# Paper 1: inputs, prediction, evaluation
# ----------------------------------------------------------------------------------------------


@dataclass
class _Prepared:
    train: tuple[Inputs, torch.Tensor]
    val: tuple[Inputs, torch.Tensor]
    test: tuple[Inputs, torch.Tensor]
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    is_text: bool = False


def _image_stats(cfg: TrainConfig, x: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Normalization: ImageNet statistics for ImageNet backbones, else the training images' own."""
    if cfg.backbone == "imagenet_resnet18":
        return IMAGENET_MEAN, IMAGENET_STD
    xf = x[: min(len(x), 20000)].float() / 255.0
    mean = xf.mean(dim=(0, 2, 3))
    std = xf.std(dim=(0, 2, 3)).clamp_min(1e-3)
    return tuple(round(float(v), 4) for v in mean), tuple(round(float(v), 4) for v in std)


def _prepare(cfg: TrainConfig, data: Any, backbone: nn.Module | None) -> _Prepared:
    if getattr(data, "kind", "images") == "text":
        from lib.data.text import tokenize

        tok = getattr(backbone, "tokenizer", None)
        if tok is None:
            raise ValueError(f"backbone: {cfg.backbone!r} has no .tokenizer; text data needs a text backbone")
        enc = lambda t: tokenize(t, tok, cfg.max_length)  # noqa: E731
        return _Prepared(
            train=(enc(data.train_texts), data.train_y), val=(enc(data.val_texts), data.val_y),
            test=(enc(data.test_texts), data.test_y), is_text=True,
        )
    size = int(data.train_x.shape[-1])
    if cfg.image_size is not None and cfg.image_size != size:
        raise ValueError(f"image_size: config says {cfg.image_size} px but the data has {size} px images")
    mean, std = _image_stats(cfg, data.train_x)
    return _Prepared(
        train=(data.train_x, data.train_y), val=(data.val_x, data.val_y), test=(data.test_x, data.test_y),
        mean=mean, std=std,
    )


@torch.no_grad()
def predict(
    model: nn.Module, x: Inputs, device: torch.device, batch_size: int = 512,
    prep: Callable[[Inputs], Inputs] | None = None, amp: bool = True,
) -> dict[str, torch.Tensor]:
    """Mixture probs, routing and expert logits of ``model`` on ``x`` (CPU float32 tensors)."""
    model.eval()
    n = len(x["input_ids"]) if isinstance(x, Mapping) else len(x)
    parts: dict[str, list[torch.Tensor]] = {"probs": [], "routing": [], "expert_logits": []}
    for lo in range(0, n, batch_size):
        sl = slice(lo, lo + batch_size)
        xb = {k: v[sl].to(device) for k, v in x.items()} if isinstance(x, Mapping) else x[sl].to(device)
        if prep is not None:
            xb = prep(xb)
        with autocast(device, amp):
            out = model(xb)
        for k in parts:
            parts[k].append(getattr(out, k).float().cpu())
    return {k: torch.cat(v) for k, v in parts.items()}


def _metric_block(probs: np.ndarray, probs_ts: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from lib.metrics import accuracy, brier, ece, nll

    if len(y) == 0:
        return {}
    return {
        "n": int(len(y)),
        "accuracy": accuracy(probs, y),
        "ece": ece(probs, y, n_bins=N_BINS),
        "ece_ts": ece(probs_ts, y, n_bins=N_BINS),
        "nll": nll(probs, y),
        "nll_ts": nll(probs_ts, y),
        "brier": brier(probs, y),
    }


def _renorm(p: torch.Tensor) -> np.ndarray:
    p = p.double().clamp_min(0)
    return (p / p.sum(dim=1, keepdim=True)).numpy()


def mocae_calibrate(val: Mapping[str, torch.Tensor], val_y: torch.Tensor,
                    test: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, list[float]]:
    """MoCaE (SPEC section 2): per-expert temperatures T_k fitted on validation (clamped to [0.1, 10]),
    mixture of softmax(z_k / T_k). Returns (val probs, test probs, temperatures)."""
    from lib.calibrate import fit_expert_temperatures, mocae_probs

    temps = fit_expert_temperatures(val["expert_logits"].double(), val_y, val["routing"].double())
    t = torch.as_tensor(temps, dtype=torch.float64)
    val_p = mocae_probs(val["expert_logits"].double(), val["routing"].double(), t)
    test_p = mocae_probs(test["expert_logits"].double(), test["routing"].double(), t)
    return val_p, test_p, [float(v) for v in temps]


def evaluate(
    val_probs: torch.Tensor, val_y: torch.Tensor, test_probs: torch.Tensor, test_y: torch.Tensor,
    hard_mask: torch.Tensor, test_routing: torch.Tensor | None = None,
    groups: Mapping[str, torch.Tensor] | None = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Final metrics of paper 1 (SPEC section 2) from validation and test mixture probabilities.

    accuracy, ECE (15 equal-width bins), ECE+TS and NLL+TS (one scalar T fitted on validation log
    mixture probabilities: for an MoE, TS acts on log p), NLL and Brier, on all test points and on
    the hard subset; mean routing entropy; per-group ECE for text. Returns (metrics, test probs).
    """
    from lib.calibrate import apply_temperature, fit_temperature, probs_to_logits
    from lib.metrics import ece
    from lib.moe import routing_entropy

    val_np, test_np = _renorm(val_probs), _renorm(test_probs)
    T = fit_temperature(probs_to_logits(val_np), val_y.numpy())
    test_ts = np.asarray(apply_temperature(probs_to_logits(test_np), T), dtype=np.float64)
    y, hard = test_y.numpy(), hard_mask.numpy().astype(bool)
    metrics: dict[str, Any] = {
        "all": _metric_block(test_np, test_ts, y),
        "hard": _metric_block(test_np[hard], test_ts[hard], y[hard]),
        "temperature": float(T),
    }
    if test_routing is not None:
        ent = routing_entropy(test_routing.double()).numpy()
        metrics["routing_entropy"] = {"all": float(ent.mean()), "hard": float(ent[hard].mean()) if hard.any() else None}
    if groups:
        metrics["groups"] = {}
        for g, m in groups.items():
            m = m.numpy().astype(bool)
            metrics["groups"][g] = {
                "n": int(m.sum()),
                "ece": ece(test_np[m], y[m], n_bins=N_BINS) if m.any() else None,
                "ece_ts": ece(test_ts[m], y[m], n_bins=N_BINS) if m.any() else None,
            }
    return metrics, test_np


# ----------------------------------------------------------------------------------------------
# Paper 1: the run
# ----------------------------------------------------------------------------------------------


def backbone_identity(cfg: TrainConfig) -> str:
    """Which backbone a run actually gets here: pretrained ImageNet weights and DistilBERT fall back
    to random init and the bundled MiniLM when unavailable, and the two must not share a cache key."""
    backbones = importlib.import_module("lib.backbones")
    if cfg.backbone == "imagenet_resnet18" and cfg.pretrained:
        return "imagenet_resnet18/" + ("pretrained" if backbones.imagenet_weights_available() else "random-init")
    if cfg.backbone.startswith("text:"):
        name = cfg.backbone[len("text:"):]
        if cfg.text_fallback and not backbones.text_model_available(name):
            return "text:all-MiniLM-L6-v2 (fallback)"
    return cfg.backbone


def run_config(cfg: TrainConfig, data: Any) -> dict[str, Any]:
    """The cache key of a run: the config's result-determining fields, the backbone it actually
    gets when that can differ from the config (:func:`backbone_identity`) and the data's fingerprint."""
    key = {"train": cfg.key(), "data": {"name": data.name, "fingerprint": data.fingerprint()}}
    identity = backbone_identity(cfg)
    if identity != cfg.backbone:
        key["backbone"] = identity
    return key


def method_step(
    cfg: TrainConfig, device: torch.device, mean: Sequence[float] | None, std: Sequence[float] | None,
    filter_inputs: bool = True,
) -> tuple[LossFn, StepFn | None]:
    """The per-step training rule of ``cfg.method`` for :func:`fit_classifier`: ``loss_fn(out, y,
    epoch)`` (the method's :func:`objective`, plain ERM during the first ``cfg.warmup`` epochs) and,
    for FGR and FGR + Robust, a ``step_fn`` that runs :func:`lib.fgr.fgr_step` after warmup (two
    forwards). ``mean``/``std`` are the images' normalization (FGR filters in pixel space). Neither
    function synchronises with the host. Used by :func:`train_run` and bench/bench_epoch.py."""
    warmup, method, lam = cfg.warmup, cfg.method, cfg.lam

    def loss_fn(out: Any, y: torch.Tensor, epoch: int) -> torch.Tensor:
        return objective(method, out, y, lam, robust_active=epoch >= warmup)

    if method not in FGR_METHODS:
        return loss_fn, None
    from lib.fgr import fgr_step

    def main(out: Any, y: torch.Tensor) -> torch.Tensor:
        return objective(method, out, y, lam, robust_active=True)

    def step_fn(m: nn.Module, inputs: Inputs, y: torch.Tensor, opt: torch.optim.Optimizer,
                epoch: int, gen: torch.Generator) -> torch.Tensor | None:
        if epoch < warmup:
            return None  # ERM warmup: the default single-forward step
        with autocast(device, cfg.amp):
            info = fgr_step(m, main, inputs, y, opt, mean=mean, std=std, generator=gen, filter_inputs=filter_inputs)
        return info["loss_main"]

    return loss_fn, step_fn


def _compute(
    cfg: TrainConfig, data: Any, run: Run, callbacks: Sequence[Callable[..., None]]
) -> dict[str, Any]:
    device = resolve_device(cfg.device)
    if cfg.threads is not None and device.type == "cpu":
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    backbone = build_backbone(cfg)
    prep = _prepare(cfg, data, backbone)
    sample = {k: v[:2] for k, v in prep.train[0].items()} if prep.is_text else to_float(
        prep.train[0][:2], prep.mean, prep.std)
    model = build_model(cfg, data.num_classes, sample=sample, backbone=backbone)
    use_cl = cfg.channels_last and device.type == "cuda" and not prep.is_text
    if use_cl:
        model = model.to(memory_format=torch.channels_last)
    runner = _Runner(model, compile_backbone=cfg.compile)
    seed_everything(cfg.seed)

    transform = eval_prep = None
    if not prep.is_text:
        pad = cfg.padding if cfg.padding is not None else default_padding(int(prep.train[0].shape[-1]))
        mean, std = prep.mean, prep.std

        def transform(xb: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
            if not cfg.augment:
                return to_float(xb, mean, std, channels_last=use_cl)
            return augment_batch(xb, mean, std, padding=pad, generator=gen, channels_last=use_cl)

        def eval_prep(xb: torch.Tensor) -> torch.Tensor:
            return to_float(xb, mean, std, channels_last=use_cl)

    loss_fn, step_fn = method_step(cfg, device, prep.mean, prep.std, filter_inputs=not prep.is_text)
    warmup, method = cfg.warmup, cfg.method

    def mark(epoch: int, entry: dict[str, Any], _m: nn.Module) -> None:
        # epoch is 1-based here: epochs 1..warmup are ERM
        active = method in WARMUP_METHODS and epoch > warmup
        entry["objective"] = ("fgr" if method in FGR_METHODS else "robust") if active else "erm"

    fit = fit_classifier(
        runner, loss_fn, prep.train, cfg.epochs,
        optimizer_factory=lambda p: torch.optim.AdamW(p, lr=cfg.lr, weight_decay=cfg.weight_decay),
        scheduler_factory=lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.epochs),
        run=run, batch_size=cfg.batch_size, seed=cfg.seed, device=device, transform=transform,
        step_fn=step_fn, amp=cfg.amp, callbacks=[mark, *callbacks], progress=cfg.progress,
        desc=f"{data.name} {cfg.method} s{cfg.seed}",
    )
    t0 = time.perf_counter()
    val = predict(runner, prep.val[0], device, cfg.eval_batch_size, eval_prep, cfg.amp)
    test = predict(runner, prep.test[0], device, cfg.eval_batch_size, eval_prep, cfg.amp)
    groups = getattr(data, "test_groups", None)
    routing = test["routing"] if method != "single" else None
    metrics, test_p = evaluate(val["probs"], data.val_y, test["probs"], data.test_y, data.hard_mask, routing, groups)
    arrays = {"probs": test_p.astype(np.float16)}
    if method == "vanilla":  # MoCaE is post hoc on the same trained model (see train_run)
        mv, mt, temps = mocae_calibrate(val, data.val_y, test)
        metrics["mocae"], mocae_p = evaluate(mv, data.val_y, mt, data.test_y, data.hard_mask, routing, groups)
        metrics["mocae"]["expert_temperatures"] = temps
        arrays["probs_mocae"] = mocae_p.astype(np.float16)
    eval_seconds = time.perf_counter() - t0
    run.dir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        run.dir / "predictions.npz", **arrays,
        labels=data.test_y.numpy().astype(np.int16), hard=data.hard_mask.numpy().astype(bool),
        routing=test["routing"].numpy().astype(np.float16),
        temperature=np.float32(metrics["temperature"]),
    )
    return {
        "method": cfg.method,
        "dataset": cfg.dataset,
        "history": fit.history,
        "metrics": metrics,
        "wall_time": {"train": fit.wall_time, "eval": eval_seconds},
        "resumed_from": fit.resumed_from,
        "device": device_name(device),
        "data": {"name": data.name, "source": data.source, "sizes": data.sizes(),
                 "normalization": {"mean": list(prep.mean or ()), "std": list(prep.std or ())}},
        "backbone": getattr(model.backbone, "name", cfg.backbone),
        "pretrained": bool(getattr(model.backbone, "pretrained", False)),
        "predictions": "predictions.npz",
        "provenance": provenance(device),
    }


def _mocae_record(base: Mapping[str, Any], run: Run) -> dict[str, Any]:
    """The MoCaE record derived from its Vanilla MoE run (same trained model, post hoc T_k)."""
    preds = load_predictions(base)
    run.dir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        run.dir / "predictions.npz", probs=preds["probs_mocae"], labels=preds["labels"], hard=preds["hard"],
        routing=preds["routing"], temperature=np.float32(base["metrics"]["mocae"]["temperature"]),
    )
    metrics = dict(base["metrics"]["mocae"])
    # The paper states MoCaE's accuracy equals Vanilla's; per-expert temperatures can move the argmax
    # of a probability-space mixture, so we record both and let the notebook check the claim.
    metrics["vanilla_accuracy"] = {s: base["metrics"][s].get("accuracy") for s in ("all", "hard")}
    return {
        "method": "mocae",
        "dataset": base["dataset"],
        "history": base["history"],
        "metrics": metrics,
        "trained_as": {"method": "vanilla", "key": base["key"]},
        "wall_time": base["wall_time"],
        "resumed_from": base.get("resumed_from"),
        "device": base["device"],
        "data": base["data"],
        "backbone": base["backbone"],
        "pretrained": base.get("pretrained", False),
        "predictions": "predictions.npz",
        "provenance": base["provenance"],
    }


def train_run(
    cfg: TrainConfig, data: Any, callbacks: Sequence[Callable[[int, dict[str, Any], nn.Module], None]] = ()
) -> dict[str, Any]:
    """Train and evaluate one paper-1 run, cached by ``(cfg, data)`` and resumable (lib.runs).

    Returns the record: config, ``history`` (per-epoch loss, lr, seconds, objective), ``metrics``
    (``all``/``hard``: n, accuracy, ece, ece_ts, nll, nll_ts, brier; ``temperature``,
    ``routing_entropy``, per-group ECE for text), ``wall_time``, ``device``, ``data``, ``backbone``
    and ``provenance``. Test predictions: :func:`load_predictions`.

    "mocae" trains (or loads) the "vanilla" run of the same config and calibrates it post hoc, so
    the two share one trained model and MoCaE's accuracy equals Vanilla's; the vanilla record also
    carries the MoCaE metrics under ``metrics["mocae"]``.
    Used in: notebooks/cifar10h, notebooks/pacs, notebooks/civilcomments, notebooks/sensitivity.
    """
    if not isinstance(cfg, TrainConfig):
        raise ValueError(f"cfg: expected a TrainConfig, got {type(cfg).__name__}")
    for attr in ("name", "fingerprint", "val_y", "test_y", "hard_mask", "num_classes"):
        if not hasattr(data, attr):
            raise ValueError(f"data: expected an ImageBundle or TextBundle (missing {attr!r})")
    if cfg.method == "mocae":
        base = train_run(cfg.replace(method="vanilla"), data, callbacks)
        return cached_run(GROUP, run_config(cfg, data), lambda run: _mocae_record(base, run))
    return cached_run(GROUP, run_config(cfg, data), lambda run: _compute(cfg, data, run, callbacks))


def load_predictions(record: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Test predictions of a finished run: probs (float16), labels, hard mask, routing, temperature.

    Looks next to a committed record (``results/moe/<key>.npz``) first, then in the run cache.
    Used in: notebooks/sensitivity.
    """
    from lib.config import cache_dir, results_dir

    if "key" not in record:
        raise ValueError("record: has no 'key' (pass a record returned by train_run)")
    group = record.get("group", GROUP)
    for path in (results_dir() / group / f"{record['key']}.npz", cache_dir() / "runs" / group / record["key"] / "predictions.npz"):
        if path.exists():
            with np.load(path) as z:
                return {k: z[k] for k in z.files}
    raise FileNotFoundError(f"predictions of run {record['key']} not found (neither committed nor cached)")


def commit_result(record: Mapping[str, Any]) -> Path:
    """Copy a finished run's record and predictions to ``results/<group>/`` (for GPU runs)."""
    from lib.config import cache_dir, results_dir

    group, key = record.get("group", GROUP), record["key"]
    out = results_dir() / group
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{key}.json").write_text(json.dumps(record, indent=1, sort_keys=True, default=str))
    src = cache_dir() / "runs" / group / key / "predictions.npz"
    if src.exists():
        shutil.copyfile(src, out / f"{key}.npz")
    return out / f"{key}.json"


# ----------------------------------------------------------------------------------------------
# Grids
# ----------------------------------------------------------------------------------------------

DataSpec = tuple[str, dict[str, Any]]  # ("lib.data.images:load_cifar10h", {"n_train": 5000})


def load_data(spec: DataSpec) -> Any:
    """Call a loader named ``"module:function"`` with keyword arguments (used by parallel grids)."""
    if not (isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[0], str) and ":" in spec[0]):
        raise ValueError("data: expected a bundle or a spec ('module:function', {kwargs})")
    mod, fn = spec[0].split(":")
    return getattr(importlib.import_module(mod), fn)(**dict(spec[1]))


def _worker_command(cfg: TrainConfig, spec: DataSpec) -> list[str]:
    import sys

    return [sys.executable, "-m", "lib.train", "--data", spec[0], "--data-kwargs", json.dumps(dict(spec[1])),
            "--config", json.dumps(dataclasses.asdict(cfg)), "--quiet"]


def run_grid(configs: Sequence[TrainConfig], data: Any, parallel: int = 1) -> list[dict[str, Any]]:
    """Run ``configs`` on one dataset and return their records in order (cached runs are loaded).

    ``parallel=1`` runs them one after the other in this process. ``parallel>1`` runs up to that
    many unfinished configs at a time as separate ``python -m lib.train`` processes sharing the GPU
    (a CIFAR ResNet-18 leaves most of an H100 idle); then ``data`` must be a spec
    ``("module:function", kwargs)`` that each process loads (from the decoded-data cache). A failed
    worker raises ``RuntimeError`` with its exit code; finished runs stay cached.
    Used in: notebooks/cifar10h, notebooks/pacs, notebooks/sensitivity.
    """
    configs = list(configs)
    if not isinstance(parallel, int) or parallel < 1:
        raise ValueError(f"parallel: must be a positive integer, got {parallel!r}")
    if parallel == 1 or len(configs) <= 1:
        bundle = load_data(data) if isinstance(data, (tuple, list)) else data
        return [train_run(c, bundle) for c in configs]
    if not isinstance(data, (tuple, list)):
        raise ValueError("data: parallel grids need a spec ('module:function', {kwargs}), not a bundle")
    import subprocess

    from lib.config import repo_root

    bundle = load_data(data)
    # MoCaE reuses the Vanilla run: train vanilla once, derive mocae afterwards in this process.
    todo, seen = [], set()
    for c in configs:
        t = c.replace(method="vanilla") if c.method == "mocae" else c
        key = json.dumps(run_config(t, bundle), sort_keys=True)
        if key not in seen and not Run(GROUP, run_config(t, bundle)).done:
            seen.add(key)
            todo.append(t)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    running: list[subprocess.Popen[bytes]] = []
    failed: list[int] = []
    for c in todo:
        while len(running) >= parallel:
            time.sleep(0.5)
            still = []
            for p in running:
                if p.poll() is None:
                    still.append(p)
                elif p.returncode != 0:
                    failed.append(p.returncode)
            running = still
        running.append(subprocess.Popen(_worker_command(c, tuple(data)), cwd=repo_root(), env=env))
    for p in running:
        if p.wait() != 0:
            failed.append(p.returncode)
    if failed:
        raise RuntimeError(f"run_grid: {len(failed)} worker(s) failed (exit codes {failed}); see their output")
    return [train_run(c, bundle) for c in configs]  # all trained now: loaded, not recomputed


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``python -m lib.train --data lib.data.images:load_cifar10h --methods vanilla
    robust --seeds 0 1 2 --parallel 3 [--config '{"epochs": 50}'] [--commit]``."""
    import argparse

    ap = argparse.ArgumentParser(description="Run a grid of paper-1 trainings (cached, resumable).")
    ap.add_argument("--data", required=True, help="loader 'module:function', e.g. lib.data.images:load_cifar10h")
    ap.add_argument("--data-kwargs", default="{}", help="JSON keyword arguments of the loader")
    ap.add_argument("--config", default="{}", help="JSON TrainConfig fields shared by all runs")
    ap.add_argument("--methods", nargs="+", default=None, help="methods (default: the config's)")
    ap.add_argument("--seeds", nargs="+", type=int, default=None, help="seeds (default: the config's)")
    ap.add_argument("--parallel", type=int, default=1, help="runs at a time, as separate processes")
    ap.add_argument("--commit", action="store_true", help="copy records and predictions to results/")
    ap.add_argument("--quiet", action="store_true", help="no progress bars or summary")
    args = ap.parse_args(argv)
    base = json.loads(args.config)
    if args.quiet:
        base["progress"] = False
    methods = args.methods or [base.get("method", "vanilla")]
    seeds = args.seeds or [base.get("seed", 0)]
    configs = [TrainConfig(**{**base, "method": m, "seed": s}) for m in methods for s in seeds]
    records = run_grid(configs, (args.data, json.loads(args.data_kwargs)), parallel=args.parallel)
    for r in records:
        if args.commit:
            commit_result(r)
        if not args.quiet:
            a = r["metrics"]["all"]
            print(f"{r['method']:16s} seed {r['config']['train']['seed']}: acc {a['accuracy']:.4f} "
                  f"ece {a['ece']:.4f} ece_ts {a['ece_ts']:.4f}  ({r['wall_time']['train']:.0f}s)")


if __name__ == "__main__":
    main()
