"""Reweighted risks for calibration (Zhou et al., "Revisiting Reweighted Risk for Calibration", paper 4):
each a weighted cross-entropy mean_i w_i (-log p_{t,i}) with w_i = (1 - p_t)^gamma (focal, eq. 2),
(1 + p_t)^gamma (inverse focal, eq. 3), (1 - p_t + p_j)^gamma (dual focal, eq. 33), -ln(1 - G(s_i))
(AURC, eq. 7) or beta_i (AU loss, eqs. 19-23); KDE-XE (Popordanoska et al. 2022) adds a kernel
calibration error instead. The weights are in :mod:`lib.rr.weights`."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import torch
import torch.nn.functional as F

from lib.calibration.ece_kde import ece_kde
from lib.rr.weights import CSFS, EpochHistogram, au_weights, aurc_weights, csf_values
from lib.validation import (
    to_float_tensor,
    ArrayLike,
    check_bool,
    check_nonempty,
    check_choice,
    check_keywords,
    check_labels,
    check_positive,
    check_same_length,
    reduce_loss,
    to_tensor,
)


# --- Helpers --------------------------------------------------------------------------------------
def _logits_labels(
    logits: ArrayLike, labels: ArrayLike
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Checked (logits, labels, log p (N, C), log p_t (N,)), log p by log_softmax (finite for |z| up to 1e4)."""
    z = to_float_tensor(logits, "logits", 2, "N examples x C classes")
    check_nonempty(z, "logits")  # the mean loss of an empty batch is NaN
    y = to_tensor(labels, "labels")
    check_labels(y, z.shape[1], "labels")
    check_same_length(z, y, "logits", "labels")
    y = y.long().to(z.device)
    logp = F.log_softmax(z, dim=1)
    return z, y, logp, logp.gather(1, y[:, None]).squeeze(1)


def _csf_logpt(logits: ArrayLike, labels: ArrayLike, csf: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores of CSF ``csf``, log p_t) of the logits: the AURC and AU losses' inputs."""
    z, _, logp, logpt = _logits_labels(logits, labels)
    check_choice(csf, tuple(CSFS), "csf")
    if csf in ("softmax_margin", "normalized_entropy") and z.shape[1] < 2:
        raise ValueError(f"logits: {csf} needs at least 2 classes")
    return csf_values(csf, logp.exp()), logpt


def _pow(base: torch.Tensor, gamma: float) -> torch.Tensor:
    """base^gamma with a finite gradient at base = 0 (gamma = 0 gives exactly 1)."""
    if gamma == 0:
        return torch.ones_like(base)
    return base.clamp_min(torch.finfo(base.dtype).tiny) ** gamma


# --- Focal family ---------------------------------------------------------------------------------
def focal_loss(
    logits: ArrayLike, labels: ArrayLike, gamma: float | str = "fl53", reduction: str = "mean"
) -> torch.Tensor:
    """Focal loss -(1 - p_t)^gamma log p_t (Lin et al. 2017; reweighted-risk paper eq. 2).

    ``gamma`` a number >= 0 (0 gives cross-entropy) or ``"fl53"``: gamma = 5 where p_t < 0.2 and 3
    otherwise (Mukhoti et al. 2020; the choice of gamma per example is not differentiated).
    1 - p_t is computed as -expm1(log p_t) so it is accurate when p_t is close to 1.
    """
    _, _, _, logpt = _logits_labels(logits, labels)
    one_minus = -torch.expm1(logpt)
    if isinstance(gamma, str):
        check_choice(gamma, ("fl53",), "gamma")
        w = torch.where(logpt.detach().exp() < 0.2, _pow(one_minus, 5), _pow(one_minus, 3))
    else:
        w = _pow(one_minus, check_positive(gamma, "gamma", allow_zero=True))
    return reduce_loss(-w * logpt, reduction)


def inverse_focal_loss(
    logits: ArrayLike, labels: ArrayLike, gamma: float = 2.0, reduction: str = "mean"
) -> torch.Tensor:
    """Inverse focal loss -(1 + p_t)^gamma log p_t (Wang et al. 2021; paper 4 eq. 3); for gamma
    above about 3.5 its gradient turns positive at large p_t (Appendix C.2)."""
    _, _, _, logpt = _logits_labels(logits, labels)
    w = _pow(1 + logpt.exp(), check_positive(gamma, "gamma", allow_zero=True))
    return reduce_loss(-w * logpt, reduction)


DUAL_FOCAL_VARIANTS: tuple[str, ...] = ("eq33", "eqs34_35", "released")


