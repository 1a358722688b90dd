"""Reweighted risks for calibration: focal family, AURC loss, the AU loss and KDE-XE.

Paper: Zhou et al., "Revisiting Reweighted Risk for Calibration: AURC, Focal and Inverse Focal Loss"
(papers/reweighted-risk-au-loss.txt). Every loss here is a weighted cross-entropy
mean_i w_i * (-log p_{t,i}) with a different weight w_i: (1 - p_t)^gamma (focal, eq. 2),
(1 + p_t)^gamma (inverse focal, eq. 3), (1 - p_t + p_j)^gamma (dual focal, eq. 33),
-ln(1 - G(s_i)) (AURC, eq. 7) and beta_i (AU loss, eqs. 19-23). KDE-XE (Popordanoska et al. 2022)
adds a kernel estimate of the canonical calibration error to cross-entropy instead.

Used in: notebooks/losses_cifar10, notebooks/losses_released_logits.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from lib.validation import (
    ArrayLike,
    check_choice,
    check_finite,
    check_int,
    check_keywords,
    check_labels,
    check_ndim,
    check_open_unit,
    check_positive,
    check_probs,
    check_same_length,
    reduce_loss,
    to_tensor,
)

__all__ = [
    "focal_loss",
    "inverse_focal_loss",
    "dual_focal_loss",
    "DUAL_FOCAL_VARIANTS",
    "PAPER_CIFAR10",
    "msp",
    "softmax_margin",
    "negative_entropy",
    "CSFS",
    "csf",
    "aurc_loss",
    "aurc_weights",
    "smoothed_cdf",
    "au_weights",
    "au_loss",
    "ece_kde",
    "select_bandwidth",
    "kde_xe_loss",
    "LOSSES",
    "get_loss",
]

# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------
def _logits_labels(logits: ArrayLike, labels: ArrayLike) -> tuple[torch.Tensor, torch.Tensor]:
    z = to_tensor(logits, "logits")
    if not z.is_floating_point():
        z = z.to(torch.get_default_dtype())
    check_ndim(z, 2, "logits", "N examples x C classes")
    check_finite(z, "logits")
    y = to_tensor(labels, "labels")
    check_labels(y, z.shape[1], "labels")
    check_same_length(z, y, "logits", "labels")
    return z, y.long().to(z.device)


def _true_class_logp(z: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p (N, C), log p_t (N,)) from logits with log_softmax (finite for |z| up to 1e4)."""
    logp = F.log_softmax(z, dim=1)
    return logp, logp.gather(1, y[:, None]).squeeze(1)


def _check_gamma(gamma: float, name: str = "gamma") -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.floating, np.integer)):
        raise ValueError(f"{name}: must be a number, got {gamma!r}")
    check_positive(gamma, name, allow_zero=True)
    return float(gamma)


def _pow(base: torch.Tensor, gamma: float) -> torch.Tensor:
    """base^gamma with a finite gradient at base = 0 (gamma = 0 gives exactly 1)."""
    if gamma == 0:
        return torch.ones_like(base)
    return base.clamp_min(torch.finfo(base.dtype).tiny) ** gamma


# --------------------------------------------------------------------------------------------
# Focal family
# --------------------------------------------------------------------------------------------
def focal_loss(
    logits: ArrayLike, labels: ArrayLike, gamma: float | str = "fl53", reduction: str = "mean"
) -> torch.Tensor:
    """Focal loss -(1 - p_t)^gamma log p_t (Lin et al. 2017; reweighted-risk paper eq. 2).

    ``gamma`` a number >= 0 (0 gives cross-entropy) or ``"fl53"``: gamma = 5 where p_t < 0.2 and 3
    otherwise (Mukhoti et al. 2020; the choice of gamma per example is not differentiated).
    1 - p_t is computed as -expm1(log p_t) so it is accurate when p_t is close to 1.
    Used in: notebooks/losses_cifar10.
    """
    z, y = _logits_labels(logits, labels)
    _, logpt = _true_class_logp(z, y)
    one_minus = -torch.expm1(logpt)
    if isinstance(gamma, str):
        check_choice(gamma, ("fl53",), "gamma")
        pt = logpt.detach().exp()
        tiny = torch.finfo(z.dtype).tiny
        w = torch.where(pt < 0.2, one_minus.clamp_min(tiny) ** 5, one_minus.clamp_min(tiny) ** 3)
    else:
        w = _pow(one_minus, _check_gamma(gamma))
    return reduce_loss(-w * logpt, reduction)


