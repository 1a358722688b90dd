"""Frequency-aware Gradient Rectification (FGR), the calibration-under-shift baseline of paper 1.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1),
Appendix D.1, describing FGR (its ref. [38]) with soft ECE (its ref. [15]) as the calibration loss.
Each step after warmup:

1. replace max(1, int(0.05 B)) images of the batch with a JPEG-like filtered copy: RGB 0..255 ->
   YCbCr, orthonormal 8x8 DCT-II per block, quantize with the standard JPEG luminance/chrominance
   tables (ITU-T T.81 Annex K) scaled by (101 - q)/50 and clamped to >= 1, q drawn from {15, 18, 25},
   inverse DCT, back to RGB, clip;
2. main gradient g_m from the main loss on the filtered batch (cross-entropy of the mixture for FGR,
   robust_moe_loss for FGR + Robust);
3. calibration gradient g_c from soft ECE on the original batch;
4. if <g_m, g_c> < 0 (over all parameters as one flat vector), use g_m - <g_m,g_c>/||g_c||^2 g_c.

The DCT runs in torch, batched, on the images' device (the reference does it image by image in numpy
on the CPU). Exactly two model forwards per step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lib.augment import to_device_async
from lib.engine.device import autocast
from lib.validation import check_finite, check_ndim, check_positive, check_probs_labels, to_tensor

BLOCK = 8
DEFAULT_QUALITIES: tuple[int, ...] = (15, 18, 25)
SOFT_ECE_BINS = 15  # soft-ECE calibration loss of FGR's g_c: bins and soft-assignment temperature
SOFT_ECE_TEMPERATURE = 0.01

# Standard JPEG quantization tables (ITU-T T.81, Annex K, tables K.1 and K.2).
JPEG_LUMA = (
    (16, 11, 10, 16, 24, 40, 51, 61),
    (12, 12, 14, 19, 26, 58, 60, 55),
    (14, 13, 16, 24, 40, 57, 69, 56),
    (14, 17, 22, 29, 51, 87, 80, 62),
    (18, 22, 37, 56, 68, 109, 103, 77),
    (24, 35, 55, 64, 81, 104, 113, 92),
    (49, 64, 78, 87, 103, 121, 120, 101),
    (72, 92, 95, 98, 112, 100, 103, 99),
)
JPEG_CHROMA = (
    (17, 18, 24, 47, 99, 99, 99, 99),
    (18, 21, 26, 66, 99, 99, 99, 99),
    (24, 26, 56, 99, 99, 99, 99, 99),
    (47, 66, 99, 99, 99, 99, 99, 99),
    (99, 99, 99, 99, 99, 99, 99, 99),
    (99, 99, 99, 99, 99, 99, 99, 99),
    (99, 99, 99, 99, 99, 99, 99, 99),
    (99, 99, 99, 99, 99, 99, 99, 99),
)
# JFIF (ITU-T T.871) RGB -> YCbCr; Cb and Cr are offset by 128.
RGB_TO_YCBCR = (
    (0.299, 0.587, 0.114),
    (-0.168736, -0.331264, 0.5),
    (0.5, -0.418688, -0.081312),
)
YCBCR_OFFSET = (0.0, 128.0, 128.0)

__all__ = [
    "dct_matrix",
    "quantization_tables",
    "jpeg_filter",
    "filter_batch",
    "soft_ece",
    "rectify",
    "fgr_step",
]


def dct_matrix(n: int = BLOCK, dtype: torch.dtype = torch.float32, device: Any = None) -> torch.Tensor:
    """Orthonormal DCT-II matrix D (n x n): D[k, i] = a_k cos(pi (2i + 1) k / (2n)),
    a_0 = sqrt(1/n), a_k = sqrt(2/n); coefficients of a block X are D X D^T and D^T D = I."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n: must be a positive integer, got {n!r}")
    k = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(n, dtype=torch.float64)[None, :]
    d = torch.cos(math.pi * (2 * i + 1) * k / (2 * n)) * math.sqrt(2.0 / n)
    d[0] = math.sqrt(1.0 / n)
    return d.to(dtype=dtype, device=device)


def _check_quality(q: torch.Tensor) -> None:
    if ((q < 1) | (q > 100)).any():
        raise ValueError(f"quality: must lie in [1, 100], got range [{float(q.min())}, {float(q.max())}]")


def quantization_tables(quality: Any, dtype: torch.dtype = torch.float32, device: Any = None) -> torch.Tensor:
    """Per-image quantization tables (B, 3, 8, 8): luminance for Y, chrominance for Cb and Cr, scaled by
    (101 - q)/50 and clamped to >= 1 (the FGR reference code's scaling, not libjpeg's)."""
    q = to_tensor(quality, "quality").to(dtype=torch.float64).reshape(-1)
    check_finite(q, "quality")
    _check_quality(q)
    base = torch.tensor([JPEG_LUMA, JPEG_CHROMA, JPEG_CHROMA], dtype=torch.float64)
    scale = ((101.0 - q) / 50.0)[:, None, None, None]
    return (base[None] * scale).clamp_min(1.0).to(dtype=dtype, device=device)


