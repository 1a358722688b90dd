"""What paper 2's two studies share ("Calibration of multi-expert learning to defer", Sec. 5, Figures
1-3): data with the experts' predictions attached (:func:`annotate`), training on a surrogate with
early stopping (:func:`train_and_score`), a trained model's metrics (:func:`l2d_metrics`), the expert
committees, the grid of runs and one run of the mixture-of-Gaussians study (:func:`run_gaussian`). The
CIFAR-10 study is :mod:`lib.l2d.cifar10`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from lib.l2d import surrogates as l2d
from lib.calibration.metrics import binary_ece
from lib.engine.cache import cached_run
from lib.l2d.gaussian_mixture import GAUSSIAN_MEANS, gaussian_mixture
from lib.l2d.synthetic_experts import SyntheticExpert
from lib.validation import check_choice, check_int

SURROGATES: tuple[str, ...] = ("softmax", "ova")
EXPERIMENTS: tuple[str, ...] = ("experts", "dependence", "specialized")
ECE_BINS = 20  # the number of bins for expert-correctness ECE in the paper's reference code

_LOSSES = {"softmax": l2d.softmax_l2d_loss, "ova": l2d.ova_l2d_loss}
_ESTIMATORS = {"softmax": l2d.expert_correctness_softmax, "ova": l2d.expert_correctness_ova}


# --- Data with expert annotations -----------------------------------------------------------------
@dataclass
class L2DSplit:
    """Inputs ``x`` (N, ...), labels ``y`` (N,) and the J experts' predictions ``m`` (N, J)."""

    x: torch.Tensor
    y: torch.Tensor
    m: torch.Tensor

    @property
    def correct(self) -> torch.Tensor:
        """The experts' correctness 1[m_j = y], one row per example and one column per expert."""
        return self.m == self.y[:, None]

    @property
    def targets(self) -> torch.Tensor:
        """Labels and the experts' predictions side by side, an (N, 1 + J) tensor the engine batches as targets."""
        return torch.cat([self.y[:, None], self.m], 1)


def annotate(x: Any, y: Any, experts: Sequence[SyntheticExpert], offset: int = 0) -> L2DSplit:
    """Attach the experts' predictions (N, J) to (x, y); example ids ``offset + i`` key the experts'
    fixed per-example noise, so train/validation/test get different offsets."""
    yt = torch.as_tensor(np.asarray(y), dtype=torch.long)
    index = np.arange(len(yt)) + int(offset)
    m = np.stack([e(yt.numpy(), index) for e in experts], axis=1)
    return L2DSplit(torch.as_tensor(np.asarray(x), dtype=torch.float32), yt, torch.as_tensor(m, dtype=torch.long))


