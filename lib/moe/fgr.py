"""Frequency-aware Gradient Rectification (FGR), the calibration-under-shift baseline of paper 1.

Paper 1, Appendix D.1, describing FGR (its ref. [38]) with soft ECE (its ref. [15]) as the
calibration loss. Each step after warmup:

1. replace max(1, int(0.05 B)) images of the batch with a JPEG-like filtered copy
   (:mod:`lib.data.jpeg`, quality drawn from {15, 18, 25});
2. main gradient g_m from the main loss on the filtered batch (cross-entropy of the mixture for FGR,
   robust_moe_loss for FGR + Robust);
3. calibration gradient g_c from soft ECE on the original batch;
4. if <g_m, g_c> < 0 (over all parameters as one flat vector), use g_m - <g_m,g_c>/||g_c||^2 g_c.

The reference runs two forwards and two backwards; here a step is **one forward** on the batch
followed by its m filtered copies (:func:`fgr_batch`; outputs equal the two forwards' except through
BatchNorm, whose statistics cover the B + m rows once), **one batched backward** for both gradients
(:func:`two_gradients`) and the projection, branch-free on the device. The same code runs a single
model (:func:`fgr_step`) and a pack of G runs (:func:`packed_fgr_gradients`, the pack's :class:`lib.engine.packed.OwnStep`),
one projection per run over its own parameters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lib.data.augment import to_device_async
from lib.engine.packed import take_rows
from lib.data.jpeg import filtered_rows
from lib.validation import check_finite, check_int, check_nonempty, check_positive, check_probs_labels, to_tensor

Inputs = Callable[[torch.Tensor, torch.Generator | None], tuple[torch.Tensor, torch.Tensor]]
"""FGR's input rule: a batch -> the one-forward batch with its filtered rows, and the main branch's row index."""

SOFT_ECE_BINS = 15  # soft-ECE calibration loss of FGR's g_c: bins and soft-assignment temperature
SOFT_ECE_TEMPERATURE = 0.01


def fgr_batch(x: torch.Tensor, mean: Any, std: Any, **draw: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """FGR's one-forward input, ``x`` (B normalized images) then the m filtered copies of
    :func:`lib.data.jpeg.filtered_rows` (``draw``: its keywords), and the (B,) row index of the main
    branch's filtered batch (row i, or B + j where image i is the j-th filtered one)."""
    return _with_filtered(x, *filtered_rows(x, mean, std, **draw))


def image_inputs(mean: Any, std: Any) -> Inputs:
    """FGR's input rule for images normalized by ``mean``/``std``: ``inputs(x, generator)`` is
    :func:`fgr_batch` (what :func:`fgr_step` and a pack's step take; :func:`feature_batch` is the
    rule for frozen features)."""
    if mean is None or std is None:
        raise ValueError("mean: and std are required to filter normalized images (pass the dataset's)")
    return lambda x, generator=None: fgr_batch(x, mean, std, generator=generator)