@lru_cache(maxsize=16)
def _constants(dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, ...]:
    """DCT matrix, RGB->YCbCr matrix, its inverse and the YCbCr offsets, built once per dtype/device."""
    m64 = torch.tensor(RGB_TO_YCBCR, dtype=torch.float64)
    return (
        dct_matrix(BLOCK, dtype=dtype, device=device),
        m64.to(dtype=dtype, device=device),
        torch.linalg.inv(m64).to(dtype=dtype, device=device),
        torch.tensor(YCBCR_OFFSET, dtype=dtype, device=device)[None, :, None, None],
    )


def _to_blocks(x: torch.Tensor) -> torch.Tensor:
    b, c, h, w = x.shape
    return x.reshape(b, c, h // BLOCK, BLOCK, w // BLOCK, BLOCK).permute(0, 1, 2, 4, 3, 5)


def _from_blocks(x: torch.Tensor) -> torch.Tensor:
    b, c, hb, wb, _, _ = x.shape
    return x.permute(0, 1, 2, 4, 3, 5).reshape(b, c, hb * BLOCK, wb * BLOCK)


def jpeg_filter(images: torch.Tensor, quality: Any) -> torch.Tensor:
    """JPEG-like DCT filtering of RGB images with values in [0, 255], shape (B, 3, H, W), float.

    ``quality`` is one number in [1, 100] or one per image. Sizes not divisible by 8 are padded by
    edge replication and cropped back. Runs batched on ``images.device``; no gradient."""
    if not isinstance(images, torch.Tensor):
        raise ValueError(f"images: expected a torch tensor, got {type(images).__name__}")
    check_ndim(images, 4, "images", "B x 3 x H x W")
    if images.shape[1] != 3:
        raise ValueError(f"images: expected 3 RGB channels, got {images.shape[1]}")
    if not images.is_floating_point():
        images = images.float()
    check_finite(images, "images")
    b = images.shape[0]
    q = to_tensor(quality, "quality").reshape(-1)
    if q.numel() not in (1, b):
        raise ValueError(f"quality: expected one value or one per image ({b}), got {q.numel()}")
    return _jpeg_filter(images, quantization_tables(q.expand(b) if q.numel() == 1 else q))


def _jpeg_filter(images: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
    """:func:`jpeg_filter` without input checks (no host synchronisation) given the (B, 3, 8, 8)
    quantization tables: the core that :func:`filter_batch` runs inside the training step."""
    b, _, h, w = images.shape
    dtype, dev = images.dtype, images.device
    tables = tables.to(dtype=dtype, device=dev)
    d, m, m_inv, offset = _constants(dtype, dev)

    # Autocast off: the DCT, the rounding to quantization steps and the colour transforms need full
    # precision even when the training step runs under bf16/fp16 autocast.
    with torch.no_grad(), autocast(dev):
        ycc = torch.einsum("ij,bjhw->bihw", m, images) + offset - 128.0  # level shift as in JPEG
        pad_h, pad_w = (-h) % BLOCK, (-w) % BLOCK
        if pad_h or pad_w:
            ycc = F.pad(ycc, (0, pad_w, 0, pad_h), mode="replicate")
        blocks = _to_blocks(ycc)  # (B, 3, Hb, Wb, 8, 8)
        coef = d @ blocks @ d.T
        t = tables[:, :, None, None]
        coef = torch.round(coef / t) * t
        ycc = _from_blocks(d.T @ coef @ d)[:, :, :h, :w]
        rgb = torch.einsum("ij,bjhw->bihw", m_inv, ycc + 128.0 - offset)
        return rgb.clamp(0.0, 255.0)


def _channel_stats(value: Any, name: str, x: torch.Tensor, positive: bool = False) -> torch.Tensor:
    """Per-channel statistics as a (1, C, 1, 1) tensor on ``x``'s device, checked on the host first
    (no device synchronisation when ``value`` is a list or a CPU tensor)."""
    t = to_tensor(value, name).detach().reshape(-1).cpu().to(torch.float64)
    if t.numel() not in (1, x.shape[1]):
        raise ValueError(f"{name}: expected 1 or {x.shape[1]} values (one per channel), got {t.numel()}")
    check_finite(t, name)
    if positive and (t <= 0).any():
        raise ValueError(f"{name}: must be > 0, got {t.tolist()}")
    return to_device_async(t.expand(x.shape[1]).to(x.dtype), x.device)[None, :, None, None]


def filter_batch(
    x: torch.Tensor,
    mean: Any,
    std: Any,
    frac: float = 0.05,
    qualities: Sequence[int] = DEFAULT_QUALITIES,
    generator: torch.Generator | None = None,
    return_indices: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Copy of a normalized batch (B, 3, H, W) with max(1, int(frac B)) random images replaced by
    JPEG-filtered versions (denormalize to 0..255, filter at a quality drawn from ``qualities``,
    renormalize). ``generator`` (on any device) makes the choice reproducible. Only host-side values
    (``mean``, ``std``, ``qualities``) are checked, so the call never waits for the device."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"x: expected a torch tensor, got {type(x).__name__}")
    check_ndim(x, 4, "x", "B x 3 x H x W normalized images")
    check_positive(frac, "frac")
    if frac > 1:
        raise ValueError(f"frac: must lie in (0, 1], got {frac!r}")
    qs = torch.as_tensor(list(qualities), dtype=torch.float64)
    if qs.numel() == 0:
        raise ValueError("qualities: is empty")
    _check_quality(qs)
    mean_t = _channel_stats(mean, "mean", x)
    std_t = _channel_stats(std, "std", x, positive=True)
    b = x.shape[0]
    m = max(1, int(frac * b))
    gen_device = generator.device if generator is not None else torch.device("cpu")
    idx = torch.randperm(b, generator=generator, device=gen_device)[:m].cpu()
    q = qs[torch.randint(len(qs), (m,), generator=generator, device=gen_device).cpu()]
    idx_dev = to_device_async(idx, x.device)
    with torch.no_grad():
        sel = x.detach().index_select(0, idx_dev)
        img = (sel * std_t + mean_t) * 255.0
        tables = to_device_async(quantization_tables(q, dtype=x.dtype), x.device)
        filtered = (_jpeg_filter(img, tables) / 255.0 - mean_t) / std_t
        out = x.detach().clone()
        out.index_copy_(0, idx_dev, filtered)
    return (out, idx) if return_indices else out


def soft_ece(probs: torch.Tensor, labels: torch.Tensor, n_bins: int = SOFT_ECE_BINS,
             temperature: float = SOFT_ECE_TEMPERATURE) -> torch.Tensor:
    """Differentiable soft-binned ECE (FGR's calibration loss; Karandikar et al. 2021).

    conf = max prob, centres c_b = (b + 0.5)/n_bins, membership u_ib = softmax_b(-(conf_i - c_b)^2 / T),
    hard correctness a_i = 1[argmax = y]; prop_b = mean_i u_ib, conf_b and acc_b the u-weighted means;
    loss = sqrt(sum_b prop_b (acc_b - conf_b)^2). As T -> 0 this is the L2 ECE with n_bins equal-width
    bins; as T -> infinity it is |mean accuracy - mean confidence|."""
    check_probs_labels(probs, labels)
    if not isinstance(probs, torch.Tensor):
        probs = torch.as_tensor(probs, dtype=torch.float64)
    labels = to_tensor(labels, "labels").to(probs.device).long()
    if not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins: must be a positive integer, got {n_bins!r}")
    check_positive(temperature, "temperature")
    if probs.shape[0] == 0:
        raise ValueError("probs: is empty")
    return _soft_ece(probs, labels, n_bins, temperature)


def _soft_ece(probs: torch.Tensor, labels: torch.Tensor, n_bins: int, temperature: float) -> torch.Tensor:
    """:func:`soft_ece` without input checks (no host synchronisation), for :func:`fgr_step`."""
    n = probs.shape[0]
    conf, pred = probs.max(dim=1)
    correct = (pred == labels).to(probs.dtype)
    centres = (torch.arange(n_bins, dtype=probs.dtype, device=probs.device) + 0.5) / n_bins
    u = F.softmax(-((conf[:, None] - centres[None, :]) ** 2) / temperature, dim=1)  # (N, B)
    mass = u.sum(dim=0)  # n * prop_b
    gap = (u * (correct - conf)[:, None]).sum(dim=0)  # mass_b * (acc_b - conf_b)
    # prop_b (acc_b - conf_b)^2 = gap_b^2 / (n mass_b); an empty bin contributes 0.
    sq = (gap.pow(2) / (n * mass.clamp_min(torch.finfo(probs.dtype).tiny))).sum()
    return torch.sqrt(sq.clamp_min(torch.finfo(probs.dtype).eps ** 2))


def rectify(g_main: torch.Tensor, g_cal: torch.Tensor) -> torch.Tensor:
    """FGR rectification on flat gradient vectors: g_m - (<g_m,g_c>/||g_c||^2) g_c if <g_m,g_c> < 0,
    else g_m. The result then has a non-negative inner product with g_c (zero when projected)."""
    g_main = to_tensor(g_main, "g_main")
    g_cal = to_tensor(g_cal, "g_cal")
    if g_main.shape != g_cal.shape:
        raise ValueError(f"g_main and g_cal: shapes differ ({tuple(g_main.shape)} vs {tuple(g_cal.shape)})")
    check_finite(g_main, "g_main")
    check_finite(g_cal, "g_cal")
    return g_main - _rectification_coef((g_main * g_cal).sum(), (g_cal * g_cal).sum()) * g_cal


def _rectification_coef(dot: torch.Tensor, norm2: torch.Tensor) -> torch.Tensor:
    """min(<g_m,g_c>, 0) / ||g_c||^2: the projection coefficient when the gradients conflict, 0 when
    they agree. Branch-free, so :func:`fgr_step` applies it on the device without a host sync."""
    return dot.clamp(max=0.0) / norm2.clamp_min(torch.finfo(norm2.dtype).tiny)


def _probs_of(out: Any) -> torch.Tensor:
    probs = getattr(out, "probs", None)
    if probs is None:
        if not isinstance(out, torch.Tensor):
            raise ValueError(f"model: must return an MoEOutput or logits, got {type(out).__name__}")
        probs = F.softmax(out, dim=1)
    return probs


def fgr_step(
    model: nn.Module,
    loss_main_fn: Callable[[Any, torch.Tensor], torch.Tensor],
    images: Any,
    labels: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    mean: Any = None,
    std: Any = None,
    frac: float = 0.05,
    qualities: Sequence[int] = DEFAULT_QUALITIES,
    generator: torch.Generator | None = None,
    n_bins: int = SOFT_ECE_BINS,
    temperature: float = SOFT_ECE_TEMPERATURE,
    filter_inputs: bool = True,
) -> dict[str, torch.Tensor]:
    """One FGR update (App. D.1): g_m from ``loss_main_fn(model(filtered), labels)``, g_c from soft ECE
    of ``model(images)``, rectified as in :func:`rectify` over all trainable parameters, then
    ``optimizer.step()``. Exactly two model forwards. ``loss_main_fn`` = mean mixture NLL for FGR and
    robust_moe_loss of it for FGR + Robust. Non-image inputs (text: a dict, or ``filter_inputs=False``)
    are not filtered. ``mean``/``std`` are the normalization of ``images`` (per channel).

    Returns {"loss_main", "loss_cal", "dot", "rectified"} as detached 0-dim tensors on the device:
    the step never waits for the device (the projection is applied branch-free, with coefficient
    min(<g_m,g_c>, 0)/||g_c||^2), so reading a value with ``float()`` is the caller's choice."""
    if not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins: must be a positive integer, got {n_bins!r}")
    check_positive(temperature, "temperature")
    if not isinstance(model, nn.Module):
        raise ValueError(f"model: expected an nn.Module, got {type(model).__name__}")
    if not callable(loss_main_fn):
        raise ValueError("loss_main_fn: must be callable as loss_main_fn(output, labels) -> scalar")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer: expected a torch optimizer, got {type(optimizer).__name__}")
    is_image = isinstance(images, torch.Tensor) and images.ndim == 4 and images.shape[1] == 3
    if filter_inputs and is_image:
        if mean is None or std is None:
            raise ValueError("mean: and std are required to filter normalized images (pass the dataset's)")
        x_main = filter_batch(images, mean, std, frac=frac, qualities=qualities, generator=generator)
    else:
        x_main = images
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model: has no trainable parameters")

    loss_main = loss_main_fn(model(x_main), labels)
    if not isinstance(loss_main, torch.Tensor) or loss_main.ndim != 0:
        raise ValueError("loss_main_fn: must return a scalar tensor")
    g_m = torch.autograd.grad(loss_main, params, allow_unused=True)
    loss_cal = _soft_ece(_probs_of(model(images)), labels.to(loss_main.device), n_bins, temperature)
    g_c = torch.autograd.grad(loss_cal, params, allow_unused=True)

    g_m = [torch.zeros_like(p) if g is None else g for p, g in zip(params, g_m)]
    g_c = [torch.zeros_like(p) if g is None else g for p, g in zip(params, g_c)]
    # :func:`rectify`'s flat-vector projection, done per tensor without concatenating.
    dot = torch.stack([(a * b).sum() for a, b in zip(g_m, g_c)]).sum()
    coef = _rectification_coef(dot, torch.stack([(b * b).sum() for b in g_c]).sum())
    g_m = [a - coef * b for a, b in zip(g_m, g_c)]
    optimizer.zero_grad(set_to_none=True)
    for p, g in zip(params, g_m):
        p.grad = g
    optimizer.step()
    return {
        "loss_main": loss_main.detach(),
        "loss_cal": loss_cal.detach(),
        "dot": dot.detach(),
        "rectified": (dot < 0).detach(),
    }
