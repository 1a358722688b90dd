"""Post-hoc calibrators of one model: temperature scaling, Platt scaling and histogram binning (all four papers).

* Temperature scaling (Guo et al. 2017): p = softmax(z / T), one scalar T > 0 fitted on held-out
  data, by LBFGS on the NLL with T = exp(t) (papers 1-3; paper 1's partial protocol fit with
  ``protocol="paper"``) or by minimising the ECE (paper 4). Every LBFGS fit of the book runs
  :func:`lbfgs_minimize`. For a mixture of experts the "logits" are log(mixture probs)
  (:func:`probs_to_logits`).
* Platt scaling (Platt 1999): P(outcome = 1) = sigmoid(a s + b), fitted by maximum likelihood.
* Histogram binning (Zadrozny & Elkan 2001): the calibrated value of a confidence is the accuracy of
  its equal-count bin on the calibration data.

The per-expert temperatures of a mixture of experts (MoCaE, paper 1) are :mod:`lib.moe.mocae`'s; they
share this module's LBFGS fit on log temperatures (:func:`fit_log_temperatures`).

Inputs are numpy arrays or torch tensors, validated with :mod:`lib.validation`. Functions returning
probabilities return the same kind (numpy or torch) as the logits they were given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
from scipy.optimize import minimize

from lib.calibration.metrics import bin_edges, bin_index
from lib.validation import (
    ArrayLike,
    check_bins,
    check_finite,
    check_int,
    check_logits_labels,
    check_ndim,
    check_positive,
    check_probs,
    check_same_length,
    check_unit_interval,
    to_numpy,
    to_tensor,
)

EPS = 1e-12
T_FIT_BOUNDS = (1e-6, 1e6)  # search range of fit_temperature (see the check at its end)
PAPER_LR, PAPER_ITERS = 0.01, 50  # paper 1's LBFGS temperature fit (App. D.5 / its public code)
FIT_PROTOCOLS: tuple[str, ...] = ("converged", "paper")

__all__ = [
    "HistogramBinning",
    "apply_platt",
    "apply_temperature",
    "FIT_PROTOCOLS",
    "PAPER_ITERS",
    "PAPER_LR",
    "fit_log_temperatures",
    "fit_platt",
    "fit_temperature",
    "lbfgs_minimize",
    "probs_to_logits",
    "same_kind",
]


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
    """Minimise ``loss_fn()`` over ``params`` (leaf tensors with ``requires_grad``, updated in
    place) with torch's LBFGS: the one optimiser behind every temperature fit of the book
    (:func:`fit_temperature` with both protocols, :func:`fit_log_temperatures` for MoCaE's
    per-expert temperatures, and paper 4's logit maps in lib.rr.gamma).

    ``line_search=True`` uses a strong-Wolfe line search, so ``lr`` = 1 is the quasi-Newton step;
    ``line_search=False`` moves exactly ``lr`` times the LBFGS direction each iteration (the first
    one ``lr * min(1, 1/|g|)`` times the negative gradient), as paper 1's protocol does. With
    ``restarts`` > 1, LBFGS is called again while a call still lowers the loss (by more than
    1e-12 relative), at most ``restarts`` calls; each ends at the tolerances or ``max_iter``.
    """
    check_positive(lr, "lr")
    max_iter = check_int(max_iter, "max_iter")
    restarts = check_int(restarts, "restarts")
    check_positive(tolerance_grad, "tolerance_grad")
    check_positive(tolerance_change, "tolerance_change")
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


def fit_log_temperatures(
    nll_fn: Callable[[torch.Tensor], torch.Tensor],
    num: int,
    max_iter: int,
    lr: float,
    device: torch.device,
    bounds: tuple[float, float] = T_FIT_BOUNDS,
    restarts: int = 5,
) -> torch.Tensor:
    """Minimise ``nll_fn(T)`` over T = exp(t) (a vector of ``num`` temperatures, from T = 1) with
    :func:`lbfgs_minimize` (strong-Wolfe line search): the converged fit of :func:`fit_temperature`
    and of :func:`lib.moe.mocae.fit_expert_temperatures`.

    T is kept in ``bounds`` by clamping t inside the objective: beyond a bound the loss is flat,
    the gradient vanishes and LBFGS stops there. The NLL is convex in 1/T, hence unimodal in t,
    so the clamped minimiser is the unconstrained one projected onto the bounds. (Without the
    bound, labels unrelated to the logits send T to infinity and a long step to T = 0 gives NaN.)
    """
    if not (0 < bounds[0] < bounds[1] < math.inf):
        raise ValueError(f"bounds: expected 0 < low < high < inf, got {bounds!r}")
    lo, hi = math.log(bounds[0]), math.log(bounds[1])
    t = torch.zeros(num, dtype=torch.float64, device=device, requires_grad=True)

    def temps() -> torch.Tensor:
        return torch.exp(t.clamp(lo, hi))

    # torch scales every trial step by ``lr``, so with the line search lr = 1 (the quasi-Newton
    # step) is the natural default: measured on 8,000 x 5 logits it converges in about 10
    # evaluations, versus about 190 with the lr = 0.01 of Guo et al.'s public code (which also
    # reaches the optimum here only thanks to the restarts).
    lbfgs_minimize(lambda: nll_fn(temps()), [t], lr=lr, max_iter=max_iter, restarts=restarts)
    return temps().detach()


def _paper_fit(z: torch.Tensor, y: torch.Tensor, lr: float, max_iter: int) -> float:
    """Paper 1's protocol (App. D.5): LBFGS without line search on T itself from T = 1, torch's
    default tolerances; floored at 1e-3 so that a pathological step cannot give T <= 0."""
    temp = torch.tensor([1.0], dtype=torch.float64, device=z.device, requires_grad=True)
    lbfgs_minimize(
        lambda: torch.nn.functional.cross_entropy(z / temp[0], y),
        [temp],
        lr=lr,
        max_iter=max_iter,
        line_search=False,
        tolerance_grad=1e-7,
        tolerance_change=1e-9,
    )
    return max(float(temp.detach()[0]), 1e-3)


# --- temperature scaling ------------------------------------------------------------------------


TS_CRITERIA: tuple[str, ...] = ("nll", "ece")
ECE_T_RANGE: tuple[float, float] = (0.05, 20.0)  # search range of the ECE criterion


def fit_temperature(
    logits: ArrayLike,
    labels: ArrayLike,
    max_iter: int = 50,
    lr: float | None = None,
    criterion: str = "nll",
    n_bins: int = 15,
    protocol: str = "converged",
) -> float:
    """Fit the temperature T > 0 of p = softmax(z / T) on held-out (logits, labels).

    * ``criterion="nll"`` (Guo et al. 2017; paper 1, App. D.5: "minimizing the validation
      cross-entropy with LBFGS (50 iterations)"): T minimises mean_i -log softmax(z_i / T)_{y_i}.
      One LBFGS run of at most ``max_iter`` = 50 iterations on t = log T (so T stays positive;
      paper 1's code steps on T itself with lr 0.01 and no line search), with a strong-Wolfe line
      search and lr = 1 in float64: the NLL is convex in 1/T, and on 10,000 x 10 logits this
      reaches the minimum in about 10 evaluations, well inside the 50 iterations.
    * ``criterion="ece"`` (paper 4, Tables 1 and 4: "the temperature T is selected by minimizing
      ECE"): T minimises the top-label ECE with ``n_bins`` equal-width bins (``lib.calibration.metrics.ece``).
      That objective is piecewise constant in T, so instead of a gradient method (paper 4's code
      runs LBFGS on a binned ECE loss) we search log T on a grid of 241 points over
      [0.05, 20], then 101 points within one grid step of the best; the smallest ECE wins (the
      first on ties). ``max_iter`` and ``lr`` apply to ``"nll"`` only.

    ``protocol`` (NLL only): ``"converged"`` (default) is the minimiser above (``lr`` default 1);
    ``"paper"`` is paper 1's protocol (App. D.5: "LBFGS (50 iterations, learning rate 0.01)", the
    rate restored from its public code): LBFGS *without* line search on T itself from T = 1, so
    each step is ``lr`` (default 0.01) times the quasi-Newton step and 50 iterations stop well
    short of the minimiser (:mod:`lib.moe.evaluate` explains why this partial fit is the protocol);
    the result is floored at 1e-3.

    Dividing by a positive T never changes the argmax, so accuracy is unchanged. For an MoE pass
    ``probs_to_logits(mixture_probs)``.
    """
    z = to_tensor(logits, "logits")
    y = to_tensor(labels, "labels")
    check_logits_labels(z, y)
    if z.shape[0] == 0:
        raise ValueError("logits: is empty (0 examples)")
    if criterion not in TS_CRITERIA:
        raise ValueError(f"criterion: unknown value {criterion!r}; valid values are {TS_CRITERIA}")
    if protocol not in FIT_PROTOCOLS:
        raise ValueError(f"protocol: unknown value {protocol!r}; valid values are {FIT_PROTOCOLS}")
    if protocol == "paper" and criterion != "nll":
        raise ValueError(f"protocol: 'paper' fits the NLL only, got criterion={criterion!r}")
    max_iter = check_int(max_iter, "max_iter")
    n_bins = check_int(n_bins, "n_bins")
    lr = (PAPER_LR if protocol == "paper" else 1.0) if lr is None else lr
    check_positive(lr, "lr")
    z = z.detach().to(torch.float64)
    y = y.detach().to(device=z.device, dtype=torch.long)
    if criterion == "ece":
        return _fit_temperature_ece(z.cpu().numpy(), y.cpu().numpy(), n_bins)
    if protocol == "paper":
        return _paper_fit(z, y, lr, max_iter)

    def nll_fn(temp: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(z / temp[0], y)

    T = float(fit_log_temperatures(nll_fn, 1, max_iter, lr, z.device, restarts=1)[0])
    # At the upper bound with z / T still far from 0, the bound (not the data) stopped the fit.
    if T >= 1e6 / 1.01 and float(z.abs().max()) / T > 1e-3:
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


def _fit_temperature_ece(z: np.ndarray, y: np.ndarray, n_bins: int) -> float:
    correct = (z.argmax(axis=1) == y).astype(np.float64)
    lo, hi = np.log(ECE_T_RANGE[0]), np.log(ECE_T_RANGE[1])
    coarse = np.linspace(lo, hi, 241)
    errs = [_top_label_ece(z, correct, float(np.exp(t)), n_bins) for t in coarse]
    step = coarse[1] - coarse[0]
    best = coarse[int(np.argmin(errs))]
    fine = np.linspace(max(lo, best - step), min(hi, best + step), 101)
    cand = np.concatenate([[best], fine])
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
    p = to_tensor(probs, "probs")
    check_probs(p, "probs")
    if not p.is_floating_point():
        p = p.to(torch.float64)
    return same_kind(torch.log(p.clamp_min(EPS)), probs)


# --- Platt scaling ------------------------------------------------------------------------------


def _scores_outcomes(scores: ArrayLike, outcomes: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    s = to_numpy(scores, "scores")
    o = to_numpy(outcomes, "outcomes")
    check_ndim(s, 1, "scores")
    check_finite(s, "scores")
    check_ndim(o, 1, "outcomes")
    check_same_length(s, o, "scores", "outcomes")
    if s.shape[0] == 0:
        raise ValueError("scores: is empty (0 examples)")
    if not np.all((o == 0) | (o == 1)):
        raise ValueError("outcomes: values must be 0 or 1 (or booleans)")
    return s, o


def fit_platt(scores: ArrayLike, outcomes: ArrayLike) -> tuple[float, float]:
    """Fit (a, b) of P(outcome = 1 | s) = sigmoid(a s + b) by maximum likelihood (Platt 1999).

    Plain logistic regression on one feature (scipy BFGS on the mean binary cross-entropy with its
    analytic gradient); Platt's target smoothing (N+ + 1)/(N+ + 2) is not applied, following the
    paper 3's sigmoid(a s + b).
    """
    s, o = _scores_outcomes(scores, outcomes)
    if o.min() == o.max():
        raise ValueError("outcomes: need both 0 and 1 outcomes to fit Platt scaling")

    def loss_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        a, b = theta
        u = a * s + b
        # BCE with logits: log(1 + exp(u)) - o u, computed stably.
        loss = np.mean(np.logaddexp(0.0, u) - o * u)
        r = 1.0 / (1.0 + np.exp(-u)) - o
        return float(loss), np.array([np.mean(r * s), np.mean(r)])

    res = minimize(
        loss_grad, x0=np.array([1.0, 0.0]), jac=True, method="BFGS", options={"gtol": 1e-10, "maxiter": 1000}
    )
    a, b = res.x
    return float(a), float(b)


def apply_platt(scores: ArrayLike, a: float, b: float) -> ArrayLike:
    """sigmoid(a s + b); returns the same kind (numpy/torch) as ``scores``."""
    s = to_tensor(scores, "scores")
    check_finite(s, "scores")
    for value, name in ((a, "a"), (b, "b")):
        if not np.isfinite(value):
            raise ValueError(f"{name}: must be finite, got {value!r}")
    if not s.is_floating_point():
        s = s.to(torch.float64)
    return same_kind(torch.sigmoid(a * s + b), scores)


# --- histogram binning ----------------------------------------------------------------------------


class HistogramBinning:
    """Histogram binning (Zadrozny & Elkan 2001) on equal-count bins of a confidence in [0, 1].

    ``fit(conf, outcome)`` builds ``n_bins`` equal-count bins (:func:`lib.calibration.metrics.bin_edges`,
    ``binning="mass"``) and stores the accuracy in each; ``predict(conf)`` returns the stored
    accuracy of each confidence's bin. A bin left empty by ties predicts its own centre.
    Third calibrator of the cascading ablation.
    """

    def __init__(self, n_bins: int = 15) -> None:
        self.n_bins = check_bins(n_bins)
        self.edges: np.ndarray | None = None
        self.values: np.ndarray | None = None
        self.counts: np.ndarray | None = None

    def fit(self, conf: ArrayLike, outcome: ArrayLike) -> "HistogramBinning":
        c = to_numpy(conf, "conf")
        o = to_numpy(outcome, "outcome")
        check_unit_interval(c, "conf")
        check_ndim(o, 1, "outcome")
        check_same_length(c, o, "conf", "outcome")
        if c.shape[0] == 0:
            raise ValueError("conf: is empty (0 examples)")
        if not np.all((o == 0) | (o == 1)):
            raise ValueError("outcome: values must be 0 or 1 (or booleans)")
        edges = bin_edges(c, self.n_bins, "mass")
        idx = bin_index(c, edges)
        counts = np.bincount(idx, minlength=self.n_bins)
        hits = np.bincount(idx, weights=o, minlength=self.n_bins)
        centres = 0.5 * (edges[:-1] + edges[1:])
        self.values = np.where(counts > 0, hits / np.maximum(counts, 1), centres)
        self.edges, self.counts = edges, counts
        return self

    def predict(self, conf: ArrayLike) -> np.ndarray:
        if self.edges is None or self.values is None:
            raise ValueError("HistogramBinning: call fit(conf, outcome) before predict")
        c = to_numpy(conf, "conf")
        check_unit_interval(c, "conf")
        return self.values[bin_index(c, self.edges)]
