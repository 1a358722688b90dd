"""Multi-expert learning to defer (L2D): the surrogate losses, the estimators of expert correctness
they imply, the deferral rule and the system's metrics (paper 2, Sec. 2-3 and 5).

Paper: "Calibration of multi-expert learning to defer" (paper 2).
A model outputs K + J logits: g_1..g_K for the classes and g_{⊥1}..g_{⊥J} for deferring to expert j.
Two consistent surrogates train it: the softmax surrogate of Mozannar & Sontag (2020) and the
one-vs-all (OvA) surrogate of Verma & Nalisnick (2022). Their estimators of the probability that
expert j is correct, P(m_j = y | x), differ: the softmax one (eq. 2) couples all experts and can
exceed 1; the OvA one (eq. 3) is a sigmoid of a single logit. The simulated experts are in
:mod:`lib.l2d.synthetic_experts`, the 2-D mixture of Gaussians in :mod:`lib.l2d.gaussian_mixture`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from lib.validation import (
    to_float_tensor,
    check_nonempty,
    reduce_loss,
    ArrayLike,
    check_finite,
    check_labels,
    check_ndim,
    check_same_length,
    to_numpy,
    to_tensor,
)

__all__ = [
    "softmax_l2d_loss",
    "ova_l2d_loss",
    "expert_correctness_softmax",
    "expert_correctness_ova",
    "defer_decisions",
    "system_accuracy",
    "coverage_per_expert",
    "expert_calibration_error",
]


# --------------------------------------------------------------------------------------------
# Input handling
# --------------------------------------------------------------------------------------------
def _logits(logits: ArrayLike) -> torch.Tensor:
    return to_float_tensor(logits, "logits", 2, "N examples x (K classes + J experts)")


def _check_num_classes(num_classes: int, width: int) -> int:
    if not isinstance(num_classes, (int, np.integer)) or isinstance(num_classes, bool):
        raise ValueError(f"num_classes: must be an integer, got {num_classes!r}")
    if not 1 <= num_classes < width:
        raise ValueError(
            f"num_classes: must lie in [1, {width - 1}] so that logits ({width} columns) hold at "
            f"least one deferral logit, got {num_classes}"
        )
    return int(num_classes)


def _loss_inputs(
    logits: ArrayLike, labels: ArrayLike, expert_correct: ArrayLike
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Validate (logits (N, K+J), labels (N,), expert_correct (N, J)); return them and K."""
    z = _logits(logits)
    check_nonempty(z, "logits")  # the mean loss of an empty batch is NaN
    ec = to_tensor(expert_correct, "expert_correct")
    check_ndim(ec, 2, "expert_correct", "N examples x J experts, 1 where expert j is correct")
    check_finite(ec, "expert_correct")
    if ec.dtype != torch.bool:
        vals = ec.detach()
        if not bool(((vals == 0) | (vals == 1)).all()):
            raise ValueError("expert_correct: values must be boolean (0/1)")
    n, width = z.shape
    j = ec.shape[1]
    if j < 1 or j >= width:
        raise ValueError(
            f"expert_correct: has {j} columns (experts) but logits has {width} columns; need 1 <= J < K + J"
        )
    k = width - j
    y = to_tensor(labels, "labels")
    check_labels(y, k, "labels")
    check_same_length(z, y, "logits", "labels")
    check_same_length(z, ec, "logits", "expert_correct")
    return z, y.long().to(z.device), ec.to(device=z.device, dtype=z.dtype), k