def inverse_focal_loss(
    logits: ArrayLike, labels: ArrayLike, gamma: float = 2.0, reduction: str = "mean"
) -> torch.Tensor:
    """Inverse focal loss -(1 + p_t)^gamma log p_t (Wang et al. 2021; reweighted-risk paper eq. 3).

    Its derivative in p_t, gamma (1 + p)^(gamma-1) log p - (1 + p)^gamma / p (Appendix C.2), turns
    positive for large p_t once gamma is above about 3.5-4: such gammas stop pushing p_t up.
    Used in: notebooks/losses_cifar10.
    """
    z, y = _logits_labels(logits, labels)
    _, logpt = _true_class_logp(z, y)
    w = _pow(1 + logpt.exp(), _check_gamma(gamma))
    return reduce_loss(-w * logpt, reduction)


DUAL_FOCAL_VARIANTS: tuple[str, ...] = ("eq33", "eqs34_35", "released")


def dual_focal_loss(
    logits: ArrayLike,
    labels: ArrayLike,
    gamma: float = 5.0,
    as_released: bool = False,
    reduction: str = "mean",
    variant: str | None = None,
) -> torch.Tensor:
    """Dual focal loss -(1 - p_t + p_j)^gamma log p_t (Tao et al. 2023); ``variant`` picks p_j:

    * ``"eq33"`` (default): p_j = the largest competing probability max_{c != t} p_c, the intended
      loss (reweighted-risk paper eq. 33).
    * ``"eqs34_35"``: the reweighted-risk paper's account of the public code (eqs. 34-35): eq. 33
      where p_t >= p_j, and the focal weight (1 - p_t)^gamma (competitor dropped) where p_t < p_j.
    * ``"released"``: what the released code (Linwei94/ICML2023-DualFocalLoss, also copied into
      han678/CalibWeightedRisk) computes: p_j = the largest probability strictly below p_t, or 0
      if there is none. It equals eq. 33 when the true class is the unique top class and eq. 35 only
      when p_t is the smallest probability; elsewhere p_j is the next probability below p_t.
      A class tied with p_t is not "strictly below", so it is skipped.

    ``as_released=True`` is shorthand for ``variant="released"``.
    Used in: notebooks/losses_cifar10, notebooks/losses_released_logits.
    """
    z, y = _logits_labels(logits, labels)
    logp, logpt = _true_class_logp(z, y)
    if z.shape[1] < 2:
        raise ValueError("logits: dual focal loss needs at least 2 classes")
    if variant is None:
        variant = "released" if as_released else "eq33"
    check_choice(variant, DUAL_FOCAL_VARIANTS, "variant")
    if as_released and variant != "released":
        raise ValueError(f"as_released: True contradicts variant={variant!r}")
    p = logp.exp()
    pt = logpt.exp()
    is_t = F.one_hot(y, z.shape[1]).bool()
    if variant == "released":
        # largest p_c with p_c < p_t (the true class and ties excluded); 0 where none is below
        below = p.detach() < pt.detach()[:, None]
        pj = torch.where(below, p, torch.zeros_like(p)).max(dim=1).values
    else:
        pj = p.masked_fill(is_t, float("-inf")).max(dim=1).values
    g = _check_gamma(gamma)
    w = _pow(1 - pt + pj, g)
    if variant == "eqs34_35":
        w = torch.where(pt < pj, _pow(-torch.expm1(logpt), g), w)
    return reduce_loss(-w * logpt, reduction)


