"""JPEG-like DCT filtering of image batches, on the images' device: the input corruption of FGR.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1), Appendix D.1 (FGR, its
ref. [38]): RGB 0..255 -> YCbCr, orthonormal 8x8 DCT-II per block, quantize with the standard JPEG
luminance/chrominance tables (ITU-T T.81 Annex K) scaled by (101 - q)/50 and clamped to >= 1, inverse
DCT, back to RGB, clip. :func:`filtered_rows` draws max(1, int(0.05 B)) images of a normalized batch
and filters each at a quality drawn from {15, 18, 25}; :mod:`lib.moe.fgr` trains on them.

The samples are level-shifted by -128 before the DCT, as T.81 does (A.3.1): the shift moves where the
DC coefficient's rounding to its quantization step falls, so a filter without it gives slightly
different images. Batched in torch on the images' device (the reference filters image by image in numpy). Not
torchvision's ``JPEG``, a real codec with libjpeg's quality scaling that rounds to 8 bits: here the
filter is the paper's arithmetic in floating point.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F

from lib.data.augment import check_images, to_device_async
from lib.validation import check_finite, check_int, check_number, to_tensor

BLOCK = 8
DEFAULT_QUALITIES: tuple[int, ...] = (15, 18, 25)

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
) + ((99,) * 8,) * 4
# JFIF (ITU-T T.871) RGB -> YCbCr; Cb and Cr are offset by 128.
RGB_TO_YCBCR = ((0.299, 0.587, 0.114), (-0.168736, -0.331264, 0.5), (0.5, -0.418688, -0.081312))
YCBCR_OFFSET = (0.0, 128.0, 128.0)

__all__ = ["BLOCK", "DEFAULT_QUALITIES", "dct_matrix", "quantization_tables", "jpeg_filter", "filtered_rows"]


def dct_matrix(n: int = BLOCK, dtype: torch.dtype = torch.float32, device: Any = None) -> torch.Tensor:
    """Orthonormal DCT-II matrix D (n x n): D[k, i] = a_k cos(pi (2i + 1) k / (2n)),
    a_0 = sqrt(1/n), a_k = sqrt(2/n); coefficients of a block X are D X D^T and D^T D = I."""
    check_int(n, "n")
    k = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(n, dtype=torch.float64)[None, :]
    d = torch.cos(math.pi * (2 * i + 1) * k / (2 * n)) * math.sqrt(2.0 / n)
    d[0] = math.sqrt(1.0 / n)
    return d.to(dtype=dtype, device=device)


def quantization_tables(quality: Any, dtype: torch.dtype = torch.float32, device: Any = None) -> torch.Tensor:
    """Per-image quantization tables (B, 3, 8, 8): luminance for Y, chrominance for Cb and Cr, scaled by
    (101 - q)/50 and clamped to >= 1 (the FGR reference code's scaling, not libjpeg's)."""
    q = to_tensor(quality, "quality").to(dtype=torch.float64).reshape(-1)
    check_finite(q, "quality")
    if ((q < 1) | (q > 100)).any():
        raise ValueError(f"quality: must lie in [1, 100], got range [{float(q.min())}, {float(q.max())}]")
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


def jpeg_filter(images: torch.Tensor, quality: Any) -> torch.Tensor:
    """JPEG-like DCT filtering of float RGB images (B, 3, H, W) in [0, 255] at ``quality`` (one number in
    [1, 100] or one per image); sizes not divisible by 8 are edge-padded and cropped back."""
    check_images(images, "images")
    if images.shape[1] != 3:
        raise ValueError(f"images: expected 3 RGB channels, got {images.shape[1]}")
    images = images if images.is_floating_point() else images.float()
    check_finite(images, "images")
    if images.numel() and (images.min() < 0 or images.max() > 255):
        raise ValueError(
            f"images: values must lie in [0, 255] (uint8 scale), got "
            f"[{float(images.min()):.4g}, {float(images.max()):.4g}]"
        )
    b = images.shape[0]
    q = to_tensor(quality, "quality").reshape(-1)
    if q.numel() not in (1, b):
        raise ValueError(f"quality: expected one value or one per image ({b}), got {q.numel()}")
    return _jpeg_filter(images, quantization_tables(q.expand(b) if q.numel() == 1 else q))


def _jpeg_filter(images: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
    """:func:`jpeg_filter` without input checks (no host synchronisation) given the (B, 3, 8, 8)
    quantization tables: the core that :func:`filtered_rows` runs inside the training step."""
    b, _, h, w = images.shape
    dtype, dev = images.dtype, images.device
    tables = tables.to(dtype=dtype, device=dev)
    d, m, m_inv, offset = _constants(dtype, dev)

    # Autocast off: the DCT, the rounding to quantization steps and the colour transforms need full
    # precision even when the training step runs under bf16/fp16 autocast.
    off = torch.autocast(dev.type, enabled=False) if torch.amp.is_autocast_available(dev.type) else nullcontext()
    with torch.no_grad(), off:
        ycc = torch.einsum("ij,bjhw->bihw", m, images) + offset - 128.0  # level shift as in JPEG
        pad_h, pad_w = (-h) % BLOCK, (-w) % BLOCK
        if pad_h or pad_w:
            ycc = F.pad(ycc, (0, pad_w, 0, pad_h), mode="replicate")
        hb, wb = ycc.shape[2] // BLOCK, ycc.shape[3] // BLOCK
        blocks = ycc.reshape(b, 3, hb, BLOCK, wb, BLOCK).permute(0, 1, 2, 4, 3, 5)  # (B, 3, Hb, Wb, 8, 8)
        coef = d @ blocks @ d.T
        t = tables[:, :, None, None]
        coef = torch.round(coef / t) * t
        ycc = (d.T @ coef @ d).permute(0, 1, 2, 4, 3, 5).reshape(b, 3, hb * BLOCK, wb * BLOCK)[:, :, :h, :w]
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


def filtered_rows(
    x: torch.Tensor,
    mean: Any,
    std: Any,
    frac: float = 0.05,
    qualities: Sequence[int] = DEFAULT_QUALITIES,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """JPEG-filtered copies of max(1, int(frac B)) random images of a normalized batch (B, 3, H, W), each at
    a quality drawn from ``qualities``, and their row indices (on the CPU); never waits for the device."""
    check_images(x)
    check_number(frac, "frac", 0.0, 1.0, low_open=True)
    if not len(qualities):
        raise ValueError("qualities: is empty")
    tables = quantization_tables(list(qualities), dtype=x.dtype)  # one per quality, checked here
    mean_t = _channel_stats(mean, "mean", x)
    std_t = _channel_stats(std, "std", x, positive=True)
    b = x.shape[0]
    m = max(1, int(frac * b))
    gen_device = generator.device if generator is not None else torch.device("cpu")
    idx = torch.randperm(b, generator=generator, device=gen_device)[:m].cpu()
    pick = torch.randint(len(tables), (m,), generator=generator, device=gen_device).cpu()
    with torch.no_grad():
        img = (x.detach().index_select(0, to_device_async(idx, x.device)) * std_t + mean_t) * 255.0
        return (_jpeg_filter(img, to_device_async(tables[pick], x.device)) / 255.0 - mean_t) / std_t, idx
