"""Experiments of paper 2 (calibration of multi-expert learning to defer): training loops, grids,
tables and claims for the book pages.

Paper: "Calibration of multi-expert learning to defer" (papers/l2d-multi-expert-calibration.txt),
Sec. 5, Figures 1-3; SPEC section 3. The losses, estimators, experts and the mixture-of-Gaussians
generator are in :mod:`lib.l2d`; this module only wires them into runs:

* :func:`train_l2d` -- SGD on one surrogate (softmax or OvA) with early stopping on the validation
  surrogate loss (look-ahead ``patience`` epochs, best weights restored), on in-memory tensors
  (2-D Gaussian points or frozen image features).
* :func:`l2d_metrics` -- expert-correctness ECE (mean over experts and per expert, 20 bins as in the
  reference code), system accuracy, classifier accuracy, deferral rates.
* :func:`run_gaussian` / ``grid`` -- Figure 1, top row (cached per config).
* :func:`run_cifar` / ``grid`` -- Figure 1, bottom row and Figure 2 (cached per config).
* :func:`summarize`, :func:`l2d_claims` -- mean and standard error over seeds, and the paper's
  three claims judged from those numbers.

Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from lib import l2d
from lib.metrics import binary_ece
from lib.engine.runs import cached_run
from lib.validation import check_choice, check_positive

SURROGATES: tuple[str, ...] = ("softmax", "ova")
EXPERIMENTS: tuple[str, ...] = ("experts", "dependence", "specialized")
ECE_BINS = 20  # the reference code's number of bins for expert-correctness ECE (SPEC section 3)

_LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "softmax": l2d.softmax_l2d_loss,
    "ova": l2d.ova_l2d_loss,
}
_ESTIMATORS: dict[str, Callable[..., torch.Tensor]] = {
    "softmax": l2d.expert_correctness_softmax,
    "ova": l2d.expert_correctness_ova,
}


# --------------------------------------------------------------------------------------------
# Data with expert annotations
# --------------------------------------------------------------------------------------------
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

    def __len__(self) -> int:
        return int(self.y.shape[0])


def annotate(
    x: Any, y: Any, experts: Sequence[l2d.SyntheticExpert], offset: int = 0, group: Any = None
) -> L2DSplit:
    """Attach the experts' predictions to (x, y); example ids ``offset + i`` key the experts' fixed
    per-example noise, so train/validation/test get different offsets."""
    yt = torch.as_tensor(np.asarray(y), dtype=torch.long)
    index = np.arange(len(yt)) + int(offset)
    m = l2d.expert_predictions(experts, yt.numpy(), index, None if group is None else np.asarray(group))
    return L2DSplit(torch.as_tensor(np.asarray(x), dtype=torch.float32), yt, torch.as_tensor(m, dtype=torch.long))


# --------------------------------------------------------------------------------------------
# Training and metrics
# --------------------------------------------------------------------------------------------
def _targets(split: L2DSplit) -> torch.Tensor:
    """Labels and the experts' predictions side by side, (N, 1 + J): the targets the engine batches."""
    return torch.cat([split.y[:, None], split.m], 1)