# --------------------------------------------------------------------------------------------
# Surrogate losses
# --------------------------------------------------------------------------------------------
def softmax_l2d_loss(
    logits: ArrayLike, labels: ArrayLike, expert_correct: ArrayLike, reduction: str = "mean"
) -> torch.Tensor:
    """Softmax L2D surrogate (Mozannar & Sontag 2020, multi-expert form, L2D paper Sec. 2):

    -log softmax(g)_y - sum_j 1[m_j = y] log softmax(g)_{⊥j}, softmax over all K + J outputs.

    ``logits`` (N, K+J), ``labels`` (N,), ``expert_correct`` (N, J) bool; K = columns - J.
    Returns the batch mean (``reduction="sum"`` or ``"none"`` for the sum or per-example losses).
    """
    z, y, ec, k = _loss_inputs(logits, labels, expert_correct)
    logp = F.log_softmax(z, dim=1)
    loss = -logp.gather(1, y[:, None]).squeeze(1) - (ec * logp[:, k:]).sum(dim=1)
    return reduce_loss(loss, reduction)


def ova_l2d_loss(
    logits: ArrayLike, labels: ArrayLike, expert_correct: ArrayLike, reduction: str = "mean"
) -> torch.Tensor:
    """One-vs-all L2D surrogate (Verma & Nalisnick 2022, multi-expert form, L2D paper Sec. 2):

    phi(g_y) + sum_{k != y} phi(-g_k) + sum_j phi(-g_{⊥j}) + sum_j 1[m_j = y](phi(g_{⊥j}) - phi(-g_{⊥j}))

    with the logistic loss phi(t) = log(1 + exp(-t)) = softplus(-t). The deferral part equals a
    binary logistic loss of g_{⊥j} against the event "expert j is correct".
    """
    z, y, ec, k = _loss_inputs(logits, labels, expert_correct)
    g_cls, g_def = z[:, :k], z[:, k:]
    target = F.one_hot(y, k).to(z.dtype)
    sign = 2 * target - 1  # +1 for the true class, -1 for the others
    cls = F.softplus(-sign * g_cls).sum(dim=1)
    dfr = (F.softplus(-g_def) * ec + F.softplus(g_def) * (1 - ec)).sum(dim=1)
    return reduce_loss(cls + dfr, reduction)


# --------------------------------------------------------------------------------------------
# Estimators of expert correctness and deferral decisions
# --------------------------------------------------------------------------------------------
def expert_correctness_softmax(logits: ArrayLike, num_classes: int) -> torch.Tensor:
    """Softmax estimate of P(m_j = y | x) = p_{⊥j} / (1 - sum_j' p_{⊥j'}) (L2D paper eq. 2).

    Unclipped: it exceeds 1 when the deferral probabilities sum close to 1 (clip only inside ECE).
    Computed stably as exp(g_{⊥j} - logsumexp_k g_k), because 1 - sum_j' p_{⊥j'} is the total
    class probability sum_k p_k. Returns an (N, J) tensor (inf only if that ratio overflows).
    """
    z = _logits(logits)
    k = _check_num_classes(num_classes, z.shape[1])
    return torch.exp(z[:, k:] - torch.logsumexp(z[:, :k], dim=1, keepdim=True))


def expert_correctness_ova(logits: ArrayLike, num_classes: int) -> torch.Tensor:
    """OvA estimate of P(m_j = y | x) = sigmoid(g_{⊥j}) (L2D paper eq. 3); (N, J), always in (0, 1)."""
    z = _logits(logits)
    k = _check_num_classes(num_classes, z.shape[1])
    return torch.sigmoid(z[:, k:])