def _with_filtered(x: torch.Tensor, rows: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` (B rows) then ``rows``, the filtered copies of its rows ``idx`` (on the CPU), as one
    batch, and the (B,) row index of the main branch's filtered batch (row i, or B + j where row i
    is the j-th filtered one)."""
    b = x.shape[0]
    main = torch.arange(b)
    main[idx] = b + torch.arange(rows.shape[0])
    return torch.cat([x.detach(), rows]), to_device_async(main, x.device)


def feature_batch(
    x: torch.Tensor, generator: torch.Generator | None = None, *, dim: int, copies: int, frac: float = 0.05
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`fgr_batch` on frozen features (:class:`lib.features.frozen.FeatureBundle`): a batch of
    training rows (B, (1 + ``copies``) ``dim``), then m = max(1, int(``frac`` B)) random rows whose
    first ``dim`` columns are replaced by one of their image's filtered copies (drawn uniformly), and
    the (B,) row index of the filtered batch. Without copies nothing is filtered (every row reads itself)."""
    b = x.shape[0]
    if not copies:
        return x, torch.arange(b, device=x.device)
    gdev = generator.device if generator is not None else torch.device("cpu")
    m = max(1, int(frac * b))
    idx = torch.randperm(b, generator=generator, device=gdev)[:m].to(x.device)
    q = torch.randint(copies, (m,), generator=generator, device=gdev).to(x.device)
    rows = x.index_select(0, idx).clone()
    cols = dim * (1 + q)[:, None] + torch.arange(dim, device=x.device)[None, :]
    rows[:, :dim] = torch.gather(rows, 1, cols)
    return _with_filtered(x, rows, idx.cpu())


def soft_ece(
    probs: torch.Tensor, labels: torch.Tensor, n_bins: int = SOFT_ECE_BINS, temperature: float = SOFT_ECE_TEMPERATURE
) -> torch.Tensor:
    """Differentiable soft-binned ECE (FGR's calibration loss; Karandikar et al. 2021).

    conf = max prob, centres c_b = (b + 0.5)/n_bins, membership u_ib = softmax_b(-(conf_i - c_b)^2 / T),
    hard correctness a_i = 1[argmax = y]; prop_b = mean_i u_ib, conf_b and acc_b the u-weighted means;
    loss = sqrt(sum_b prop_b (acc_b - conf_b)^2). As T -> 0 this is the L2 ECE with n_bins equal-width
    bins; as T -> infinity it is |mean accuracy - mean confidence|."""
    check_probs_labels(probs, labels)
    check_nonempty(probs, "probs")
    probs = probs if isinstance(probs, torch.Tensor) else torch.as_tensor(probs, dtype=torch.float64)
    labels = to_tensor(labels, "labels").to(probs.device).long()
    return _soft_ece(probs, labels, check_int(n_bins, "n_bins"), check_positive(temperature, "temperature"))


def _soft_ece(
    probs: torch.Tensor, labels: torch.Tensor, n_bins: int = SOFT_ECE_BINS, temperature: float = SOFT_ECE_TEMPERATURE
) -> torch.Tensor:
    n = probs.shape[0]
    conf, pred = probs.max(dim=1)
    correct = (pred == labels).to(probs.dtype)
    centres = (torch.arange(n_bins, dtype=probs.dtype, device=probs.device) + 0.5) / n_bins
    u = F.softmax(-((conf[:, None] - centres[None, :]) ** 2) / temperature, dim=1)  # (N, B)
    mass = u.sum(dim=0)  # n * prop_b
    gap = (u * (correct - conf)[:, None]).sum(dim=0)  # mass_b * (acc_b - conf_b)
    # prop_b (acc_b - conf_b)^2 = gap_b^2 / (n mass_b); |gap_b| <= mass_b, so a bin lighter than eps adds
    # < eps / n. The mass is clamped at eps, not tiny: below sqrt(tiny) the backward's mass_b^2 underflows.
    sq = (gap.pow(2) / (n * mass.clamp_min(torch.finfo(probs.dtype).eps))).sum()
    return torch.sqrt(sq.clamp_min(torch.finfo(probs.dtype).eps ** 2))


def rectify(g_main: torch.Tensor, g_cal: torch.Tensor) -> torch.Tensor:
    """FGR rectification on flat gradient vectors: g_m - (<g_m,g_c>/||g_c||^2) g_c if <g_m,g_c> < 0,
    else g_m. The result then has a non-negative inner product with g_c (zero when projected)."""
    g_main, g_cal = to_tensor(g_main, "g_main"), to_tensor(g_cal, "g_cal")
    if g_main.shape != g_cal.shape:
        raise ValueError(f"g_main and g_cal: shapes differ ({tuple(g_main.shape)} vs {tuple(g_cal.shape)})")
    check_finite(g_main, "g_main")
    check_finite(g_cal, "g_cal")
    return g_main - _rectification_coef((g_main * g_cal).sum(), (g_cal * g_cal).sum()) * g_cal


def _rectification_coef(dot: torch.Tensor, norm2: torch.Tensor) -> torch.Tensor:
    """min(<g_m,g_c>, 0) / ||g_c||^2 (0 when the gradients agree), branch-free on the device."""
    return dot.clamp(max=0.0) / norm2.clamp_min(torch.finfo(norm2.dtype).tiny)


def two_gradients(loss_a: torch.Tensor, loss_b: torch.Tensor, params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The gradients of two scalar losses of one graph with respect to ``params`` from one backward
    pass (``is_grads_batched`` over the two unit cotangents). Entry i has shape ``(2, *params[i].shape)``:
    [d loss_a; d loss_b]; zeros for a parameter neither loss reaches."""
    for name, loss in (("loss_a", loss_a), ("loss_b", loss_b)):
        if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
            raise ValueError(f"{name}: must be a scalar tensor")
    params = list(params)
    if not params or not all(isinstance(p, torch.Tensor) for p in params):
        raise ValueError("params: expected a non-empty sequence of tensors (the parameters to differentiate)")
    both = torch.stack([loss_a, loss_b.to(loss_a.dtype)])
    eye = torch.eye(2, dtype=both.dtype, device=both.device)
    grads = torch.autograd.grad(both, params, grad_outputs=eye, is_grads_batched=True, allow_unused=True)
    return [
        torch.zeros((2, *p.shape), dtype=p.dtype, device=p.device) if g is None else g for p, g in zip(params, grads)
    ]


def rectified_gradients(
    grads: Sequence[torch.Tensor], params: Sequence[torch.Tensor], runs: int = 1
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """FGR's update from :func:`two_gradients`' [g_m; g_c]: per run (``runs``: a pack's runs, whose
    blocks every packed parameter holds run-major along its first dimension, lib.engine.packed), over
    all its parameters as one flat vector, :func:`rectify`. Returns the updates laid out like
    ``params`` and <g_m,g_c> per run, shape (runs,)."""
    flat = torch.cat([g.reshape(2, runs, -1) for g in grads], dim=2)  # (2, runs, P)
    dot = (flat[0] * flat[1]).sum(-1)
    coef = _rectification_coef(dot, (flat[1] * flat[1]).sum(-1))
    update = flat[0] - coef[:, None] * flat[1]
    sizes = [p.numel() // runs for p in params]
    out = [torch.empty_like(p) for p in params]
    torch._foreach_copy_(out, [u.reshape(p.shape) for u, p in zip(update.split(sizes, dim=1), params)])
    return out, dot


def fgr_step(
    model: nn.Module,
    loss_main_fn: Callable[[Any, torch.Tensor], torch.Tensor],
    images: Any,
    labels: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator | None = None,
    inputs: Inputs | None = None,
) -> dict[str, torch.Tensor]:
    """One FGR update (App. D.1): g_m from ``loss_main_fn`` on the filtered batch, g_c from soft ECE on
    the original batch, rectified (:func:`rectify`), then ``optimizer.step()``. The batch is filtered
    by ``inputs(images, generator)`` (:func:`image_inputs` or :func:`feature_batch`); ``None`` (text):
    not filtered. Returns {"loss_main", "loss_cal", "dot", "rectified"} as detached 0-dim tensors on
    the device."""
    x, main_rows = inputs(images, generator) if inputs is not None else (images, None)
    params = [p for p in model.parameters() if p.requires_grad]
    loss_main, loss_cal = _fgr_losses(model(x), main_rows, labels, loss_main_fn)
    update, dot = rectified_gradients(two_gradients(loss_main, loss_cal, params), params)
    optimizer.zero_grad(set_to_none=True)
    for p, g in zip(params, update):
        p.grad = g
    optimizer.step()
    return {
        "loss_main": loss_main.detach(),
        "loss_cal": loss_cal.detach(),
        "dot": dot[0].detach(),
        "rectified": (dot[0] < 0).detach(),
    }


def _fgr_losses(
    out: Any, main_rows: torch.Tensor | None, labels: torch.Tensor, main_fn: Callable[[Any, torch.Tensor], torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """FGR's two losses on one model's output of the one forward: ``main_fn`` on the rows
    ``main_rows`` (``None``: unfiltered inputs, every row) and soft ECE on the first B rows."""
    loss_main = main_fn(out if main_rows is None else take_rows(out, main_rows), labels)
    labels = labels.to(loss_main.device)
    probs = out.probs if hasattr(out, "probs") else F.softmax(out, dim=1)  # an MoEOutput or logits
    return loss_main, _soft_ece(probs[: labels.shape[0]], labels)


def packed_fgr_gradients(
    out: Any,
    main_rows: Sequence[torch.Tensor | None],
    labels: Sequence[torch.Tensor],
    main_fns: Sequence[Callable[[Any, torch.Tensor], torch.Tensor]],
    params: Sequence[torch.Tensor],
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """FGR's update for a pack of G runs (``out`` with a leading run dimension, ``params`` packed):
    run g's ``main_fns[g]`` on its rows ``main_rows[g]`` (``None``: unfiltered) and its soft ECE, one
    batched backward of the summed losses (each run's gradient is its own) and one projection per run
    (:func:`rectified_gradients`). Returns the updates (like ``params``) and the per-run main losses (G,)."""
    n = len(main_fns)
    mains, cals = zip(*(_fgr_losses(take_rows(out, i), main_rows[i], labels[i], main_fns[i]) for i in range(n)))
    loss = torch.stack(mains)
    update, _ = rectified_gradients(two_gradients(loss.sum(), torch.stack(cals).sum(), params), params, runs=n)
    return update, loss