# --- Training and metrics -------------------------------------------------------------------------
def surrogate_loss(surrogate: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The L2D surrogate as a loss of (outputs, targets) with targets from ``L2DSplit.targets`` (labels, then the experts' predictions)."""
    check_choice(surrogate, SURROGATES, "surrogate")
    fn = _LOSSES[surrogate]
    return lambda z, t: fn(z.float(), t[:, 0], t[:, 1:] == t[:, :1])


def train_and_score(
    model: nn.Module, splits: Sequence[L2DSplit], surrogate: str, cfg: Mapping[str, Any], seed: int, head: bool = False
) -> dict[str, Any]:
    """Train ``model`` (K + J outputs) on the train split of ``splits`` (train, val, test) with one L2D
    ``surrogate`` and SGD (momentum 0.9, Nesterov, cosine; the scale's ``epochs``, ``lr``,
    ``weight_decay`` and ``batch_size``, the ``head_`` epochs and learning rate with ``head``) through
    :func:`lib.engine.loop.fit`, stopping ``patience`` epochs after the validation surrogate loss last
    improved (L2D paper Sec. 5.1) with the best weights restored; then :func:`l2d_metrics` on the test
    split, with ``epochs_run``."""
    from lib.engine.loop import EarlyStopping, SelectBest, finite_outputs, fit, predict

    tr, va, te = splits
    pre = "head_" if head else ""
    epochs, batch_size, patience = (int(cfg[k]) for k in (f"{pre}epochs", "batch_size", "patience"))
    lr = float(cfg[f"{pre}lr"])
    loss = surrogate_loss(surrogate)
    best = SelectBest(lambda m: float(loss(predict(m, va.x, batch_size=4096, amp=False), va.targets)))
    fitted = fit(
        model,
        finite_outputs(lambda z, t, _e: loss(z, t)),  # a diverging head says so (lib.engine.loop.Diverged)
        (tr.x, tr.targets),
        epochs,
        optimizer_factory=lambda p: torch.optim.SGD(
            p, lr=lr, momentum=0.9, nesterov=True, weight_decay=cfg["weight_decay"]
        ),
        scheduler_factory=lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs),
        batch_size=batch_size,
        seed=int(seed),
        device="cpu",
        amp=False,
        progress=False,
        callbacks=[best, EarlyStopping("val_loss", patience=patience)],
    )
    out = l2d_metrics(predict(model, te.x, batch_size=4096, amp=False), te, surrogate)
    return {**out, "epochs_run": len(fitted.history)}


def point_config(
    experiment: str, value: float, surrogate: str, seed: int, cfg: Mapping[str, Any], keys: Sequence[str]
) -> dict[str, Any]:
    """What determines one run besides its data: the grid point and the scale's settings ``keys``."""
    point = {"experiment": experiment, "value": value, "surrogate": surrogate, "seed": int(seed)}
    return {**point, **{k: cfg[k] for k in keys}}


def l2d_metrics(logits: Any, split: L2DSplit, surrogate: str) -> dict[str, Any]:
    """Metrics of one trained L2D model on ``split`` (L2D paper Sec. 5, Figures 1-2): ``ece``, the
    mean over experts of the binned ECE (``ECE_BINS`` bins) of the estimate of P(m_j = y | x) (eq. 2
    softmax, eq. 3 OvA) against the correctness, and per expert; ``system_accuracy``, ``classifier_accuracy``,
    ``defer_rate``, ``coverage`` and ``frac_estimate_above_1``."""
    z = torch.as_tensor(logits)
    j = split.m.shape[1]
    k = z.shape[1] - j
    est = _ESTIMATORS[surrogate](z, k).double().numpy()
    ok = split.correct.numpy()
    per = [binary_ece(est[:, e], ok[:, e], ECE_BINS) for e in range(j)]
    cov = l2d.coverage_per_expert(z, k)
    return {
        "ece": float(np.mean(per)),
        "ece_per_expert": [float(v) for v in per],
        "system_accuracy": l2d.system_accuracy(z, split.y, split.m, k),
        "classifier_accuracy": float((z[:, :k].argmax(1) == split.y).double().mean()),
        "defer_rate": float(1 - cov[0]),
        "coverage": [float(c) for c in cov],
        "frac_estimate_above_1": float((est > 1).mean()),
    }


# --- Committees of the three experiments ----------------------------------------------------------
def committee(experiment: str, value: float, dataset: str, seed: int = 0) -> list[SyntheticExpert]:
    """The experts of one point of an experiment (L2D paper Sec. 5.2-5.4), expert j with seed
    ``1000 seed + 17 + j``, each random (right with probability 1/K) outside its region:

    * ``"experts"``: ``value`` oracles on the first five classes;
    * ``"dependence"``: expert 0 random, experts 1..3 right with probability ``value`` on the first
      five classes (the probability itself, not the reference code's p + (1 - p)/K);
    * ``"specialized"`` (CIFAR-10 only): ``value`` experts, expert j an oracle on {2j, 2j+1}.

    On the Gaussians (``dataset="gaussians"``, 4 classes) the first five classes are clusters 3 and 4."""
    check_choice(experiment, EXPERIMENTS, "experiment")
    if dataset == "gaussians" and experiment == "specialized":
        raise ValueError("experiment: 'specialized' is a CIFAR-10 experiment (Fig. 2)")
    s = 1000 * int(seed) + 17
    k, region = (len(GAUSSIAN_MEANS), frozenset({2, 3})) if dataset == "gaussians" else (10, frozenset(range(5)))
    if experiment == "dependence":
        p = float(value)
        if not (np.isfinite(p) and 0 <= p <= 1):
            raise ValueError(f"p: must lie in [0, 1], got {p!r}")
        return [SyntheticExpert(k, frozenset(), 1.0, s)] + [SyntheticExpert(k, region, p, s + j) for j in range(1, 4)]
    n = check_int(int(value), "num_experts")
    if experiment == "experts":
        return [SyntheticExpert(k, region, 1.0, s + j) for j in range(n)]
    if n > k // 2:
        raise ValueError(f"num_experts: at most {k // 2} specialized experts for {k} classes")
    # expert j (the paper's j + 1): an oracle on the class pair {2j, 2j+1}
    return [SyntheticExpert(k, frozenset({2 * j, 2 * j + 1}), 1.0, s + j) for j in range(n)]


SWEEPS: dict[str, str] = {"experts": "num_experts", "dependence": "dependence_p", "specialized": "specialized_experts"}
"""The settings key of each experiment's swept values."""


def grid(cfg: Mapping[str, Any], experiments: Sequence[str]) -> list[dict[str, Any]]:
    """Every (experiment, value, surrogate, seed) point of the settings ``cfg``."""
    return [
        {"experiment": e, "value": v, "surrogate": s, "seed": seed}
        for e in experiments
        for v in cfg[SWEEPS[e]]
        for s in SURROGATES
        for seed in range(int(cfg["seeds"]))
    ]


GAUSSIAN_KEYS = ("n_train", "n_val", "n_test", "hidden", "epochs", "lr", "batch_size", "patience", "weight_decay")


def run_gaussian(experiment: str, value: float, surrogate: str, seed: int, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """One cached run of the mixture-of-Gaussians study (Sec. 5.1-5.3, Figure 1, top row): the
    4-layer MLP trained with ``surrogate`` on the committee of (``experiment``, ``value``), and its
    test metrics."""
    from lib.nets.backbones import mlp

    check_choice(surrogate, SURROGATES, "surrogate")
    config = point_config(experiment, value, surrogate, seed, cfg, GAUSSIAN_KEYS)

    def compute(run: Any) -> dict[str, Any]:
        experts = committee(experiment, value, "gaussians", seed)
        # one draw of the mixture per seed, cut in order into train, validation and test
        x, y, _ = gaussian_mixture(cfg["n_train"] + cfg["n_val"] + cfg["n_test"], seed=seed)
        ends = np.cumsum([0, cfg["n_train"], cfg["n_val"], cfg["n_test"]])
        offsets = (0, 10**6, 2 * 10**6)
        splits = [annotate(x[a:b], y[a:b], experts, o) for a, b, o in zip(ends[:-1], ends[1:], offsets)]
        torch.manual_seed(seed)
        model = mlp(2, tuple(cfg["hidden"]), num_classes=4 + len(experts))
        return train_and_score(model, splits, surrogate, cfg, seed)

    return cached_run("l2d_gaussians", config, compute)