# --------------------------------------------------------------------------------------------
# Confidence score functions (reweighted-risk paper Appendix Table 1)
# --------------------------------------------------------------------------------------------
def _probs_tensor(probs: ArrayLike) -> tuple[torch.Tensor, bool]:
    is_np = not isinstance(probs, torch.Tensor)
    p = to_tensor(probs, "probs")
    if not p.is_floating_point():
        p = p.to(torch.get_default_dtype())
    check_probs(p, "probs")
    return p, is_np


def _out(x: torch.Tensor, is_np: bool) -> Any:
    return x.detach().cpu().numpy() if is_np else x


def msp(probs: ArrayLike) -> Any:
    """Maximum softmax probability max_c p_c (Hendrycks & Gimpel). Used in: notebooks/losses_cifar10."""
    p, is_np = _probs_tensor(probs)
    return _out(p.max(dim=1).values, is_np)


def softmax_margin(probs: ArrayLike) -> Any:
    """Softmax margin p_(1) - p_(2), top probability minus runner-up (Belghazi & Lopez-Paz 2021).

    Used in: notebooks/losses_cifar10.
    """
    p, is_np = _probs_tensor(probs)
    if p.shape[1] < 2:
        raise ValueError("probs: softmax margin needs at least 2 classes")
    top2 = p.topk(2, dim=1).values
    return _out(top2[:, 0] - top2[:, 1], is_np)


def negative_entropy(probs: ArrayLike, normalized: bool = False) -> Any:
    """Negative entropy sum_c p_c log p_c (in [-log C, 0]); ``normalized`` maps it to [0, 1] as
    (log C + sum_c p_c log p_c) / log C (Liu et al. 2020). Used in: notebooks/losses_cifar10.
    """
    p, is_np = _probs_tensor(probs)
    # 0 log 0 = 0; clamping inside the log keeps the gradient finite where p = 0 exactly
    s = (p * torch.log(p.clamp_min(torch.finfo(p.dtype).tiny))).sum(dim=1)
    if normalized:
        c = p.shape[1]
        if c < 2:
            raise ValueError("probs: normalized entropy needs at least 2 classes")
        s = (math.log(c) + s) / math.log(c)
    return _out(s, is_np)


def _csf_raw(name: str, p: torch.Tensor) -> torch.Tensor:
    """CSF on already-valid probabilities (no checks): the hot path of the losses."""
    if name == "msp":
        return p.max(dim=1).values
    if name == "softmax_margin":
        top2 = p.topk(2, dim=1).values
        return top2[:, 0] - top2[:, 1]
    s = (p * torch.log(p.clamp_min(torch.finfo(p.dtype).tiny))).sum(dim=1)
    if name == "normalized_entropy":
        c = math.log(p.shape[1])
        s = (c + s) / c
    return s


CSFS: dict[str, Callable[[ArrayLike], Any]] = {
    "msp": msp,
    "softmax_margin": softmax_margin,
    "negative_entropy": negative_entropy,
    "normalized_entropy": lambda probs: negative_entropy(probs, normalized=True),
}


def csf(name: str, probs: ArrayLike) -> Any:
    """Apply the confidence score function ``name`` (one of ``CSFS``) to ``probs`` (N, C)."""
    check_choice(name, tuple(CSFS), "csf")
    return CSFS[name](probs)


# --------------------------------------------------------------------------------------------
# AURC loss (eq. 7)
# --------------------------------------------------------------------------------------------
def _scores(scores: ArrayLike, name: str = "scores") -> torch.Tensor:
    s = to_tensor(scores, name)
    if not s.is_floating_point():
        s = s.to(torch.get_default_dtype())
    check_ndim(s, 1, name, "one confidence score per example")
    check_finite(s, name)
    if s.shape[0] < 2:
        raise ValueError(f"{name}: need at least 2 scores, got {s.shape[0]}")
    return s


AURC_WEIGHTS = ("log", "harmonic")


