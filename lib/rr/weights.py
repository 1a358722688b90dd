"""The sample weights of paper 4's reweighted risks (Zhou et al., "Revisiting Reweighted Risk for
Calibration"; the losses are :mod:`lib.rr.losses`): confidence score functions (App. Table 1), AURC's
rank weights (eq. 7), the smoothed CDF (eq. 21) and the AU weights (eqs. 19, 22), and the weights and
gradients as functions of the true-class probability (Figure 1, Appendix C).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from lib.validation import (
    to_float_tensor,
    ArrayLike,
    check_choice,
    check_finite,
    check_int,
    check_ndim,
    check_nonempty,
    check_open_unit,
    check_positive,
    to_numpy,
    to_tensor,
)


# --- Confidence score functions (reweighted-risk paper Appendix Table 1) --------------------------
def csf_values(name: str, p: torch.Tensor) -> torch.Tensor:
    """CSF ``name`` on already-valid probabilities ``p`` (N, C), with no checks: the hot path of
    ``lib.rr.losses.aurc_loss`` and ``au_loss``, which validate their logits first."""
    if name == "msp":
        return p.max(dim=1).values
    if name == "softmax_margin":
        top2 = p.topk(2, dim=1).values
        return top2[:, 0] - top2[:, 1]
    # 0 log 0 = 0; clamping inside the log keeps the gradient finite where p = 0 exactly
    s = (p * torch.log(p.clamp_min(torch.finfo(p.dtype).tiny))).sum(dim=1)
    if name == "normalized_entropy":
        c = math.log(p.shape[1])
        s = (c + s) / c
    return s


#: The confidence score functions by name, each with the paper it comes from.
CSFS: dict[str, str] = {
    "msp": "maximum softmax probability max_c p_c (Hendrycks & Gimpel)",
    "softmax_margin": "softmax margin p_(1) - p_(2) (Belghazi & Lopez-Paz 2021)",
    "negative_entropy": "negative entropy sum_c p_c log p_c, in [-log C, 0]",
    "normalized_entropy": "(log C + sum_c p_c log p_c) / log C, in [0, 1] (Liu et al. 2020)",
}


# --- AURC weights (eq. 7) -------------------------------------------------------------------------
def _scores(scores: ArrayLike) -> torch.Tensor:
    s = to_float_tensor(scores, "scores", 1, "one confidence score per example")
    if s.shape[0] < 2:
        raise ValueError(f"scores: need at least 2 scores, got {s.shape[0]}")
    return s


def aurc_weights(scores: ArrayLike) -> torch.Tensor:
    """Detached AURC sample weights from exact ranks r_i = #{j : s_j <= s_i} (sorting, O(n log n)):
    -ln(1 - G(s_i)) with the empirical CDF G = r_i / n (eq. 7) scaled by n / (n + 1), i.e. G = r_i /
    (n + 1), so the most confident example's weight stays finite (the same bound the AU loss uses:
    G <= n / (n + 1)); the large-n limit of H_n - H_{n - r_i}, whose weighted mean of the losses is
    exactly the area under the empirical risk-coverage curve (Geifman et al. 2019) for distinct scores.
    Paper 4's released code (han678/CalibWeightedRisk, ``loss/aurc.py``, ``compute_harmonic_alphas``)
    weights by H_n - H_{n - r_i} itself; this baseline trains with the limit, eq. 7, so it is not bit
    for bit the released loss.
    """
    s = _scores(scores).detach()
    r = torch.searchsorted(torch.sort(s).values, s, right=True).to(s.dtype)  # ties share the largest rank
    return -torch.log1p(-r / (s.shape[0] + 1))


# --- Smoothed CDF and AU weights (eqs. 18-22) -----------------------------------------------------
def smoothed_cdf(scores: ArrayLike, edges: ArrayLike, nu: float, at: ArrayLike | None = None) -> torch.Tensor:
    """Bin-based smoothed CDF (reweighted-risk paper eq. 21):

    G(s) = (1/n) sum_m h_m sigmoid((s - c_m) / nu), h_m = #{i : e_m <= s_i < e_{m+1}} (the last bin
    also takes s = e_M), c_m = (e_m + e_{m+1}) / 2.

    Evaluated at the scores themselves (or at ``at``); O(n M) with no sorting. The counts h_m carry
    no gradient; the result is differentiable in the evaluation points. Scores outside the edges
    are not counted (n stays the number of scores). As nu -> 0 it tends to the step function
    (1/n) sum_m h_m 1[s > c_m], within one bin's mass of the empirical CDF.
    """
    s = _scores(scores)
    e = to_tensor(edges, "edges").to(device=s.device, dtype=s.dtype).detach()
    check_ndim(e, 1, "edges", "M + 1 increasing bin edges")
    check_finite(e, "edges")
    if e.shape[0] < 2 or not bool((e[1:] > e[:-1]).all()):
        raise ValueError("edges: need at least 2 strictly increasing edges (one bin)")
    nu = check_positive(nu, "nu")
    x = s if at is None else to_tensor(at, "at").to(device=s.device, dtype=s.dtype)
    check_finite(x, "at")
    return _counts_cdf(x, e, _bin_counts(s, e), nu, s.shape[0])


def _bin_counts(s: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """Eq. 21's h_m on validated inputs, by bucketize (O(n log M)): e_m <= s < e_{m+1}, s = e_M in the last."""
    m, sd = e.shape[0] - 1, s.detach()
    inside = ((sd >= e[0]) & (sd <= e[-1])).to(s.dtype)
    idx = (torch.bucketize(sd, e, right=True) - 1).clamp(0, m - 1)
    return torch.zeros(m, dtype=s.dtype, device=s.device).index_add_(0, idx, inside)


