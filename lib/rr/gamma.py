"""Choosing the gamma of the focal family by cross-validation: a post-hoc analogue of paper 4's
selection (Appendix E.1, App. Figure 4, App. Table 2).

The paper trains one network per gamma and keeps the best by validation loss. Here nothing is
retrained: for each gamma a map on one network's logits, ``"temperature"`` (z / T) or ``"vector"``
(z * a + b; Guo et al. 2017), is fitted by minimizing that gamma's loss and scored on held-out
examples (K-fold), the validation loss read as the NLL (comparable across gammas), the ECE beside it."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.special import softmax as scipy_softmax

from lib.config import paper_numbers
from lib.rr import losses as rw
from lib.calibration.posthoc import lbfgs_minimize
from lib.calibration.metrics import ece, nll
from lib.validation import ArrayLike, check_choice, check_int, check_logits_labels, check_positive, to_numpy

#: the focal-family losses whose gamma is cross-validated -> their ``lib.rr.losses.get_loss``
#: name. Dual focal is computed as the released code computes it, as in the paper's runs (and the
#: book's, ``lib.rr.experiment.LOSS_SPECS``).
GAMMA_LOSSES: dict[str, str] = {"focal": "focal", "inverse_focal": "inverse_focal", "dual_focal": "dual_focal_released"}
MAPS: tuple[str, ...] = ("temperature", "vector")
CRITERIA: tuple[str, ...] = ("nll", "ece")
LOG_SCALE_BOUND = math.log(100.0)  # |log a| <= log 100: a temperature in [0.01, 100]
BIAS_BOUND = 100.0  # |b| <= 100 for vector scaling

#: The selected gamma of dual focal and inverse focal loss per (dataset, model), the paper's App.
#: Table 2 (``lib/rr/paper.toml``). Focal loss is not listed: the paper uses FL-53 (gamma 5 below
#: p_t = 0.2, else 3).
PAPER_SELECTED_GAMMAS: dict[tuple[str, str], dict[str, float]] = {
    (r.pop("dataset"), r.pop("model")): r for r in paper_numbers("rr")["selected_gammas"]
}


def fit_logit_map(
    logits: np.ndarray,
    labels: np.ndarray,
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    kind: str = "temperature",
) -> tuple[np.ndarray, np.ndarray]:
    """Fit a ``kind`` map z -> z * scale + bias on (``logits``, ``labels``) by minimizing ``loss`` with
    100 iterations of LBFGS (:func:`lib.calibration.posthoc.lbfgs_minimize`) from the identity map,
    log-scales clamped to [1/100, 100] and biases to [-100, 100]; with cross-entropy and
    ``"temperature"``, temperature scaling.
    Returns ``(scale, bias)``, (C,) arrays each; a temperature map has every scale equal to 1 / T and
    no bias. The logits (float64) and labels are those :func:`gamma_cross_validation` checked."""
    zt, yt = torch.as_tensor(logits), torch.as_tensor(labels)
    c = zt.shape[1]
    log_a = torch.zeros(1 if kind == "temperature" else c, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(c, dtype=torch.float64, requires_grad=kind == "vector")
    params = [log_a] + ([b] if kind == "vector" else [])

    def mapped() -> torch.Tensor:
        return zt * torch.exp(log_a.clamp(-LOG_SCALE_BOUND, LOG_SCALE_BOUND)) + b.clamp(-BIAS_BOUND, BIAS_BOUND)

    lbfgs_minimize(lambda: loss(mapped(), yt), params, max_iter=100, tolerance_grad=1e-9)
    with torch.no_grad():
        scale = torch.exp(log_a.clamp(-LOG_SCALE_BOUND, LOG_SCALE_BOUND)).expand(c).numpy().copy()
        bias = b.clamp(-BIAS_BOUND, BIAS_BOUND).numpy().copy()
    return scale, bias


def gamma_curve(
    fit_logits: np.ndarray,
    fit_labels: np.ndarray,
    val_logits: np.ndarray,
    val_labels: np.ndarray,
    loss: str,
    gammas: Sequence[float],
    kind: str = "temperature",
    n_bins: int = 15,
) -> pd.DataFrame:
    """For each gamma: the ``kind`` map fitted with ``loss`` (of ``GAMMA_LOSSES``) on the fit split,
    scored on the validation split: ``nll``, ``ece`` (``n_bins`` equal-width), ``accuracy`` and
    ``temperature`` (NaN for vector maps), one row each; arguments as :func:`gamma_cross_validation`
    checked them."""
    rows = []
    for g in gammas:
        scale, bias = fit_logit_map(fit_logits, fit_labels, rw.get_loss(GAMMA_LOSSES[loss], gamma=g), kind)
        p = scipy_softmax(val_logits * scale + bias, axis=1)  # exp(z - max) / sum
        rows.append(
            {
                "loss": loss,
                "map": kind,
                "gamma": g,
                "nll": nll(p, val_labels),
                "ece": ece(p, val_labels, n_bins),
                "accuracy": float((p.argmax(1) == val_labels).mean()),
                "temperature": float(1.0 / scale[0]) if kind == "temperature" else float("nan"),
            }
        )
    return pd.DataFrame(rows)


def fold_indices(n: int, n_folds: int, seed: int = 0) -> list[np.ndarray]:
    """``n_folds`` disjoint, sorted index arrays covering 0..n-1 (a random permutation with ``seed``
    cut into near-equal parts): fold k validates, the others fit."""
    n = check_int(n, "n", minimum=2)
    n_folds = check_int(n_folds, "n_folds", minimum=2, maximum=n)
    seed = check_int(seed, "seed", minimum=0)
    perm = np.random.default_rng(seed).permutation(n)
    return [np.sort(part) for part in np.array_split(perm, n_folds)]


def gamma_cross_validation(
    logits: ArrayLike,
    labels: ArrayLike,
    gammas: Sequence[float],
    losses: Sequence[str] = tuple(GAMMA_LOSSES),
    maps: Sequence[str] = ("temperature",),
    n_folds: int = 2,
    seed: int = 0,
    n_bins: int = 15,
) -> pd.DataFrame:
    """K-fold cross-validation of gamma: :func:`gamma_curve` for every fold (:func:`fold_indices`),
    loss and map, with a ``fold`` column."""
    z, y = to_numpy(logits, "logits"), to_numpy(labels, "labels", dtype=np.int64)
    check_logits_labels(z, y)
    for names, valid, what in ((losses, tuple(GAMMA_LOSSES), "losses"), (maps, MAPS, "maps")):
        if isinstance(names, str) or not names:
            raise ValueError(f"{what}: expected a non-empty sequence of names, got {names!r}")
        for name in names:
            check_choice(name, valid, what)
    if isinstance(gammas, (str, bytes)) or not isinstance(gammas, Sequence | np.ndarray) or len(gammas) == 0:
        raise ValueError(f"gammas: expected a non-empty sequence of numbers >= 0, got {gammas!r}")
    gammas = [check_positive(g, "gammas", allow_zero=True) for g in gammas]
    if len(set(gammas)) != len(gammas):
        raise ValueError(f"gammas: values must be distinct, got {gammas}")
    frames = []
    for k, val in enumerate(fold_indices(len(y), n_folds, seed)):
        fit = np.setdiff1d(np.arange(len(y)), val, assume_unique=True)
        for kind in maps:
            for name in losses:
                curve = gamma_curve(z[fit], y[fit], z[val], y[val], name, gammas, kind, n_bins)
                frames.append(curve.assign(fold=k))
    return pd.concat(frames, ignore_index=True)


def summarize_folds(cv: pd.DataFrame) -> pd.DataFrame:
    """Mean over folds of ``nll``, ``ece``, ``accuracy`` and ``temperature`` per (loss, map,
    gamma), with the standard error of the mean over folds as ``nll_se`` and ``ece_se``."""
    if not isinstance(cv, pd.DataFrame) or cv.empty:
        raise ValueError("cv: expected the non-empty DataFrame of gamma_cross_validation")
    missing = {"loss", "map", "gamma", "nll", "ece"} - set(cv.columns)
    if missing:
        raise ValueError(f"cv: missing columns {sorted(missing)}")
    g = cv.groupby(["loss", "map", "gamma"], sort=False)
    out = g[["nll", "ece", "accuracy", "temperature"]].mean()
    n = g.size()
    for k in ("nll", "ece"):
        out[f"{k}_se"] = (g[k].std(ddof=1) / np.sqrt(n)).fillna(0.0)
    return out.reset_index()


def check_summary(summary: Any) -> pd.DataFrame:
    """``summary`` if it is :func:`summarize_folds`'s output (fold means), else a ``ValueError``: the
    per-fold table of :func:`gamma_cross_validation` would pick a gamma by one fold's value."""
    if not isinstance(summary, pd.DataFrame) or "fold" in summary.columns or "nll_se" not in summary.columns:
        raise ValueError("summary: expected summarize_folds(cv), the fold means, not the per-fold table")
    return summary