def aurc_weights(scores: ArrayLike, weights: str = "log") -> torch.Tensor:
    """Detached AURC sample weights from exact ranks r_i = #{j : s_j <= s_i} (sorting, O(n log n)).

    * ``"log"`` (default): -ln(1 - G(s_i)) with the empirical CDF G = r_i / n (eq. 7) scaled by
      n / (n + 1), i.e. G = r_i / (n + 1), so the most confident example's weight stays finite
      (the same bound the AU loss uses: G <= n / (n + 1)).
    * ``"harmonic"``: H_n - H_{n - r_i} = sum_{k = n - r_i + 1}^{n} 1/k, which makes
      mean_i w_i l_i exactly the area under the empirical risk-coverage curve (Geifman et al. 2019)
      for distinct scores; -ln(1 - r/n) is its large-n limit.

    Used in: notebooks/losses_cifar10.
    """
    check_choice(weights, AURC_WEIGHTS, "weights")
    s = _scores(scores).detach()
    n = s.shape[0]
    sorted_s = torch.sort(s).values
    r = torch.searchsorted(sorted_s, s, right=True).to(s.dtype)  # ties share the largest rank
    if weights == "log":
        return -torch.log1p(-r / (n + 1))
    k = torch.arange(1, n + 1, dtype=torch.float64, device=s.device)
    h = torch.cat([torch.zeros(1, dtype=torch.float64, device=s.device), torch.cumsum(1.0 / k, 0)])
    ri = r.long()
    return (h[n] - h[n - ri]).to(s.dtype)


def aurc_loss(
    logits: ArrayLike,
    labels: ArrayLike,
    csf: str = "msp",
    weights: str = "log",
    reduction: str = "mean",
) -> torch.Tensor:
    """AURC as a reweighted risk: mean_i w_i CE_i with w_i = -ln(1 - G(s_i)) (eq. 7; Zhou et al.
    2025), G the empirical CDF of the batch CSF from exact ranks, weights detached
    (see ``aurc_weights`` for the two finite-sample weight choices).
    Used in: notebooks/losses_cifar10.
    """
    z, y = _logits_labels(logits, labels)
    check_choice(csf, tuple(CSFS), "csf")
    if csf == "softmax_margin" and z.shape[1] < 2:
        raise ValueError("logits: softmax margin needs at least 2 classes")
    logp, logpt = _true_class_logp(z, y)
    s = _csf_raw(csf, logp.exp())
    w = aurc_weights(s.detach(), weights)
    return reduce_loss(-w * logpt, reduction)


# --------------------------------------------------------------------------------------------
# AU loss (eqs. 18-23, 36)
# --------------------------------------------------------------------------------------------
def _edges(edges: ArrayLike, ref: torch.Tensor) -> torch.Tensor:
    e = to_tensor(edges, "edges").to(device=ref.device, dtype=ref.dtype).detach()
    check_ndim(e, 1, "edges", "M + 1 increasing bin edges")
    check_finite(e, "edges")
    if e.shape[0] < 2:
        raise ValueError("edges: need at least 2 edges (one bin)")
    if not bool((e[1:] > e[:-1]).all()):
        raise ValueError("edges: must be strictly increasing")
    return e


def _check_nu(nu: float) -> float:
    if isinstance(nu, bool) or not isinstance(nu, (int, float, np.floating, np.integer)):
        raise ValueError(f"nu: must be a number > 0, got {nu!r}")
    check_positive(nu, "nu")
    return float(nu)


def smoothed_cdf(
    scores: ArrayLike, edges: ArrayLike, nu: float, at: ArrayLike | None = None
) -> torch.Tensor:
    """Bin-based smoothed CDF (reweighted-risk paper eq. 21):

    G(s) = (1/n) sum_m h_m sigmoid((s - c_m) / nu), h_m = #{i : e_m <= s_i < e_{m+1}} (the last bin
    also takes s = e_M), c_m = (e_m + e_{m+1}) / 2.

    Evaluated at the scores themselves (or at ``at``); O(n M) with no sorting. The counts h_m carry
    no gradient; the result is differentiable in the evaluation points. Scores outside the edges
    are not counted (n stays the number of scores). As nu -> 0 it tends to the step function
    (1/n) sum_m h_m 1[s > c_m], within one bin's mass of the empirical CDF.
    Used in: notebooks/losses_cifar10 (through ``au_loss``).
    """
    s = _scores(scores)
    e = _edges(edges, s)
    nu = _check_nu(nu)
    x = None
    if at is not None:
        x = to_tensor(at, "at").to(device=s.device, dtype=s.dtype)
        check_finite(x, "at")
    return _smoothed_cdf(s, e, nu, x)