def _default_edges(s: torch.Tensor, n_bins: int) -> torch.Tensor:
    """[0, 1] split into n_bins equal bins when all scores lie in [0, 1] (MSP, margin, normalized
    entropy), else the batch range [min s, max s] (e.g. raw negative entropy)."""
    lo, hi = float(s.detach().min()), float(s.detach().max())
    if lo >= 0.0 and hi <= 1.0:
        lo, hi = 0.0, 1.0
    elif hi <= lo:
        hi = lo + 1.0
    return torch.linspace(lo, hi, n_bins + 1, dtype=s.dtype, device=s.device)


class EpochHistogram:
    """The released AU code's G: counts of the detached CSF in ``n_bins`` (64 there) equal bins of
    [0, 1] over an epoch's batches (Algorithm 1 counts the batch only); it resets itself after
    ``epoch_batches`` updates."""

    def __init__(self, n_bins: int = 64, epoch_batches: int | None = None) -> None:
        self.n_bins = check_int(n_bins, "n_bins")
        self.epoch_batches = None if epoch_batches is None else check_int(epoch_batches, "epoch_batches")
        self.edges = torch.linspace(0.0, 1.0, self.n_bins + 1, dtype=torch.float64)
        self.reset()

    def reset(self) -> None:
        """Start a new epoch: no counts."""
        self.counts = torch.zeros(self.n_bins, dtype=torch.float64)
        self.batches = 0

    def update(self, scores: torch.Tensor) -> None:
        """Add one batch of checked scores (1-D, in [0, 1]; detached) to the counts."""
        s = scores.detach().to(torch.float64).cpu()
        if float(s.min()) < 0.0 or float(s.max()) > 1.0:
            raise ValueError("scores: the epoch histogram needs scores in [0, 1] (MSP, margin, normalized entropy)")
        if self.epoch_batches is not None and self.batches >= self.epoch_batches:
            self.reset()
        idx = (torch.bucketize(s, self.edges, right=True) - 1).clamp(0, self.n_bins - 1)
        self.counts.index_add_(0, idx, torch.ones_like(s))
        self.batches += 1

    @property
    def n(self) -> int:
        """Scores counted so far this epoch."""
        return int(self.counts.sum())


def _counts_cdf(x: torch.Tensor, e: torch.Tensor, counts: torch.Tensor, nu: float, n: int) -> torch.Tensor:
    """Eq. 21 with given bin ``counts`` over edges ``e`` and ``n`` scores at the points ``x``: an (n, M) sigmoid sum."""
    centres = ((e[:-1] + e[1:]) / 2).to(device=x.device, dtype=x.dtype)
    c = counts.to(device=x.device, dtype=x.dtype)
    return ((torch.sigmoid((x.reshape(-1, 1) - centres) / nu) @ c) / n).reshape(x.shape)


def au_threshold(scores: ArrayLike, coverage: float) -> torch.Tensor:
    """tau, the ``coverage`` (kappa) quantile of the batch scores: the k-th smallest, k = max(1,
    ceil(kappa n)) (Appendix E.2)."""
    s = to_tensor(scores, "scores").detach()
    check_ndim(s, 1, "scores")
    check_nonempty(s, "scores")
    check_open_unit(coverage, "coverage")
    k = min(s.shape[0], max(1, math.ceil(coverage * s.shape[0] - 1e-9)))
    return torch.kthvalue(s, k).values