def select_gamma(summary: pd.DataFrame, criterion: str = "nll") -> dict[str, dict[str, float]]:
    """The gamma with the lowest fold-mean ``criterion`` per map and loss (the smallest on ties) of
    :func:`summarize_folds`'s ``summary``, as ``{map: {loss: gamma}}``."""
    check_choice(criterion, CRITERIA, "criterion")
    summary = check_summary(summary)
    out: dict[str, dict[str, float]] = {}
    for (kind, loss), part in summary.groupby(["map", "loss"], sort=False):
        best = part.sort_values(["gamma"]).reset_index(drop=True)
        out.setdefault(str(kind), {})[str(loss)] = float(best.loc[best[criterion].idxmin(), "gamma"])
    return out


def gamma_table(chosen: Mapping[str, Mapping[str, Mapping[str, float]]]) -> pd.DataFrame:
    """Our chosen gammas (``chosen``: criterion -> :func:`select_gamma`'s output) above the paper's
    App. Table 2 rows, one column per loss."""
    if not isinstance(chosen, Mapping) or not chosen or not all(isinstance(v, Mapping) for v in chosen.values()):
        raise ValueError(f"chosen: expected {{criterion: {{map: {{loss: gamma}}}}}}, got {chosen!r}")
    losses = list(dict.fromkeys(name for by_map in chosen.values() for per_map in by_map.values() for name in per_map))
    named = [
        (f"ours: {kind} scaling, by {criterion}", per_map)
        for criterion, by_map in chosen.items()
        for kind, per_map in by_map.items()
    ] + [(f"paper: {dataset} {model}", gammas) for (dataset, model), gammas in PAPER_SELECTED_GAMMAS.items()]
    rows = [{"chosen by": who, **{name: gammas.get(name, float("nan")) for name in losses}} for who, gammas in named]
    return pd.DataFrame(rows).set_index("chosen by")