def _smoothed_cdf(s: torch.Tensor, e: torch.Tensor, nu: float, at: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 21 on validated inputs: histogram by bucketize (O(n log M)), then an (n, M) sigmoid sum."""
    m = e.shape[0] - 1
    sd = s.detach()
    inside = ((sd >= e[0]) & (sd <= e[-1])).to(s.dtype)
    idx = (torch.bucketize(sd, e, right=True) - 1).clamp(0, m - 1)  # e_m <= s < e_{m+1}; s = e_M -> last
    counts = torch.zeros(m, dtype=s.dtype, device=s.device).index_add_(0, idx, inside)
    centres = (e[:-1] + e[1:]) / 2
    x = s if at is None else at
    g = (torch.sigmoid((x.reshape(-1, 1) - centres) / nu) @ counts) / s.shape[0]
    return g.reshape(x.shape)


def _default_edges(s: torch.Tensor, n_bins: int) -> torch.Tensor:
    """[0, 1] split into n_bins equal bins when all scores lie in [0, 1] (MSP, margin, normalized
    entropy), else the batch range [min s, max s] (e.g. raw negative entropy)."""
    sd = s.detach()
    lo, hi = float(sd.min()), float(sd.max())
    if lo >= 0.0 and hi <= 1.0:
        lo, hi = 0.0, 1.0
    elif hi <= lo:
        hi = lo + 1.0
    return torch.linspace(lo, hi, n_bins + 1, dtype=s.dtype, device=s.device)


def au_threshold(scores: ArrayLike, coverage: float) -> torch.Tensor:
    """tau = the kappa-quantile of the batch scores: the k-th smallest score with
    k = max(1, ceil(kappa n)) (a selection, not a sort), so at most a kappa fraction lies below tau.
    ``coverage`` = kappa, the fraction of the batch treated as low-confidence (Appendix E.2)."""
    s = _scores(scores).detach()
    check_open_unit(coverage, "coverage")
    return _tau(s, coverage)


def _tau(s: torch.Tensor, coverage: float) -> torch.Tensor:
    n = s.shape[0]
    k = min(n, max(1, math.ceil(coverage * n - 1e-9)))
    return torch.kthvalue(s, k).values


def au_weights(
    scores: ArrayLike,
    coverage: float = 0.8,
    n_bins: int = 15,
    nu: float = 0.1,
    edges: ArrayLike | None = None,
    normalize: bool = False,
) -> torch.Tensor:
    """AU-loss sample weights beta (N,) (reweighted-risk paper eqs. 19 and 22):

    beta_i = -ln(1 - G(tau)) if s_i >= tau else -ln(1 - G(s_i)),

    G the smoothed CDF (eq. 21, ``smoothed_cdf``) clamped to [1/(n+1), n/(n+1)], tau the
    ``coverage``-quantile of the batch scores (``au_threshold``). The constant C = 1/G(tau) of eq. 19
    is absorbed into the learning rate (``normalize=True`` applies it). Gradient flows through
    G(s_i) for s_i < tau only (eq. 36); tau and the histogram counts are constants.
    ``edges`` default: see ``_default_edges`` ([0, 1] for scores in [0, 1]).
    Used in: notebooks/losses_cifar10 (through ``au_loss``).
    """
    s = _scores(scores)
    check_open_unit(coverage, "coverage")
    n_bins = check_int(n_bins, "n_bins")
    nu = _check_nu(nu)
    e = _default_edges(s, n_bins) if edges is None else _edges(edges, s)
    n = s.shape[0]
    tau = _tau(s.detach(), coverage)
    lo, hi = 1.0 / (n + 1), n / (n + 1.0)
    g_s = _smoothed_cdf(s, e, nu).clamp(lo, hi)
    g_tau = _smoothed_cdf(s.detach(), e, nu, tau.reshape(1)).clamp(lo, hi)[0]
    beta = torch.where(s.detach() < tau, -torch.log1p(-g_s), -torch.log1p(-g_tau))
    return beta / g_tau if normalize else beta


def au_loss(
    logits: ArrayLike,
    labels: ArrayLike,
    csf: str = "msp",
    coverage: float = 0.8,
    n_bins: int = 15,
    nu: float = 0.1,
    edges: ArrayLike | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """AU_{P_X_tau} loss (reweighted-risk paper eq. 23): mean_i beta_i * CE_i with beta from
    ``au_weights`` on the batch CSF s_i = csf(softmax(z_i)); the gradient flows through both the
    cross-entropy and G(s_i) (eq. 36). O(n M) per batch. Defaults: M = 15 bins (paper; the public
    code uses 64), nu = 0.1 (CIFAR-10), coverage kappa per Table 3 (0.75-0.88 on CIFAR-10).
    Used in: notebooks/losses_cifar10.
    """
    z, y = _logits_labels(logits, labels)
    check_choice(csf, tuple(CSFS), "csf")
    check_open_unit(coverage, "coverage")
    if csf in ("softmax_margin", "normalized_entropy") and z.shape[1] < 2:
        raise ValueError(f"logits: {csf} needs at least 2 classes")
    logp, logpt = _true_class_logp(z, y)
    s = _csf_raw(csf, logp.exp())
    beta = au_weights(s, coverage, n_bins, nu, edges)
    return reduce_loss(-beta * logpt, reduction)


# --------------------------------------------------------------------------------------------
# KDE-XE (Popordanoska et al. 2022)
# --------------------------------------------------------------------------------------------
KDE_MODES = ("canonical", "top_label")
_KDE_EPS = 1e-10


def _log_dirichlet_kernel(points: torch.Tensor, centres: torch.Tensor, h: float) -> torch.Tensor:
    """log Dir(points_j; alpha_i = centres_i / h + 1) for every pair: an (n_points, n_centres) matrix.

    log Dir(x; a) = lgamma(sum a) - sum lgamma(a) + sum (a - 1) log x; here sum a = 1/h + C.
    A Beta kernel is the C = 2 case (used for top-label confidence).
    """
    a = centres / h + 1.0
    log_norm = torch.lgamma(a.sum(dim=1)) - torch.lgamma(a).sum(dim=1)  # (n_centres,)
    logx = torch.log(points.clamp_min(_KDE_EPS))
    return logx @ (a - 1.0).T + log_norm[None, :]


def _loo_weights(log_k: torch.Tensor) -> torch.Tensor:
    """Row-normalized kernel weights with the diagonal left out (leave-one-out)."""
    n = log_k.shape[0]
    eye = torch.eye(n, dtype=torch.bool, device=log_k.device)
    return torch.softmax(log_k.masked_fill(eye, float("-inf")), dim=1)


def _kde_inputs(probs: ArrayLike, mode: str) -> torch.Tensor:
    p = to_tensor(probs, "probs")
    if not p.is_floating_point():
        p = p.to(torch.get_default_dtype())
    check_probs(p, "probs")
    check_choice(mode, KDE_MODES, "mode")
    if p.shape[0] < 2:
        raise ValueError("probs: need at least 2 examples for a leave-one-out kernel estimate")
    return p


def _kde_points(p: torch.Tensor, mode: str) -> torch.Tensor:
    if mode == "canonical":
        return p
    conf = p.max(dim=1).values
    return torch.stack([conf, 1 - conf], dim=1)


def ece_kde(
    probs: ArrayLike,
    labels: ArrayLike,
    bandwidth: float | None = None,
    p: int = 1,
    mode: str = "canonical",
) -> torch.Tensor:
    """Kernel estimate of the L_p calibration error, ECE^KDE (Popordanoska et al. 2022), as a
    differentiable scalar tensor (the L_p error to the power p).

    * ``"canonical"``: (1/n) sum_j || E_hat[y | f_j] - f_j ||_p^p with the leave-one-out
      Nadaraya-Watson ratio E_hat[y | f_j] = sum_{i != j} k(f_j; f_i) y_i / sum_{i != j} k(f_j; f_i)
      and the Dirichlet kernel k(f; f_i) = Dir(f; f_i / h + 1) on the simplex.
    * ``"top_label"``: the same on the top-label confidence max_c f_c with the outcome
      1[argmax f = y] and a Beta kernel.

    ``bandwidth`` None picks it with ``select_bandwidth`` (leave-one-out likelihood). O(n^2 C).
    Used in: notebooks/losses_cifar10 (KDE-XE baseline).
    """
    f = _kde_inputs(probs, mode)
    y = to_tensor(labels, "labels")
    check_labels(y, f.shape[1], "labels")
    check_same_length(f, y, "probs", "labels")
    if p not in (1, 2):
        raise ValueError(f"p: must be 1 or 2, got {p!r}")
    h = select_bandwidth(f.detach(), mode=mode) if bandwidth is None else float(bandwidth)
    check_positive(h, "bandwidth")
    y = y.long().to(f.device)
    x = _kde_points(f, mode)
    if mode == "canonical":
        target = F.one_hot(y, f.shape[1]).to(f.dtype)
    else:
        correct = (f.argmax(dim=1) == y).to(f.dtype)
        target = torch.stack([correct, 1 - correct], dim=1)
    w = _loo_weights(_log_dirichlet_kernel(x, x, h))
    diff = (w @ target - x).abs()
    if mode == "top_label":
        diff = diff[:, :1]  # the second coordinate repeats the first
    return (diff**p).sum(dim=1).mean()


BANDWIDTH_GRID: tuple[float, ...] = tuple(np.concatenate([np.logspace(-4, -1, 16), np.linspace(0.2, 1.0, 5)]))


def select_bandwidth(
    probs: ArrayLike, grid: tuple[float, ...] = BANDWIDTH_GRID, mode: str = "canonical"
) -> float:
    """Bandwidth maximizing the leave-one-out log-likelihood of the Dirichlet KDE of ``probs``:
    sum_j log( (1/(n-1)) sum_{i != j} Dir(f_j; f_i / h + 1) ) over ``grid`` (Popordanoska et al. 2022
    select it this way; their code also divides by h, which we do not: the kernel is a normalized
    density already). Used in: notebooks/losses_cifar10 (KDE-XE baseline).
    """
    f = _kde_inputs(probs, mode).detach().to(torch.float64)
    x = _kde_points(f, mode)
    n = x.shape[0]
    eye = torch.eye(n, dtype=torch.bool, device=x.device)
    best_h, best_ll = float(grid[0]), -math.inf
    for h in grid:
        check_positive(h, "grid")
        log_k = _log_dirichlet_kernel(x, x, float(h)).masked_fill(eye, float("-inf"))
        ll = float((torch.logsumexp(log_k, dim=1) - math.log(n - 1)).sum())
        if ll > best_ll:
            best_h, best_ll = float(h), ll
    return best_h


def kde_xe_loss(
    logits: ArrayLike,
    labels: ArrayLike,
    weight: float = 0.3,
    bandwidth: float | None = None,
    p: int = 1,
    mode: str = "canonical",
) -> torch.Tensor:
    """KDE-XE: mean cross-entropy + ``weight`` * ECE^KDE of the batch (Popordanoska et al. 2022;
    lambda = 0.3 on CIFAR-10, 0.5 on CIFAR-100, reweighted-risk paper Appendix E.1). With
    ``bandwidth=None`` the bandwidth is re-selected on each (detached) batch.
    Used in: notebooks/losses_cifar10.
    """
    z, y = _logits_labels(logits, labels)
    check_positive(weight, "weight", allow_zero=True)
    _, logpt = _true_class_logp(z, y)
    probs = F.softmax(z, dim=1)
    return -logpt.mean() + weight * ece_kde(probs, y, bandwidth, p, mode)


# --------------------------------------------------------------------------------------------
# The paper's CIFAR-10 numbers, per architecture
# --------------------------------------------------------------------------------------------
# Table 2 (accuracy, ECE; x100, mean of three seeds) and Appendix Table 2 (selected gammas) of the
# reweighted-risk paper, for the two CIFAR-10 architectures the book trains or reads: the ResNet-50
# (released logits; cpu-scale comparison) and the WRN-28-10 trained at paper scale.
PAPER_CIFAR10: dict[str, dict[str, Any]] = {
    "resnet50": {
        "label": "ResNet-50", "gamma_dual_focal": 5.0, "gamma_inverse_focal": 2.0, "coverage": 0.88,
        "accuracy": {"xe": 94.51, "fl53": 93.58, "inverse_focal": 94.36, "dual_focal": 94.09,
                     "kde_xe": 94.46, "aurc": 93.32, "au": 92.52},
        "ece": {"xe": 3.00, "fl53": 3.98, "inverse_focal": 4.05, "dual_focal": 1.27,
                "kde_xe": 3.09, "aurc": 2.53, "au": 1.69},
    },
    "wrn": {
        "label": "WRN-28-10", "gamma_dual_focal": 2.6, "gamma_inverse_focal": 1.5, "coverage": 0.8,
        "accuracy": {"xe": 95.88, "fl53": 95.49, "inverse_focal": 95.98, "dual_focal": 95.74,
                     "kde_xe": 95.84, "aurc": 94.93, "au": 95.32},
        "ece": {"xe": 1.99, "fl53": 5.74, "inverse_focal": 2.44, "dual_focal": 3.96,
                "kde_xe": 2.05, "aurc": 1.88, "au": 1.54},
    },
}


# --------------------------------------------------------------------------------------------
# Name -> loss, for training loops
# --------------------------------------------------------------------------------------------
def _xe(logits: ArrayLike, labels: ArrayLike) -> torch.Tensor:
    z, y = _logits_labels(logits, labels)
    return F.cross_entropy(z, y)


LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "xe": _xe,
    "fl53": lambda logits, labels: focal_loss(logits, labels, "fl53"),
    "focal": focal_loss,
    "inverse_focal": inverse_focal_loss,
    "dual_focal": dual_focal_loss,
    "dual_focal_eqs34_35": functools.partial(dual_focal_loss, variant="eqs34_35"),
    "dual_focal_released": functools.partial(dual_focal_loss, variant="released"),
    "kde_xe": kde_xe_loss,
    "aurc": aurc_loss,
    "au": au_loss,
}


def get_loss(name: str, **kw: Any) -> Callable[[ArrayLike, ArrayLike], torch.Tensor]:
    """A loss ``(logits, labels) -> scalar`` by name (one of ``LOSSES``) with its keyword arguments
    bound, e.g. ``get_loss("au", coverage=0.88)`` or ``get_loss("focal", gamma=3)``. Dual focal
    comes in three names: ``"dual_focal"`` (eq. 33), ``"dual_focal_eqs34_35"`` (the paper's eqs.
    34-35) and ``"dual_focal_released"`` (the released code); see ``dual_focal_loss``.
    Used in: notebooks/losses_cifar10 (training loop).
    """
    check_choice(name, tuple(LOSSES), "name")
    fn = LOSSES[name]
    if name in ("xe", "fl53") and kw:
        raise ValueError(f"kw: loss {name!r} takes no keyword arguments, got {sorted(kw)}")
    # checked now, not at the first call: the loss's own keyword parameters (inspect.signature)
    params = inspect.signature(fn).parameters
    check_keywords(kw, [p for p in params if p not in ("logits", "labels")], f"kw (loss {name!r})")

    def loss(logits: ArrayLike, labels: ArrayLike) -> torch.Tensor:
        return fn(logits, labels, **kw)

    loss.__name__ = f"{name}_loss"
    return loss