def surrogate_loss(surrogate: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The L2D surrogate as a loss of (outputs, targets) with targets from ``_targets`` (labels, then the experts' predictions)."""
    check_choice(surrogate, SURROGATES, "surrogate")
    fn = _LOSSES[surrogate]
    return lambda z, t: fn(z.float(), t[:, 0], t[:, 1:] == t[:, :1])


def train_l2d(
    model: nn.Module,
    train: L2DSplit,
    val: L2DSplit,
    surrogate: str,
    epochs: int = 200,
    lr: float = 0.05,
    momentum: float = 0.9,
    weight_decay: float = 5e-4,
    batch_size: int = 128,
    patience: int = 20,
    seed: int = 0,
) -> tuple[nn.Module, list[dict[str, float]]]:
    """Train ``model`` (K + J outputs) on one L2D ``surrogate`` ("softmax" or "ova") with SGD
    (Nesterov momentum, cosine learning rate over ``epochs``) through the book's engine
    (:func:`lib.engine.loop.fit`), with early stopping on the validation surrogate loss after
    ``patience`` epochs without improvement (L2D paper Sec. 5.1); the best weights are restored.
    Returns the model and the per-epoch history (``loss`` = train, ``val_loss``).
    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10 (heads on frozen features).
    """
    from lib.engine.loop import EarlyStopping, SelectBest, fit, predict

    check_choice(surrogate, SURROGATES, "surrogate")
    for name, value in (("epochs", epochs), ("batch_size", batch_size), ("patience", patience)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name}: must be a positive integer, got {value!r}")
    check_positive(lr, "lr")
    if len(train) == 0 or len(val) == 0:
        raise ValueError("train, val: need at least one example each")
    loss = surrogate_loss(surrogate)
    val_t = _targets(val)
    best = SelectBest(lambda m: float(loss(predict(m, val.x, batch_size=4096, amp=False), val_t)))
    fitted = fit(
        model, lambda z, t, _e: loss(z, t), (train.x, _targets(train)), int(epochs),
        optimizer_factory=lambda p: torch.optim.SGD(p, lr=lr, momentum=momentum, nesterov=momentum > 0,
                                                    weight_decay=weight_decay),
        scheduler_factory=lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs),
        batch_size=int(batch_size), seed=int(seed), device="cpu", amp=False, progress=False,
        callbacks=[best, EarlyStopping("val_loss", patience=int(patience))],
    )
    return model, [{"epoch": h["epoch"], "train_loss": h["loss"], "val_loss": h["val_loss"]} for h in fitted.history]


def _batched_logits(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    from lib.engine.loop import predict

    return predict(model, x, batch_size=4096, amp=False)


def l2d_metrics(logits: Any, split: L2DSplit, surrogate: str, n_bins: int = ECE_BINS) -> dict[str, Any]:
    """Metrics of one trained L2D model on ``split`` (L2D paper Sec. 5, Figures 1-2):

    ``ece`` = mean over experts of the binned ECE of the surrogate's estimate of P(m_j = y | x)
    (eq. 2 softmax, eq. 3 OvA; estimates above 1 capped at 1) against the actual correctness;
    ``ece_per_expert``; ``system_accuracy`` (deferred examples scored by the chosen expert);
    ``classifier_accuracy``; ``defer_rate`` and ``coverage`` (classifier, expert 1..J);
    ``frac_estimate_above_1`` (degenerate softmax estimates).
    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """
    check_choice(surrogate, SURROGATES, "surrogate")
    z = torch.as_tensor(logits)
    j = split.m.shape[1]
    k = z.shape[1] - j
    est = _ESTIMATORS[surrogate](z, k).double().numpy()
    ok = split.correct.numpy()
    per = [binary_ece(est[:, e], ok[:, e], n_bins) for e in range(j)]
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


# --------------------------------------------------------------------------------------------
# Committees of the three experiments
# --------------------------------------------------------------------------------------------
def committee(experiment: str, value: float, dataset: str, seed: int = 0) -> list[l2d.SyntheticExpert]:
    """The experts of one point of an experiment (L2D paper Sec. 5.2-5.4):

    * ``"experts"``: ``value`` (1..8) experts, oracles on clusters 3-4 (Gaussians) or on the first
      five classes (CIFAR-10), random elsewhere;
    * ``"dependence"``: 1 random expert + 3 experts correct with probability ``value`` there;
    * ``"specialized"`` (CIFAR-10 only): ``value`` (1..5) experts, expert j an oracle on {2j, 2j+1}.
    """
    check_choice(experiment, EXPERIMENTS, "experiment")
    check_choice(dataset, ("gaussians", "cifar10"), "dataset")
    s = 1000 * int(seed) + 17
    if dataset == "gaussians":
        if experiment == "specialized":
            raise ValueError("experiment: 'specialized' is a CIFAR-10 experiment (Fig. 2)")
        kind = "gaussian" if experiment == "experts" else "gaussian_dependence"
        if experiment == "experts":
            return l2d.make_experts(kind, num_experts=int(value), seed=s)
        return l2d.make_experts(kind, p=float(value), seed=s)
    kind = {"experts": "oracle", "dependence": "dependence", "specialized": "specialized"}[experiment]
    if experiment == "dependence":
        return l2d.make_experts(kind, num_classes=10, p=float(value), seed=s)
    return l2d.make_experts(kind, num_experts=int(value), num_classes=10, seed=s)


def _point_values(cfg: Mapping[str, Any], experiment: str) -> list[float]:
    key = {"experts": "num_experts", "dependence": "dependence_p", "specialized": "specialized_experts"}[experiment]
    return list(cfg[key])


def grid(cfg: Mapping[str, Any], experiments: Sequence[str]) -> list[dict[str, Any]]:
    """Every (experiment, value, surrogate, seed) point of the settings ``cfg`` (keys
    ``num_experts``, ``dependence_p``, ``specialized_experts``, ``seeds``).

    Used in: notebooks/l2d_cifar10, notebooks/l2d_gaussians.
    """
    return [
        {"experiment": e, "value": v, "surrogate": s, "seed": seed}
        for e in experiments
        for v in _point_values(cfg, e)
        for s in SURROGATES
        for seed in range(int(cfg["seeds"]))
    ]


# --------------------------------------------------------------------------------------------
# Mixture of Gaussians (Figure 1, top row; Figure 3)
# --------------------------------------------------------------------------------------------
GAUSSIAN_KEYS = ("n_train", "n_val", "n_test", "hidden", "epochs", "lr", "batch_size", "patience", "weight_decay")


def gaussian_splits(n_train: int, n_val: int, n_test: int, seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Train/validation/test draws of the 4-cluster mixture (``lib.l2d.gaussian_mixture``), one
    draw per seed split in order. Used in: notebooks/l2d_gaussians."""
    x, y, _ = l2d.gaussian_mixture(n_train + n_val + n_test, seed=seed)
    cuts = np.cumsum([n_train, n_val])
    return {
        "train": (x[: cuts[0]], y[: cuts[0]]),
        "val": (x[cuts[0] : cuts[1]], y[cuts[0] : cuts[1]]),
        "test": (x[cuts[1] :], y[cuts[1] :]),
    }


def run_gaussian(
    experiment: str, value: float, surrogate: str, seed: int, cfg: Mapping[str, Any]
) -> dict[str, Any]:
    """One cached run of the mixture-of-Gaussians study: train the 4-layer MLP (``lib.backbones.mlp``)
    with ``surrogate`` on the committee of (``experiment``, ``value``) and return test metrics.
    Used in: notebooks/l2d_gaussians.
    """
    from lib.backbones import mlp

    check_choice(surrogate, SURROGATES, "surrogate")
    config = {"experiment": experiment, "value": value, "surrogate": surrogate,
              "seed": int(seed), **{k: cfg[k] for k in GAUSSIAN_KEYS}}

    def compute(run: Any) -> dict[str, Any]:
        experts = committee(experiment, value, "gaussians", seed)
        data = gaussian_splits(cfg["n_train"], cfg["n_val"], cfg["n_test"], seed)
        offsets = {"train": 0, "val": 10**6, "test": 2 * 10**6}
        splits = {k: annotate(x, y, experts, offsets[k], group=y) for k, (x, y) in data.items()}
        torch.manual_seed(seed)
        model = mlp(2, tuple(cfg["hidden"]), num_classes=4 + len(experts))
        model, hist = train_l2d(model, splits["train"], splits["val"], surrogate, epochs=cfg["epochs"],
                                lr=cfg["lr"], batch_size=cfg["batch_size"], patience=cfg["patience"],
                                weight_decay=cfg["weight_decay"], seed=seed)
        out = l2d_metrics(_batched_logits(model, splits["test"].x), splits["test"], surrogate)
        out["epochs_run"] = len(hist)
        return out

    return cached_run("l2d_gaussians", config, compute)


# --------------------------------------------------------------------------------------------
# CIFAR-10 (Figure 1, bottom row; Figure 2)
# --------------------------------------------------------------------------------------------
CIFAR_KEYS = ("mode", "arch", "width", "epochs", "lr", "weight_decay", "batch_size", "warmup", "head_hidden",
              "head_epochs", "head_lr", "patience", "backbone_epochs", "n_backbone")


def run_cifar(
    experiment: str, value: float, surrogate: str, seed: int, cfg: Mapping[str, Any], data: Mapping[str, Any]
) -> dict[str, Any]:
    """One cached run of the CIFAR-10 study (``data`` from ``lib.experiments.reweighted.image_data``).

    ``cfg["mode"]`` = ``"end_to_end"`` (paper scale): the network ``arch`` (WRN-28-4) with K + J
    outputs trained on the surrogate through ``lib.engine.loop.fit`` (SGD, Nesterov, cosine,
    weights with the lowest validation surrogate loss kept, early stopping after ``patience`` epochs
    without improvement, as the paper's Sec. 5.1); ``"features"`` (cpu/smoke): a
    Linear-ReLU-Linear head with K + J outputs trained by :func:`train_l2d` on the frozen features
    of the shared cross-entropy backbone (``lib.experiments.reweighted.backbone_features``).
    Used in: notebooks/l2d_cifar10.
    """
    from lib.experiments import image_training as rx

    check_choice(surrogate, SURROGATES, "surrogate")
    check_choice(cfg["mode"], ("features", "end_to_end"), "mode")
    config = {"experiment": experiment, "value": value, "surrogate": surrogate,
              "seed": int(seed), "data": data["tag"], **{k: cfg[k] for k in CIFAR_KEYS}}
    experts = committee(experiment, value, "cifar10", seed)
    k = int(data["num_classes"])

    def compute(run: Any) -> dict[str, Any]:
        if cfg["mode"] == "features":
            feats = rx.backbone_features(cfg, data)
            f = rx.standardize(feats)
            nb = int(cfg["n_backbone"])
            tr = annotate(f["head_x"], feats["head_y"], experts, offset=nb)
            va = annotate(f["val_x"], feats["val_y"], experts, offset=10**6)
            te = annotate(f["test_x"], feats["test_y"], experts, offset=2 * 10**6)
            torch.manual_seed(seed)
            head = rx.make_head(tr.x.shape[1], int(cfg["head_hidden"]), k + len(experts))
            head, hist = train_l2d(head, tr, va, surrogate, epochs=int(cfg["head_epochs"]), lr=cfg["head_lr"],
                                   weight_decay=cfg["weight_decay"], batch_size=int(cfg["batch_size"]),
                                   patience=int(cfg["patience"]), seed=seed)
            out = l2d_metrics(_batched_logits(head, te.x), te, surrogate)
            out["epochs_run"] = len(hist)
            out["backbone_test_accuracy"] = feats["backbone_test_accuracy"]
            return out
        tr = annotate(torch.zeros(len(data["train_y"]), 1), data["train_y"], experts, offset=0)
        va = annotate(torch.zeros(len(data["val_y"]), 1), data["val_y"], experts, offset=10**6)
        te = annotate(torch.zeros(len(data["test_y"]), 1), data["test_y"], experts, offset=2 * 10**6)
        torch.manual_seed(seed)
        net = rx.build_network(cfg["arch"], cfg["width"], k + len(experts))
        net, hist = rx.fit_images(net, surrogate_loss(surrogate), (data["train_x"], _targets(tr)),
                                  (data["val_x"], _targets(va)), {**cfg, "schedule": "cosine", "nesterov": True},
                                  run, seed=seed, patience=int(cfg["patience"]))
        out = l2d_metrics(rx.predict_logits(net, data["test_x"]), te, surrogate)
        out["history"] = hist
        return out

    return cached_run("l2d_cifar10", config, compute)


# --------------------------------------------------------------------------------------------
# Tables and claims
# --------------------------------------------------------------------------------------------
RESULT_COLUMNS = ("ece", "system_accuracy", "classifier_accuracy", "defer_rate", "ece_random_expert")


def run_grid(points: Sequence[Mapping[str, Any]], runner: Callable[..., Mapping[str, Any]]) -> pd.DataFrame:
    """Run every grid point with ``runner(experiment, value, surrogate, seed)`` and return one row
    per run: the point plus ``ece``, ``system_accuracy``, ``classifier_accuracy``, ``defer_rate``
    and ``ece_random_expert`` (expert 0's ECE, the random expert of the dependence experiment).

    Used in: notebooks/l2d_cifar10, notebooks/l2d_gaussians.
    """
    rows = []
    for p in points:
        r = runner(p["experiment"], p["value"], p["surrogate"], p["seed"])
        row = dict(p)
        for col in RESULT_COLUMNS[:-1]:
            row[col] = float(r[col])
        row["ece_random_expert"] = float(r["ece_per_expert"][0])
        rows.append(row)
    return pd.DataFrame(rows)


def summarize(df: pd.DataFrame, metrics: Sequence[str] = RESULT_COLUMNS) -> pd.DataFrame:
    """Mean, standard deviation and standard error over seeds of each metric, per
    (experiment, value, surrogate); columns ``<metric>``, ``<metric>_sd``, ``<metric>_se``, ``seeds``.

    Used in: notebooks/l2d_cifar10, notebooks/l2d_gaussians.
    """
    if df.empty:
        raise ValueError("df: no runs to summarize")
    g = df.groupby(["experiment", "value", "surrogate"], sort=True)
    out = g[list(metrics)].mean()
    sd = g[list(metrics)].std(ddof=1).fillna(0.0)
    n = g.size()
    for m in metrics:
        out[f"{m}_sd"] = sd[m]
        out[f"{m}_se"] = sd[m] / np.sqrt(n)
    out["seeds"] = n
    return out.reset_index()


def _interval(samples: np.ndarray) -> tuple[float, float, float]:
    """Mean and a 2-standard-error interval (infinite with a single sample)."""
    x = np.asarray(samples, dtype=float)
    mean = float(x.mean())
    if len(x) < 2:
        return mean, -math.inf, math.inf
    se = float(x.std(ddof=1) / np.sqrt(len(x)))
    return mean, mean - 2 * se, mean + 2 * se


def verdict_positive(samples: np.ndarray) -> str:
    """'held' if the mean of ``samples`` is positive beyond two standard errors, 'did not hold' if
    the mean is not positive, else 'inconclusive at this scale'."""
    mean, lo, _ = _interval(samples)
    if lo > 0:
        return "held"
    if mean <= 0:
        return "did not hold"
    return "inconclusive at this scale"


def _per_seed(df: pd.DataFrame, experiment: str, surrogate: str, metric: str) -> pd.DataFrame:
    sub = df[(df.experiment == experiment) & (df.surrogate == surrogate)]
    return sub.pivot_table(index="seed", columns="value", values=metric)


def _rise(df: pd.DataFrame, experiment: str, surrogate: str, metric: str) -> np.ndarray:
    """Per seed: metric at the largest value of the sweep minus metric at the smallest."""
    t = _per_seed(df, experiment, surrogate, metric)
    return (t[t.columns.max()] - t[t.columns.min()]).to_numpy()


def l2d_claims(df: pd.DataFrame, flat_tol: float = 0.03) -> list[dict[str, Any]]:
    """The paper's claims (SPEC section 3), each judged from the runs in ``df`` (one row per run,
    as from :func:`run_grid`). Returns rows with ``claim``, ``paper``, ``ours`` and ``verdict``
    ('held' / 'did not hold' / 'inconclusive at this scale').

    * Softmax ECE grows with the number of experts: per seed, ECE(J max) - ECE(J min) > 0.
    * OvA stays flat: the two-standard-error interval of its rise lies within +-``flat_tol``.
    * Random expert: its softmax ECE rises with the others' quality; OvA's rises less.
    * Random expert's softmax ECE exceeds 0.4 at the highest quality.
    * OvA system accuracy is equal or higher: mean over all points of acc(OvA) - acc(softmax)
      not below -0.005 (half a point) beyond two standard errors.

    Specialized experts (Fig. 2) get the first two rows again when present.
    Used in: notebooks/l2d_gaussians, notebooks/l2d_cifar10.
    """
    rows: list[dict[str, Any]] = []
    for exp, label in (("experts", "experts (oracles)"), ("specialized", "specialized experts")):
        if not (df.experiment == exp).any():
            continue
        sm, ova = _rise(df, exp, "softmax", "ece"), _rise(df, exp, "ova", "ece")
        vals = sorted(df[df.experiment == exp].value.unique())
        rows.append({
            "claim": f"softmax expert ECE grows with the number of {label} ({vals[0]:g} to {vals[-1]:g})",
            "paper": "grows (Fig. 1a/d, Fig. 2a)",
            "ours": f"rise {np.mean(sm):+.3f} (per-seed {', '.join(f'{v:+.3f}' for v in sm)})",
            "verdict": verdict_positive(sm),
        })
        m_ova, lo, hi = _interval(ova)
        if -flat_tol < lo and hi < flat_tol:
            flat_verdict = "held"
        elif lo >= flat_tol or hi <= -flat_tol:
            flat_verdict = "did not hold"
        else:
            flat_verdict = "inconclusive at this scale"
        rows.append({
            "claim": f"OvA expert ECE stays flat with the number of {label} (rise within +-{flat_tol})",
            "paper": "flat",
            "ours": f"rise {m_ova:+.3f} (softmax {np.mean(sm):+.3f})",
            "verdict": flat_verdict,
        })
    if (df.experiment == "dependence").any():
        sm = _rise(df, "dependence", "softmax", "ece_random_expert")
        ova = _rise(df, "dependence", "ova", "ece_random_expert")
        rows.append({
            "claim": "the random expert's softmax ECE rises with the other experts' quality; OvA's rises less",
            "paper": "rises to above 0.4 (softmax); nearly flat (OvA) (Fig. 1c/f)",
            "ours": f"rise softmax {np.mean(sm):+.3f}, OvA {np.mean(ova):+.3f}",
            "verdict": "held" if verdict_positive(sm) == "held" and verdict_positive(sm - ova) == "held"
            else ("did not hold" if np.mean(sm) <= 0 or np.mean(sm - ova) <= 0 else "inconclusive at this scale"),
        })
        top = _per_seed(df, "dependence", "softmax", "ece_random_expert")
        top = top[top.columns.max()].to_numpy()
        mean, lo, hi = _interval(top)
        rows.append({
            "claim": "the random expert's softmax ECE exceeds 0.4 when the others are best",
            "paper": "> 0.4",
            "ours": f"{mean:.3f}",
            "verdict": "held" if lo > 0.4 else ("did not hold" if mean <= 0.4 else "inconclusive at this scale"),
        })
    acc = df.pivot_table(index=["experiment", "value", "seed"], columns="surrogate", values="system_accuracy")
    diff = (acc["ova"] - acc["softmax"]).groupby(level="seed").mean().to_numpy()
    mean, lo, hi = _interval(diff)
    rows.append({
        "claim": "OvA system accuracy is equal or higher than softmax",
        "paper": "equal or slightly higher (Fig. 1b/e, Fig. 2b)",
        "ours": f"OvA - softmax = {mean:+.4f} (mean over all settings)",
        "verdict": "held" if lo >= -0.005 or mean >= 0 else ("did not hold" if hi < 0 else "inconclusive at this scale"),
    })
    return rows
