"""Paper 1's methods: the network each one trains and its loss and step on one batch.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1),
section 5 and Appendix D (objectives, warmup, baselines).

Methods (``METHODS``, the one list): ``single`` (backbone + one linear layer), ``vanilla`` (MoE, mean
mixture NLL), ``mocae`` (not trained again: the ``vanilla`` run of the same config, calibrated post
hoc), ``robust`` (tilted objective, eq. 6/12), ``robust_filtered`` (App. D.3), ``fgr`` and
``fgr_robust`` (lib.moe.fgr, App. D.1). Robust methods and FGR train with plain ERM for the first
``warmup_epochs`` (default ``WARMUP_FRACTION`` = 40% of the epochs).

Every method does one backbone forward per step (FGR's on the batch plus its m filtered copies). No step synchronises
with the host (tests/unit/moe/test_methods.py runs whole epochs on PyTorch's meta device to check it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import torch
from torch import nn

from lib.nets import backbones
from lib.engine.device import autocast
from lib.moe.fgr import fgr_step
from lib.moe.heads import MoEHead, MoEModel, SingleExpertHead, label_nll
from lib.moe.robust import filtered_mean, relevant_set, tilted_mean


METHODS: tuple[str, ...] = ("single", "vanilla", "mocae", "fgr", "robust", "robust_filtered", "fgr_robust")
ROBUST_METHODS: tuple[str, ...] = ("robust", "robust_filtered", "fgr_robust")
WARMUP_METHODS: tuple[str, ...] = ("fgr", "robust", "robust_filtered", "fgr_robust")
FGR_METHODS: tuple[str, ...] = ("fgr", "fgr_robust")
WARMUP_FRACTION = 0.4  # paper 1, App. D: 20 of 50 epochs (images), 2 of 5 (text)

Inputs = Any  # a tensor or a dict of tensors (tokenized text)
LossFn = Callable[[Any, torch.Tensor, int], torch.Tensor]
StepFn = Callable[..., "torch.Tensor | None"]
MethodConfig = Any  # a lib.moe.config.TrainConfig (that module imports this one)


def build_model(cfg: MethodConfig, num_classes: int) -> nn.Module:
    """lib.MoEModel: backbone (``out_features``-d, :func:`lib.nets.backbones.build` of ``cfg.backbone``)
    + MoEHead (K experts) or SingleExpertHead (method "single").

    The weights depend only on ``cfg.seed`` and the architecture (built right after
    ``torch.manual_seed(cfg.seed)``), so "mocae" and "vanilla" share a network."""
    torch.manual_seed(cfg.seed)
    backbone = backbones.build(
        cfg.backbone, width=cfg.width, pretrained=cfg.pretrained, text_fallback=cfg.text_fallback
    )
    d = int(backbone.out_features)
    if cfg.method == "single":
        return MoEModel(backbone, SingleExpertHead(d, num_classes))
    return MoEModel(backbone, MoEHead(d, num_classes, num_experts=cfg.num_experts, router_hidden=cfg.router_hidden))


class Runner(nn.Module):
    """Backbone under autocast (bf16 on CUDA), head in float32; optionally a compiled backbone.

    Holds the MoEModel as its only submodule, so ``state_dict`` keys are the model's (prefixed)."""

    def __init__(self, model: nn.Module, compile_backbone: bool = False) -> None:
        super().__init__()
        self.model = model
        feats = torch.compile(model.backbone) if compile_backbone else model.backbone
        object.__setattr__(self, "_features", feats)  # not registered: keeps state_dict keys

    def forward(self, x: Inputs) -> Any:
        h = self._features(**x) if isinstance(x, Mapping) else self._features(x)
        with autocast(h.device):
            return self.model.head(h.float())


def objective(method: str, out: Any, y: torch.Tensor, lam: float, robust_active: bool) -> torch.Tensor:
    """The training loss of ``method`` on one batch (``robust_active`` False during warmup = ERM); with
    a leading run dimension on ``out`` and ``y`` (a pack of runs, lib.engine.packed) one loss per run,
    each over its own batch only."""
    l = label_nll(out.probs, y)
    if not robust_active or method not in ROBUST_METHODS:
        return l.mean(dim=-1)
    if method == "robust_filtered":
        mask = relevant_set(l, label_nll(out.expert_probs, y), out.routing, out.expert_probs, out.probs)
        return filtered_mean(l, mask, lam)
    return tilted_mean(l, lam)  # robust; fgr_robust's main loss


def method_step(
    cfg: MethodConfig, device: torch.device, fgr_inputs: Callable[..., Any] | None = None
) -> tuple[LossFn, StepFn | None]:
    """The per-step training rule of ``cfg.method`` for :func:`lib.engine.loop.fit`: ``loss_fn(out, y,
    epoch)`` (the method's :func:`objective`, plain ERM during the first ``cfg.warmup`` epochs) and,
    for FGR and FGR + Robust, a ``step_fn`` that runs :func:`lib.moe.fgr.fgr_step` after warmup (one
    forward, one batched backward; ``fgr_inputs``: its ``inputs``, the filtering rule).
    Neither function synchronises with the host."""
    warmup, method, lam = cfg.warmup, cfg.method, cfg.lam

    def loss_fn(out: Any, y: torch.Tensor, epoch: int) -> torch.Tensor:
        return objective(method, out, y, lam, robust_active=epoch >= warmup)

    if method not in FGR_METHODS:
        return loss_fn, None
    main = partial(objective, method, lam=lam, robust_active=True)

    def step_fn(
        m: nn.Module, inputs: Inputs, y: torch.Tensor, opt: torch.optim.Optimizer, epoch: int, gen: torch.Generator
    ) -> torch.Tensor | None:
        if epoch < warmup:
            return None  # ERM warmup: the default single-forward step
        with autocast(device, cfg.amp):
            return fgr_step(m, main, inputs, y, opt, gen, fgr_inputs)["loss_main"]

    return loss_fn, step_fn
