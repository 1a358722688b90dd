"""Multi-expert learning to defer (paper 2, "Calibration of multi-expert learning to defer", Sec. 2-3
and 5): a model outputs K class logits and J deferral logits g_{⊥j}; the softmax (Mozannar & Sontag
2020) and one-vs-all (Verma & Nalisnick 2022) surrogates train it, and imply estimators of
P(m_j = y | x): eq. 2 couples all experts and can exceed 1, eq. 3 is a sigmoid of one logit."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from lib.validation import ArrayLike, check_int, check_labels, check_ndim, check_nonempty, check_same_length
from lib.validation import reduce_loss, to_float_tensor, to_tensor


# --- Input handling (once, at each public function) -----------------------------------------------
def _logits_k(logits: ArrayLike, num_classes: int) -> tuple[torch.Tensor, int]:
    """The logits (N, K + J) and K, leaving their columns at least one deferral logit."""
    z = to_float_tensor(logits, "logits", 2, "N examples x (K classes + J experts)")
    return z, check_int(num_classes, "num_classes", 1, z.shape[1] - 1)


def _loss_inputs(
    logits: ArrayLike, labels: ArrayLike, expert_correct: ArrayLike
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Validate (logits (N, K+J), labels (N,), expert_correct (N, J)); return them and K."""
    z = to_float_tensor(logits, "logits", 2, "N examples x (K classes + J experts)")
    check_nonempty(z, "logits")  # the mean loss of an empty batch is NaN
    ec = to_tensor(expert_correct, "expert_correct")
    check_ndim(ec, 2, "expert_correct", "N examples x J experts, 1 where expert j is correct")
    if ec.dtype != torch.bool and not bool(((ec.detach() == 0) | (ec.detach() == 1)).all()):
        raise ValueError("expert_correct: values must be boolean (0/1)")
    j = ec.shape[1]
    if j < 1 or j >= z.shape[1]:
        raise ValueError(
            f"expert_correct: has {j} columns (experts) but logits has {z.shape[1]} columns; need 1 <= J < K + J"
        )
    y = to_tensor(labels, "labels")
    check_labels(y, z.shape[1] - j, "labels")
    check_same_length(z, y, "logits", "labels")
    check_same_length(z, ec, "logits", "expert_correct")
    return z, y.long().to(z.device), ec.to(device=z.device, dtype=z.dtype), z.shape[1] - j


def _defer(z: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    cls_max, pred = z[:, :k].max(dim=1)
    def_max, who = z[:, k:].max(dim=1)
    return pred, torch.where(def_max >= cls_max, who, torch.full_like(who, -1))


# --- Surrogate losses -----------------------------------------------------------------------------
def softmax_l2d_loss(
    logits: ArrayLike, labels: ArrayLike, expert_correct: ArrayLike, reduction: str = "mean"
) -> torch.Tensor:
    """Softmax L2D surrogate (Mozannar & Sontag 2020, L2D paper Sec. 2):
    -log softmax(g)_y - sum_j 1[m_j = y] log softmax(g)_{⊥j}, over all K + J outputs."""
    z, y, ec, k = _loss_inputs(logits, labels, expert_correct)
    logp = F.log_softmax(z, dim=1)
    loss = -logp.gather(1, y[:, None]).squeeze(1) - (ec * logp[:, k:]).sum(dim=1)
    return reduce_loss(loss, reduction)


def ova_l2d_loss(
    logits: ArrayLike, labels: ArrayLike, expert_correct: ArrayLike, reduction: str = "mean"
) -> torch.Tensor:
    """One-vs-all L2D surrogate (Verma & Nalisnick 2022, L2D paper Sec. 2):
    phi(g_y) + sum_{k != y} phi(-g_k) + sum_j phi(-g_{⊥j}) + sum_j 1[m_j = y](phi(g_{⊥j}) - phi(-g_{⊥j})),
    phi(t) = softplus(-t)."""
    z, y, ec, k = _loss_inputs(logits, labels, expert_correct)
    g_cls, g_def = z[:, :k], z[:, k:]
    target = F.one_hot(y, k).to(z.dtype)
    sign = 2 * target - 1  # +1 for the true class, -1 for the others
    cls = F.softplus(-sign * g_cls).sum(dim=1)
    dfr = (F.softplus(-g_def) * ec + F.softplus(g_def) * (1 - ec)).sum(dim=1)
    return reduce_loss(cls + dfr, reduction)


# --- Estimators of expert correctness and deferral decisions --------------------------------------
def expert_correctness_softmax(logits: ArrayLike, num_classes: int) -> torch.Tensor:
    """Softmax estimate of P(m_j = y | x) = p_{⊥j} / (1 - sum_j' p_{⊥j'}) (L2D paper eq. 2), computed
    as exp(g_{⊥j} - logsumexp_k g_k); unclipped, it can exceed 1."""
    z, k = _logits_k(logits, num_classes)
    return torch.exp(z[:, k:] - torch.logsumexp(z[:, :k], dim=1, keepdim=True))


def expert_correctness_ova(logits: ArrayLike, num_classes: int) -> torch.Tensor:
    """OvA estimate of P(m_j = y | x) = sigmoid(g_{⊥j}) (L2D paper eq. 3); (N, J), always in (0, 1)."""
    z, k = _logits_k(logits, num_classes)
    return torch.sigmoid(z[:, k:])


def defer_decisions(logits: ArrayLike, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pred_class, defer_to)``: argmax_k g_k, and argmax_j g_{⊥j} where max_j g_{⊥j} >= max_k g_k
    (a tie defers, as the paper's rule r(x) in Sec. 2 and its Bayes rejector), else -1."""
    return _defer(*_logits_k(logits, num_classes))


def system_accuracy(logits: ArrayLike, labels: ArrayLike, expert_preds: ArrayLike, num_classes: int) -> float:
    """Accuracy of the classifier's prediction, or the chosen expert's (``expert_preds`` (N, J))
    where the model defers (L2D paper Sec. 5, Fig. 1 b/e)."""
    z, k = _logits_k(logits, num_classes)
    y = to_tensor(labels, "labels")
    check_labels(y, k, "labels")
    check_same_length(z, y, "logits", "labels")
    check_nonempty(z, "logits")  # the system accuracy of no examples is undefined
    m = to_tensor(expert_preds, "expert_preds")
    check_ndim(m, 2, "expert_preds", "N examples x J experts")
    check_same_length(z, m, "logits", "expert_preds")
    check_labels(m.reshape(-1), k, "expert_preds")  # finite integer class predictions in range
    if m.shape[1] != z.shape[1] - k:
        raise ValueError(f"expert_preds: has {m.shape[1]} columns but logits hold {z.shape[1] - k} deferral logits")
    pred, defer_to = _defer(z, k)
    m = m.to(z.device).long()
    chosen = m.gather(1, defer_to.clamp_min(0)[:, None]).squeeze(1)
    final = torch.where(defer_to >= 0, chosen, pred)
    return float((final == y.to(z.device).long()).double().mean().item())


def coverage_per_expert(logits: ArrayLike, num_classes: int) -> np.ndarray:
    """The share of examples the classifier (entry 0) and each expert (1..J) handle."""
    z, k = _logits_k(logits, num_classes)
    check_nonempty(z, "logits")  # zero rows have no coverage (it would read as all zeros)
    _, defer_to = _defer(z, k)
    return np.bincount(defer_to.cpu().numpy() + 1, minlength=z.shape[1] - k + 1) / len(defer_to)