def defer_decisions(logits: ArrayLike, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Classifier prediction and deferral choice (L2D paper Sec. 2, rejector r(x)).

    Returns ``(pred_class, defer_to)``: pred_class = argmax_k g_k; defer_to = argmax_j g_{⊥j} if
    max_j g_{⊥j} >= max_k g_k, else -1. A tie defers, as in the paper's Bayes rejector (App. B):
    r*(x) = 0 only if P(y = h*(x) | x) > P(m_j' = y | x) for every j', otherwise argmax_j.
    Among tied experts the first (lowest j) is chosen.
    """
    z = _logits(logits)
    k = _check_num_classes(num_classes, z.shape[1])
    cls_max, pred = z[:, :k].max(dim=1)
    def_max, who = z[:, k:].max(dim=1)
    defer_to = torch.where(def_max >= cls_max, who, torch.full_like(who, -1))
    return pred, defer_to


def system_accuracy(logits: ArrayLike, labels: ArrayLike, expert_preds: ArrayLike, num_classes: int) -> float:
    """Accuracy of the human-AI system: the classifier's prediction, or the chosen expert's
    prediction where the model defers (L2D paper Sec. 5, Fig. 1 b/e).

    ``expert_preds`` (N, J) integer predictions of the J experts.
    """
    z = _logits(logits)
    k = _check_num_classes(num_classes, z.shape[1])
    y = to_tensor(labels, "labels")
    check_labels(y, k, "labels")
    check_same_length(z, y, "logits", "labels")
    if z.shape[0] == 0:
        raise ValueError("logits: is empty (0 examples); the system accuracy of no examples is undefined")
    m = to_tensor(expert_preds, "expert_preds")
    check_ndim(m, 2, "expert_preds", "N examples x J experts")
    check_same_length(z, m, "logits", "expert_preds")
    check_finite(m, "expert_preds")
    check_labels(m.reshape(-1), k, "expert_preds")  # integer class predictions in range
    if m.shape[1] != z.shape[1] - k:
        raise ValueError(f"expert_preds: has {m.shape[1]} columns but logits hold {z.shape[1] - k} deferral logits")
    pred, defer_to = defer_decisions(z, k)
    m = m.to(z.device).long()
    chosen = m.gather(1, defer_to.clamp_min(0)[:, None]).squeeze(1)
    final = torch.where(defer_to >= 0, chosen, pred)
    return float((final == y.to(z.device).long()).double().mean().item())


def coverage_per_expert(logits: ArrayLike, num_classes: int) -> np.ndarray:
    """Fractions of examples each decision-maker handles: an array of length J + 1 whose entry 0
    is the classifier's coverage and entry j (1..J) the fraction deferred to expert j; sums to 1.
    """
    z = _logits(logits)
    check_nonempty(z, "logits")  # zero rows have no coverage (it would read as all zeros)
    k = _check_num_classes(num_classes, z.shape[1])
    _, defer_to = defer_decisions(z, k)
    counts = np.bincount(defer_to.cpu().numpy() + 1, minlength=z.shape[1] - k + 1)
    return counts / max(len(defer_to), 1)


def expert_calibration_error(
    estimates: ArrayLike, expert_correct: ArrayLike, n_bins: int = 20, binning: str = "width"
) -> float:
    """Mean over experts of the binned ECE of the correctness estimate vs actual correctness
    (L2D paper Sec. 5; the reference code uses 20 bins). Estimates above 1 (softmax eq. 2) are
    clipped to 1 inside the ECE, as in the paper. ``estimates`` and ``expert_correct`` are (N, J).
    """
    from lib.calibration.metrics import binary_ece

    est = to_numpy(estimates, "estimates")
    ok = to_numpy(expert_correct, "expert_correct")
    check_ndim(est, 2, "estimates", "N examples x J experts")
    check_ndim(ok, 2, "expert_correct", "N examples x J experts")
    if est.shape != ok.shape:
        raise ValueError(f"estimates and expert_correct: shapes differ ({est.shape} vs {ok.shape})")
    if np.isnan(est).any():
        raise ValueError("estimates: contains NaN values")
    if (est < 0).any():
        raise ValueError(f"estimates: probabilities must be >= 0, got a minimum of {float(est.min()):.4g}")
    if not np.isin(ok, (0, 1)).all():
        raise ValueError("expert_correct: values must be 0 or 1 (or booleans)")
    est = np.clip(est, 0.0, 1.0)  # +inf (an overflowed eq. 2) clips to 1 as well
    return float(np.mean([binary_ece(est[:, j], ok[:, j], n_bins, binning) for j in range(est.shape[1])]))
