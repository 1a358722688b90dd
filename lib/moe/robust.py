"""Entropy-balanced robust objectives: Robust MoE, Robust Filtered, and their references.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1),
section 5 and Appendix B/D.3/D.6. On a minibatch of per-example losses l_1..l_n:

* tilted weights w = softmax(lam * l) (eq. 11), never detached;
* Robust MoE loss sum_i w_i l_i (eq. 6/12) = R_lam(l) + KL(w || uniform)/lam (eq. 7/14), with the
  entropic risk R_lam(l) = (1/lam) log((1/n) sum_i exp(lam l_i)) (eq. 13);
* gradient sum_i w_i (1 + lam (l_i - E_w l)) grad l_i (eq. 16) -- autograd gives it for free because
  the weights are not detached;
* CVaR_alpha (eq. 18) as a reference, with CVaR_alpha <= R_lam + log(1/alpha)/lam (eq. 19);
* effective support of the weights (App. D.6, Table 5);
* Robust Filtered (App. D.3): ERM mean plus the tilted mean over a routing-relevant subset S.

lam is the paper's robustness parameter ("eta" in the public code), default 2.0. lam < 0 raises;
lam == 0 gives the plain mean exactly.

The public losses check their inputs and then call the formulas the training loop
(lib.moe.methods.objective) calls directly: :func:`tilted_mean`, :func:`filtered_mean` and
:func:`relevant_set`, which read no tensor value (no host-device synchronisation per step)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lib.validation import check_finite, check_ndim, check_number, check_positive, check_same_length, to_tensor

DEFAULT_LAM = 2.0


def _losses(losses: object, name: str = "losses", runs: bool = False) -> torch.Tensor:
    """``losses`` as a floating tensor: one loss per example, or with ``runs`` also (runs, examples)."""
    t = to_tensor(losses, name)
    if not t.is_floating_point():
        t = t.to(torch.float64 if not isinstance(losses, torch.Tensor) else torch.get_default_dtype())
    if not (runs and t.ndim == 2):
        check_ndim(t, 1, name, "one loss per example" + (", or runs x examples" if runs else ""))
    if t.shape[-1] == 0:
        raise ValueError(f"{name}: is empty")
    check_finite(t, name)
    return t


def _tilted(losses: object, lam: float, runs: bool = False) -> tuple[torch.Tensor, float]:
    """The checked losses and lam, lam * l checked to be finite: past float range its softmax is NaN."""
    l, lam = _losses(losses, runs=runs), check_positive(lam, "lam", allow_zero=True)
    if not bool(torch.isfinite(lam * l).all()):
        raise ValueError(f"lam: {lam:g} x the largest loss ({float(l.abs().max()):.3g}) overflows; use a smaller lam")
    return l, lam


def tilted_weights(losses: object, lam: float = DEFAULT_LAM) -> torch.Tensor:
    """Entropy-balanced adversary w = softmax(lam * l) over the batch (eq. 11); not detached."""
    l, lam = _tilted(losses, lam)
    return F.softmax(lam * l, dim=0)


def tilted_mean(l: torch.Tensor, lam: float) -> torch.Tensor:
    """sum_i w_i l_i with w = softmax(lam l) over the last dimension (eq. 6/12), the mean at lam == 0;
    no input checks (the training loop's formula, also :func:`robust_moe_loss`'s)."""
    if lam == 0.0:
        return l.mean(dim=-1)
    return (F.softmax(lam * l, dim=-1) * l).sum(dim=-1)


def robust_moe_loss(losses: object, lam: float = DEFAULT_LAM) -> torch.Tensor:
    """Robust MoE objective sum_i w_i l_i with w = softmax(lam l) (eq. 6/12), checked :func:`tilted_mean`.

    Gradients flow through both w and l, giving eq. (16). lam == 0 returns the mean exactly.
    ``losses`` of shape (runs, n) (packed runs, lib.engine.packed) give one loss per run, each
    tilted over its own batch only."""
    return tilted_mean(*_tilted(losses, lam, runs=True))


def entropic_risk(losses: object, lam: float = DEFAULT_LAM) -> torch.Tensor:
    """Entropic risk R_lam(l) = (1/lam) log((1/n) sum_i exp(lam l_i)) (eq. 13), via logsumexp.

    lam == 0 returns the mean (the limit)."""
    l, lam = _tilted(losses, lam)
    if lam == 0.0:
        return l.mean()
    return (torch.logsumexp(lam * l, dim=0) - math.log(l.shape[0])) / lam


def _weights(w: object) -> torch.Tensor:
    t = to_tensor(w, "w")
    t = t if t.is_floating_point() else t.double()
    if t.ndim not in (1, 2) or t.shape[-1] == 0:
        raise ValueError(f"w: expected a 1-D weight vector or a 2-D (batches x n) array, got shape {tuple(t.shape)}")
    check_finite(t, "w")
    if (t < -1e-12).any() or ((t.sum(dim=-1) - 1).abs() > 1e-4).any():
        raise ValueError("w: weights must be non-negative and sum to 1")
    return t


def kl_to_uniform(w: object) -> torch.Tensor:
    """KL(w || uniform) = sum_i w_i log(n w_i) (eq. 14), 0 at uniform and log n at a point mass."""
    t = _weights(w)
    return torch.special.xlogy(t, t).sum(dim=-1) + math.log(t.shape[-1])


def cvar(losses: object, alpha: float) -> torch.Tensor:
    """Empirical CVaR_alpha (eq. 18): the mean of the largest alpha*n losses, the boundary loss
    entering with its fractional weight (alpha*n - floor(alpha*n)). A reference, not a training loss.

    Equals max_q sum_i q_i l_i over weights with 0 <= q_i <= 1/(alpha n), sum q = 1."""
    l = _losses(losses)
    alpha = check_number(alpha, "alpha", 0.0, 1.0, low_open=True)
    n = l.shape[0]
    m = alpha * n
    full = int(math.floor(m + 1e-12))
    frac = m - full
    top = torch.sort(l, descending=True).values
    total = top[:full].sum()
    if frac > 1e-12 and full < n:
        total = total + frac * top[full]
    return total / m


def effective_support(w: object) -> dict[str, float]:
    """Effective support of adversarial weights (App. D.6, Table 5).

    perplexity = exp(H(w)), fraction = perplexity / n, ratio_bound = n / perplexity (the effective
    density-ratio bound 1/alpha). A 2-D input (batches x n) returns the means over batches."""
    t = _weights(w)
    n = t.shape[-1]
    perplexity = torch.exp(-torch.special.xlogy(t, t).sum(dim=-1))
    return {
        "perplexity": float(perplexity.mean()),
        "fraction": float((perplexity / n).mean()),
        "ratio_bound": float((n / perplexity).mean()),
    }


def relevant_set(
    l: torch.Tensor, l_k: torch.Tensor, r: torch.Tensor, p_k: torch.Tensor, p: torch.Tensor
) -> torch.Tensor:
    """:func:`routing_relevant_mask` without input checks (the training loop's), in the paper's
    symbols: the mixture's losses ``l``, the experts' ``l_k``, the routing ``r``, the experts'
    probabilities ``p_k`` and the mixture's ``p``. The last dimensions are the example's, any leading
    ones are runs (packed runs)."""
    with torch.no_grad():
        regret = torch.relu(l - l_k.min(dim=-1).values)
        disagreement = (r * (p_k - p[..., None, :]).pow(2).sum(dim=-1)).sum(dim=-1)
        return (regret > 1e-6) | (disagreement > 0.01)


def routing_relevant_mask(
    mix_loss: torch.Tensor,
    expert_losses: torch.Tensor,
    routing: torch.Tensor,
    expert_probs: torch.Tensor,
    mix_probs: torch.Tensor,
) -> torch.Tensor:
    """Routing-relevant set S of Robust Filtered (App. D.3) as a bool tensor (N,).

    i is in S if regret_i = relu(l_mix,i - min_k l_ik) > 1e-6 or the routing-weighted
    disagreement sum_k r_ik ||p_ik - p_i||^2 > 0.01. Computed without gradients from
    the outputs of the same forward pass that gives the loss."""
    mix_loss = _losses(mix_loss, "mix_loss")
    named = dict(expert_losses=expert_losses, routing=routing, expert_probs=expert_probs, mix_probs=mix_probs)
    out = [to_tensor(arr, name) for name, arr in named.items()]
    for name, t in zip(named, out):
        check_ndim(t, 3 if name == "expert_probs" else 2, name)
        check_finite(t, name)
        check_same_length(mix_loss, t, "mix_loss", name)
    el, r, ep, mp = out
    if r.shape[1] != el.shape[1] or ep.shape[1] != el.shape[1]:
        raise ValueError(f"routing: expected {el.shape[1]} experts as in expert_losses, got {tuple(r.shape)}")
    if ep.shape[2] != mp.shape[1]:
        raise ValueError(f"mix_probs: expected {ep.shape[2]} classes as in expert_probs, got {mp.shape[1]}")
    return relevant_set(mix_loss, el, r, ep, mp)


def filtered_mean(l: torch.Tensor, mask: torch.Tensor, lam: float) -> torch.Tensor:
    """mean_i l_i + sum_{i in S} w_i l_i, w = softmax(lam l_S) over the last dimension, S = the bool
    ``mask``; no input checks (the training loop's formula, also :func:`robust_filtered_loss`'s).
    Outside S the tilted logits are -1e9, so their weight is exactly 0; with S empty all logits are
    equal, w is uniform and the robust term is the mean (the rule for an empty filtered set)."""
    tilted = torch.where(mask.to(l.device), lam * l, torch.full_like(l, -1e9))
    return l.mean(dim=-1) + (F.softmax(tilted, dim=-1) * l).sum(dim=-1)


def robust_filtered_loss(mix_loss: torch.Tensor, mask: torch.Tensor, lam: float = DEFAULT_LAM) -> torch.Tensor:
    """Robust Filtered objective (App. D.3): mean_i l_i + sum_{i in S} w_i l_i, w = softmax(lam l_S)
    over S = ``mask`` only (bool or 0/1); with S empty the robust term is mean_i l_i. Gradients flow
    through w and l. Checked :func:`filtered_mean`."""
    l, mask = _losses(mix_loss, "mix_loss", runs=True), to_tensor(mask, "mask")
    if mask.shape != l.shape:
        raise ValueError(f"mask: expected the shape of mix_loss {tuple(l.shape)}, got {tuple(mask.shape)}")
    if mask.dtype != torch.bool and not torch.all((mask == 0) | (mask == 1)):
        raise ValueError("mask: must be boolean (or 0/1)")
    return filtered_mean(l, mask.bool(), check_positive(lam, "lam", allow_zero=True))
