"""Post-hoc calibrators of one model (all four papers): temperature scaling (Guo et al. 2017,
:class:`TemperatureScaler`), Platt scaling (Platt 1999, :func:`fit_platt`) and histogram binning
(Zadrozny & Elkan 2001, :class:`HistogramBinning`). Functions returning probabilities return the same
kind (numpy or torch) as the logits they were given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
from scipy.optimize import minimize

from lib.calibration.metrics import EPS, _bin_stats, _conf_outcome, bin_index
from lib.validation import (
    ArrayLike,
    check_bins,
    check_choice,
    check_finite,
    check_int,
    check_labels,
    check_ndim,
    check_nonempty,
    check_positive,
    check_probs,
    check_same_length,
    to_float_tensor,
    to_tensor,
    to_unit_vector,
)

T_FIT_BOUNDS = (1e-6, 1e6)  # TemperatureScaler's search range without bounds (see the check at its fit's end)
PAPER_LR = 0.01  # paper 1's LBFGS temperature fit: 50 iterations at this rate (App. D.5 / its public code)
FIT_PROTOCOLS: tuple[str, ...] = ("converged", "paper")
TS_CRITERIA: tuple[str, ...] = ("nll", "ece")
ECE_T_RANGE: tuple[float, float] = (0.05, 20.0)  # search range of the ECE criterion
LBFGS_RESTARTS = 5  # the converged fit calls LBFGS again while a call still lowers the NLL


def same_kind(x: torch.Tensor, template: ArrayLike) -> ArrayLike:
    """Return ``x`` as a torch tensor if ``template`` is one, else as a numpy array."""
    return x if isinstance(template, torch.Tensor) else x.detach().cpu().numpy()


def lbfgs_minimize(
    loss_fn: Callable[[], torch.Tensor],
    params: Sequence[torch.Tensor],
    *,
    lr: float = 1.0,
    max_iter: int = 50,
    line_search: bool = True,
    tolerance_grad: float = 1e-10,
    tolerance_change: float = 1e-12,
    restarts: int = 1,
) -> None:
    """Minimise ``loss_fn()`` over ``params`` (leaf tensors, updated in place) with torch's LBFGS
    (:class:`TemperatureScaler`, paper 4's logit maps in lib.rr.gamma). ``line_search``: strong Wolfe
    (``lr`` = 1 is the quasi-Newton step); without it each step is ``lr`` times the LBFGS direction
    (paper 1's protocol). LBFGS is called again while a call still lowers the loss, at most ``restarts`` calls.
    """
    check_positive(lr, "lr")
    check_positive(tolerance_grad, "tolerance_grad", allow_zero=True)
    check_positive(tolerance_change, "tolerance_change", allow_zero=True)
    max_iter, restarts = check_int(max_iter, "max_iter"), check_int(restarts, "restarts")
    params = list(params)
    if not params or not all(isinstance(p, torch.Tensor) and p.requires_grad for p in params):
        raise ValueError("params: expected a non-empty sequence of tensors with requires_grad=True")
    opt = torch.optim.LBFGS(
        params,
        lr=lr,
        max_iter=max_iter,
        line_search_fn="strong_wolfe" if line_search else None,
        tolerance_grad=tolerance_grad,
        tolerance_change=tolerance_change,
    )

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    prev = math.inf
    for i in range(restarts):
        opt.step(closure)
        if i == restarts - 1:
            break
        with torch.no_grad():
            cur = float(loss_fn())
        if prev - cur <= 1e-12 * max(1.0, abs(cur)):
            break
        prev = cur


class TemperatureScaler:
    """Temperature scaling (Guo et al. 2017): p = softmax(z / T), one T > 0 fitted on held-out data.

    One fit (:meth:`fit`), on T itself, from T = 1, in float64; the papers' protocols are its options.
    T itself, not t = log T, because paper 1's public code optimises T (``nn.Parameter(torch.ones(1))``):
    the converged fit reaches the same minimiser either way, but the partial ``protocol="paper"`` fit
    stops at another T under the other parametrisation, and the public code's is the paper's.

    * ``criterion="nll"``, ``protocol="converged"`` (papers 1-3): T minimises the validation NLL,
      mean_i -log softmax(z_i / T)_{y_i} (unimodal in T), by :func:`lbfgs_minimize` with a strong-Wolfe
      line search and ``lr`` = 1, to the float64 precision of the NLL.
    * ``protocol="paper"`` (paper 1, App. D.5: "LBFGS (50 iterations, learning rate 0.01)", the rate
      from its public code): the same LBFGS *without* line search and ``lr`` = 0.01, which stops well
      short of a minimiser above 1 and can jump past one below 1, down to the lower bound
      (:mod:`lib.moe.evaluate` explains why this partial fit is the protocol).
    * ``criterion="ece"`` (paper 4, Tables 1 and 4: "the temperature T is selected by minimizing
      ECE"): T minimises the top-label ECE with ``n_bins`` equal-width bins. The ECE is piecewise
      constant in T, so log T is searched on 241 points over [0.05, 20], then 101 points within one
      step of the best; the smallest ECE wins (the first on ties).

    T is clamped to ``bounds`` inside the objective (MoCaE's [0.1, 10], paper 1 section 6.2); without
    them the range is [1e-6, 1e6], and a fit ending at its top while z / T is still far from 0 raises.
    Expert logits (N, K, C) get one T per expert (K separate fits). For a mixture of experts pass
    ``probs_to_logits(mixture_probs)``. Calling the fitted scaler returns softmax(z / T).
    """

    def __init__(
        self,
        criterion: str = "nll",
        protocol: str = "converged",
        *,
        max_iter: int = 50,
        lr: float | None = None,
        n_bins: int = 15,
        bounds: tuple[float, float] | None = None,
    ) -> None:
        check_choice(criterion, TS_CRITERIA, "criterion")
        check_choice(protocol, FIT_PROTOCOLS, "protocol")
        if protocol == "paper" and criterion != "nll":
            raise ValueError(f"protocol: 'paper' fits the NLL only, got criterion={criterion!r}")
        lo, hi = T_FIT_BOUNDS if bounds is None else bounds
        if not (isinstance(lo, int | float) and isinstance(hi, int | float) and 0 < lo < 1 < hi < math.inf):
            raise ValueError(f"bounds: expected (low, high) with 0 < low < 1 < high < inf, got {bounds!r}")
        self.criterion, self.protocol = criterion, protocol
        self.bounds, self.clamp = (float(lo), float(hi)), bounds is not None
        self.max_iter, self.n_bins = check_int(max_iter, "max_iter"), check_bins(n_bins)
        self.lr = check_positive((PAPER_LR if protocol == "paper" else 1.0) if lr is None else lr, "lr")
        self.temperature: float | np.ndarray | None = None

    def fit(self, logits: ArrayLike, labels: ArrayLike) -> TemperatureScaler:
        """Fit T on (``logits`` (N, C) or expert logits (N, K, C), ``labels`` (N,)); returns the scaler."""
        z, y = to_tensor(logits, "logits"), to_tensor(labels, "labels")
        experts = z.ndim == 3
        if z.ndim not in (2, 3) or (experts and z.shape[1] == 0):
            raise ValueError(f"logits: expected (N, C) logits or (N, K, C) expert logits, got shape {tuple(z.shape)}")
        check_finite(z, "logits")
        check_labels(y, z.shape[-1], "labels")
        check_same_length(z, y, "logits", "labels")
        check_nonempty(z, "logits")
        z, y = z.detach().to(torch.float64), y.detach().to(device=z.device, dtype=torch.long)
        fits = [self._fit_one(z[:, k], y) for k in range(z.shape[1])] if experts else None
        self.temperature = np.array(fits) if experts else self._fit_one(z, y)
        return self

    def __call__(self, logits: ArrayLike) -> ArrayLike:
        """softmax(z / T) with the fitted T (per expert for (N, K, C) expert logits)."""
        if self.temperature is None:
            raise ValueError("TemperatureScaler: call fit(logits, labels) first")
        if isinstance(self.temperature, float):
            return apply_temperature(logits, self.temperature)
        z = to_tensor(logits, "logits")
        check_ndim(z, 3, "logits", f"N examples x {len(self.temperature)} experts x C classes")
        t = torch.as_tensor(self.temperature, dtype=torch.float64)[:, None]
        return same_kind(torch.softmax(z.to(torch.float64) / t, dim=-1), logits)

    def _fit_one(self, z: torch.Tensor, y: torch.Tensor) -> float:
        lo, hi = self.bounds
        if self.criterion == "ece":
            return _ece_search(
                z.cpu().numpy(), y.cpu().numpy(), self.n_bins, (max(lo, ECE_T_RANGE[0]), min(hi, ECE_T_RANGE[1]))
            )
        temp = torch.ones(1, dtype=torch.float64, device=z.device, requires_grad=True)

        def nll() -> torch.Tensor:
            return torch.nn.functional.cross_entropy(z / temp.clamp(lo, hi)[0], y)

        paper = self.protocol == "paper"
        lbfgs_minimize(
            nll,
            [temp],
            lr=self.lr,
            max_iter=self.max_iter,
            line_search=not paper,
            tolerance_grad=1e-7 if paper else 1e-14,  # paper: torch's defaults; else the NLL's precision
            tolerance_change=1e-9 if paper else 1e-20,
            restarts=1 if paper else LBFGS_RESTARTS,
        )
        T = float(temp.detach().clamp(lo, hi)[0])
        if not self.clamp and not paper and T >= hi / 1.01 and float(z.abs().max()) / T > 1e-3:
            raise ValueError(
                f"logits: the fitted temperature reached its search bound T = {T:.3g} while z / T is "
                f"still up to {float(z.abs().max()) / T:.3g}: the logits are on an extreme scale; rescale them"
            )
        return T


def _top_label_ece(z: np.ndarray, correct: np.ndarray, T: float, n_bins: int) -> float:
    """Top-label equal-width ECE of softmax(z / T) (the argmax, hence ``correct``, is fixed)."""
    u = (z - z.max(axis=1, keepdims=True)) / T
    conf = 1.0 / np.exp(u).sum(axis=1)
    idx = np.clip(np.ceil(conf * n_bins).astype(np.int64) - 1, 0, n_bins - 1)  # bins (lo, hi]
    gap = np.bincount(idx, weights=correct - conf, minlength=n_bins)
    return float(np.abs(gap).sum() / len(conf))


def _ece_search(z: np.ndarray, y: np.ndarray, n_bins: int, t_range: tuple[float, float]) -> float:
    """The ECE criterion's grid search of log T over ``t_range``."""
    correct = (z.argmax(axis=1) == y).astype(np.float64)
    lo, hi = np.log(t_range[0]), np.log(t_range[1])
    coarse = np.linspace(lo, hi, 241)
    errs = [_top_label_ece(z, correct, float(np.exp(t)), n_bins) for t in coarse]
    step, best = coarse[1] - coarse[0], coarse[int(np.argmin(errs))]
    cand = np.concatenate([[best], np.linspace(max(lo, best - step), min(hi, best + step), 101)])
    errs = [_top_label_ece(z, correct, float(np.exp(t)), n_bins) for t in cand]
    return float(np.exp(cand[int(np.argmin(errs))]))


def apply_temperature(logits: ArrayLike, T: float) -> ArrayLike:
    """softmax(z / T) over the last axis; returns the same kind (numpy/torch) as ``logits``."""
    z = to_tensor(logits, "logits")
    if z.ndim < 1:
        raise ValueError(f"logits: expected at least 1-D array, got shape {tuple(z.shape)}")
    check_finite(z, "logits")
    T = check_positive(T, "T")
    if not z.is_floating_point():
        z = z.to(torch.float64)
    return same_kind(torch.softmax(z / T, dim=-1), logits)


def probs_to_logits(probs: ArrayLike) -> ArrayLike:
    """log(clamp(p, 1e-12)): logits whose softmax is ``probs`` (temperature scaling of a mixture)."""
    p = to_float_tensor(probs, "probs", 2, "N examples x C classes", torch.float64)
    check_probs(p, "probs")
    return same_kind(torch.log(p.clamp_min(EPS)), probs)


def fit_platt(scores: ArrayLike, outcomes: ArrayLike) -> tuple[float, float]:
    """Fit (a, b) of P(outcome = 1 | s) = sigmoid(a s + b) by maximum likelihood (Platt 1999) without
    Platt's target smoothing, as paper 3 fits it (scipy BFGS with the analytic gradient)."""
    s, o = _conf_outcome(scores, outcomes, clip=None, names=("scores", "outcomes"))
    if o.min() == o.max():
        raise ValueError("outcomes: need both 0 and 1 outcomes to fit Platt scaling")

    def loss_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        u = theta[0] * s + theta[1]
        loss = np.mean(np.logaddexp(0.0, u) - o * u)  # BCE with logits: log(1 + exp(u)) - o u, stably
        r = 1.0 / (1.0 + np.exp(-u)) - o
        return float(loss), np.array([np.mean(r * s), np.mean(r)])

    res = minimize(
        loss_grad, x0=np.array([1.0, 0.0]), jac=True, method="BFGS", options={"gtol": 1e-10, "maxiter": 1000}
    )
    return float(res.x[0]), float(res.x[1])


class HistogramBinning:
    """Histogram binning (Zadrozny & Elkan 2001): ``fit(conf, outcome)`` stores the accuracy of each of
    ``n_bins`` equal-count bins (an empty one: its centre), ``predict(conf)`` returns its bin's."""

    def __init__(self, n_bins: int = 15) -> None:
        self.n_bins = check_bins(n_bins)
        self.edges: np.ndarray | None = None
        self.values: np.ndarray | None = None
        self.counts: np.ndarray | None = None

    def fit(self, conf: ArrayLike, outcome: ArrayLike) -> "HistogramBinning":
        edges, counts, _, hits = _bin_stats(*_conf_outcome(conf, outcome), self.n_bins, "mass")
        centres = 0.5 * (edges[:-1] + edges[1:])
        self.values = np.where(counts > 0, hits / np.maximum(counts, 1), centres)
        self.edges, self.counts = edges, counts
        return self

    def predict(self, conf: ArrayLike) -> np.ndarray:
        if self.edges is None or self.values is None:
            raise ValueError("HistogramBinning: call fit(conf, outcome) before predict")
        return self.values[bin_index(to_unit_vector(conf, "conf"), self.edges)]