def dual_focal_loss(
    logits: ArrayLike, labels: ArrayLike, gamma: float = 5.0, reduction: str = "mean", variant: str = "eq33"
) -> torch.Tensor:
    """Dual focal loss -(1 - p_t + p_j)^gamma log p_t (Tao et al. 2023); ``variant`` picks p_j:

    * ``"eq33"`` (default): the largest competing probability (paper 4 eq. 33);
    * ``"eqs34_35"``: paper 4's account of the public code: eq. 33 where p_t >= p_j, the focal weight
      (1 - p_t)^gamma where p_t < p_j;
    * ``"released"``: what the released code (Linwei94/ICML2023-DualFocalLoss)
      computes: the largest probability strictly below p_t, or 0."""
    z, y, logp, logpt = _logits_labels(logits, labels)
    if z.shape[1] < 2:
        raise ValueError("logits: dual focal loss needs at least 2 classes")
    check_choice(variant, DUAL_FOCAL_VARIANTS, "variant")
    p, pt = logp.exp(), logpt.exp()
    if variant == "released":  # the largest p_c with p_c < p_t (the true class and ties excluded); 0 where none is
        pj = torch.where(p.detach() < pt.detach()[:, None], p, torch.zeros_like(p)).max(dim=1).values
    else:
        pj = p.masked_fill(F.one_hot(y, z.shape[1]).bool(), float("-inf")).max(dim=1).values
    g = check_positive(gamma, "gamma", allow_zero=True)
    w = _pow(1 - pt + pj, g)
    if variant == "eqs34_35":
        w = torch.where(pt < pj, _pow(-torch.expm1(logpt), g), w)
    return reduce_loss(-w * logpt, reduction)


# --- AURC loss (eq. 7) and AU loss (eqs. 18-23, 36); their weights are in lib.rr.weights ----------
def aurc_loss(logits: ArrayLike, labels: ArrayLike, csf: str = "msp", reduction: str = "mean") -> torch.Tensor:
    """AURC as a reweighted risk: mean_i w_i CE_i, w_i = -ln(1 - G(s_i)) (eq. 7), G the batch CSF's
    empirical CDF from exact ranks, weights detached (:func:`lib.rr.weights.aurc_weights`)."""
    s, logpt = _csf_logpt(logits, labels, csf)
    return reduce_loss(-aurc_weights(s.detach()) * logpt, reduction)


def au_loss(
    logits: ArrayLike,
    labels: ArrayLike,
    csf: str = "msp",
    coverage: float = 0.8,
    n_bins: int = 15,
    nu: float = 0.1,
    reduction: str = "mean",
    histogram: EpochHistogram | None = None,
) -> torch.Tensor:
    """AU loss (paper 4 eq. 23): mean_i beta_i CE_i, beta from :func:`lib.rr.weights.au_weights` on the
    batch CSF; the gradient flows through the cross-entropy and G(s_i) (eq. 36). Defaults: M = 15 bins,
    nu = 0.1, kappa per Table 3. G is the batch's (Algorithm 1); the released code's, accumulated over
    the epoch, with ``histogram`` (or ``get_loss("au_released", epoch_batches=...)``)."""
    s, logpt = _csf_logpt(logits, labels, csf)
    return reduce_loss(-au_weights(s, coverage, n_bins, nu, histogram=histogram) * logpt, reduction)


# --- KDE-XE (Popordanoska et al. 2022); the estimator is lib.calibration.ece_kde.ece_kde ----------
def kde_xe_loss(
    logits: ArrayLike, labels: ArrayLike, weight: float = 0.3, bandwidth: float | None = None, released: bool = False
) -> torch.Tensor:
    """KDE-XE: mean cross-entropy + ``weight`` * ECE^KDE of the batch (Popordanoska et al. 2022;
    lambda 0.3 on CIFAR-10, paper 4 App. E.1), the bandwidth re-selected per batch by default.
    ``released`` detaches the term as paper 4's released code does (training is then cross-entropy)."""
    z, y, _, logpt = _logits_labels(logits, labels)
    check_positive(weight, "weight", allow_zero=True)
    check_bool(released, "released")
    term = ece_kde(F.softmax(z, dim=1), y, bandwidth)
    return -logpt.mean() + weight * (term.detach() if released else term)


# --- Name -> loss, for training loops -------------------------------------------------------------
def _xe(logits: ArrayLike, labels: ArrayLike) -> torch.Tensor:
    z, y, _, _ = _logits_labels(logits, labels)
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
    "kde_xe_released": functools.partial(kde_xe_loss, released=True),
    "aurc": aurc_loss,
    "au": au_loss,
    "au_released": au_loss,  # with an EpochHistogram bound by get_loss (the released code's G)
}


def get_loss(name: str, **kw: Any) -> Callable[[ArrayLike, ArrayLike], torch.Tensor]:
    """A loss ``(logits, labels) -> scalar`` by name (one of ``LOSSES``) with its keyword arguments
    bound, e.g. ``get_loss("au", coverage=0.88)``; ``"au_released"`` takes ``epoch_batches``."""
    check_choice(name, tuple(LOSSES), "name")
    fn = LOSSES[name]
    if name == "au_released":  # a fresh epoch histogram per loss: 64 bins, reset every epoch_batches calls
        if "histogram" in kw:
            raise ValueError("kw (loss 'au_released'): the histogram is made here; pass epoch_batches")
        kw["histogram"] = EpochHistogram(64, kw.pop("epoch_batches", None))
    # checked now, not at the first call: the loss's own keyword parameters (inspect.signature)
    params = inspect.signature(fn).parameters
    check_keywords(kw, [p for p in params if p not in ("logits", "labels")], f"kw (loss {name!r})")

    def loss(logits: ArrayLike, labels: ArrayLike) -> torch.Tensor:
        return fn(logits, labels, **kw)

    loss.__name__ = f"{name}_loss"
    return loss