def au_weights(
    scores: ArrayLike,
    coverage: float = 0.8,
    n_bins: int = 15,
    nu: float = 0.1,
    normalize: bool = False,
    histogram: EpochHistogram | None = None,
) -> torch.Tensor:
    """AU-loss sample weights beta (N,) (reweighted-risk paper eqs. 19 and 22):

    beta_i = -ln(1 - G(tau)) if s_i >= tau else -ln(1 - G(s_i)),

    G the smoothed CDF (eq. 21) clamped to [1/(n+1), n/(n+1)], tau from :func:`au_threshold`; eq.
    19's C = 1/G(tau) is left to the learning rate (``normalize`` applies it). The gradient flows
    through G(s_i) for s_i < tau only (eq. 36). With distinct scores, the examples strictly below
    tau (the k-th smallest) are k - 1 = ceil(kappa n) - 1, one fewer than kappa n when kappa n is
    whole: the k-th example takes tau's weight. With ``histogram`` (the released code) G uses its
    epoch's counts instead of the batch's.
    """
    s = _scores(scores)
    n_bins = check_int(n_bins, "n_bins")
    nu = check_positive(nu, "nu")
    tau = au_threshold(s, coverage)  # checks coverage
    if histogram is None:
        e = _default_edges(s, n_bins)
        n, counts = s.shape[0], _bin_counts(s, e)
    else:
        histogram.update(s)
        n, e, counts = histogram.n, histogram.edges, histogram.counts
    g_s, g_tau = (_counts_cdf(x, e, counts, nu, n) for x in (s, tau))
    lo, hi = 1.0 / (n + 1), n / (n + 1.0)
    g_s, g_tau = g_s.clamp(lo, hi), g_tau.clamp(lo, hi)
    beta = torch.where(s.detach() < tau, -torch.log1p(-g_s), -torch.log1p(-g_tau))
    return beta / g_tau if normalize else beta


# --- Analytic weights and gradients as functions of p_t (Figure 1, Appendix C) --------------------
GRADIENT_LOSSES: tuple[str, ...] = ("xe", "focal", "fl53", "inverse_focal")


def loss_gradient(name: str, p: Any, gamma: float = 2.0) -> np.ndarray:
    """d loss / d p_t of a reweighted cross-entropy as a function of the true-class probability
    (reweighted-risk paper Appendix C):

    * ``xe``: -1/p;
    * ``focal``: gamma (1-p)^(gamma-1) log p - (1-p)^gamma / p (C.1); ``fl53``: gamma 5 below 0.2, else 3;
    * ``inverse_focal``: -gamma (1+p)^(gamma-1) log p - (1+p)^gamma / p (C.2; the paper prints the
      first term with a + sign, but d/dp of -(1+p)^gamma is -gamma (1+p)^(gamma-1)). It is positive
      for some p exactly when gamma > min_p (1+p) / (-p log p), about 3.59 (see
      :func:`inverse_focal_gamma_threshold`; the paper's "gamma > 3.5"): such a loss pushes p_t
      *down* there.
    """
    check_choice(name, GRADIENT_LOSSES, "name")
    x = to_numpy(p, "p")
    if np.any((x <= 0) | (x > 1)) or not np.all(np.isfinite(x)):
        raise ValueError("p: probabilities must lie in (0, 1]")
    gamma = check_positive(gamma, "gamma", allow_zero=True)  # "2" is refused, not read as 2.0
    if name == "xe":
        return -1.0 / x
    if name == "inverse_focal":
        return -gamma * (1 + x) ** (gamma - 1) * np.log(x) - (1 + x) ** gamma / x
    g = np.where(x < 0.2, 5.0, 3.0) if name == "fl53" else np.full_like(x, gamma)
    return g * (1 - x) ** (g - 1) * np.log(x) - (1 - x) ** g / x


def inverse_focal_gamma_threshold() -> float:
    """The smallest gamma for which the inverse focal gradient (C.2) turns positive in (0, 1):
    min_p (1 + p) / (-p log p)."""
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(
        lambda t: (1 + t) / (-t * math.log(t)), bounds=(1e-6, 1 - 1e-6), method="bounded", options={"xatol": 1e-10}
    )
    return float(res.fun)


def loss_weight(name: str, p: Any, gamma: float = 2.0, normalize: bool = True) -> np.ndarray:
    """Sample weight of a reweighted risk as a function of p (reweighted-risk paper Fig. 1, main
    text): focal (1-p)^gamma, inverse focal (1+p)^gamma, AURC -ln(1 - G(p)) with G(p) = p (scores
    uniform on [0, 1]). ``normalize`` divides by the weight's mean over a uniform p, as the paper
    normalizes the weights "for fair comparison"."""
    check_choice(name, ("focal", "inverse_focal", "aurc"), "name")
    gamma = check_positive(gamma, "gamma", allow_zero=True)  # focal and inverse focal: gamma >= 0
    x = to_numpy(p, "p")
    check_finite(x, "p")
    if np.any((x < 0) | (x >= 1)):
        raise ValueError("p: must lie in [0, 1)")
    if name == "focal":
        w, mean = (1 - x) ** gamma, 1 / (gamma + 1)
    elif name == "inverse_focal":
        w, mean = (1 + x) ** gamma, (2 ** (gamma + 1) - 1) / (gamma + 1)
    else:
        w, mean = -np.log1p(-x), 1.0  # int_0^1 -ln(1 - t) dt = 1
    return w / mean if normalize else w
