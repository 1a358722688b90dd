"""Tests of lib.data.jpeg (FGR's JPEG-like DCT filter, paper 1 App. D.1) against the math of the DCT,
the JPEG tables and Parseval's identity."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.fft import dctn

from lib.data.jpeg import (
    JPEG_CHROMA,
    JPEG_LUMA,
    RGB_TO_YCBCR,
    dct_matrix,
    filtered_rows,
    jpeg_filter,
    quantization_tables,
)


def filter_batch(x, mean, std, return_indices=False, **draw):
    """The batch with :func:`lib.data.jpeg.filtered_rows` (same draw) in place of their originals."""
    rows, idx = filtered_rows(x, mean, std, **draw)
    out = x.detach().clone()
    out[idx] = rows
    return (out, idx) if return_indices else out


def test_dct_matrix_is_orthonormal_and_matches_scipy() -> None:
    d = dct_matrix(8, dtype=torch.float64)
    assert torch.allclose(d @ d.T, torch.eye(8, dtype=torch.float64), atol=1e-12)
    x = np.random.default_rng(0).normal(size=(8, 8))
    assert np.allclose((d @ torch.from_numpy(x) @ d.T).numpy(), dctn(x, type=2, norm="ortho"), atol=1e-12)
    # A constant block has only a DC coefficient, equal to 8 * value (orthonormal 2-D DCT).
    c = d @ torch.full((8, 8), 3.0, dtype=torch.float64) @ d.T
    assert c[0, 0].item() == pytest.approx(24.0)
    assert torch.allclose(c.flatten()[1:], torch.zeros(63, dtype=torch.float64), atol=1e-12)


def test_quantization_tables_scaling() -> None:
    luma = torch.tensor(JPEG_LUMA, dtype=torch.float64)
    chroma = torch.tensor(JPEG_CHROMA, dtype=torch.float64)
    t = quantization_tables([100, 51, 1, 15], dtype=torch.float64)
    assert torch.allclose(t[0, 0], (luma * 0.02).clamp_min(1))  # (101 - 100)/50 = 0.02, clamped to >= 1
    assert t[0].min() == 1 and t[0, 0].max() == pytest.approx(121 * 0.02)
    assert torch.allclose(t[1, 0], luma)  # scale exactly 1
    assert torch.allclose(t[2, 1], 2 * chroma) and torch.allclose(t[2, 2], 2 * chroma)
    assert torch.allclose(t[3, 0], (luma * 86 / 50).clamp_min(1))
    with pytest.raises(ValueError, match="quality"):
        quantization_tables([0])


def test_quality_100_is_close_to_identity(natural_images) -> None:
    """At q = 100 the tables are t = max(1, 0.02 Q), so each DCT coefficient of channel c moves by at
    most t_c,uv / 2. By Parseval (orthonormal DCT) the YCbCr error of channel c has mean square at most
    mean_uv(t_c,uv^2)/4; per pixel ||rgb error|| <= sigma_max(M^-1) ||YCbCr error||, so the RGB RMS
    error is at most sigma_max(M^-1) sqrt(sum_c mean(t_c^2) / 12). Clipping to [0, 255] only helps."""
    x = natural_images(3)
    y = jpeg_filter(x, 100)
    sigma = torch.linalg.svdvals(torch.linalg.inv(torch.tensor(RGB_TO_YCBCR, dtype=torch.float64)))[0]
    t = quantization_tables([100], dtype=torch.float64)[0]
    bound = sigma * torch.sqrt(t.pow(2).mean(dim=(1, 2)).sum() / 12)
    rms = (y - x).pow(2).mean().sqrt()
    assert rms <= bound
    assert bound < 2.0  # under 2 grey levels RMS out of 255: close to the identity
    assert (y - x).abs().max() < 10.0


def _high_freq_energy(images: torch.Tensor) -> float:
    """Energy of luma DCT coefficients with u + v >= 8 over all 8x8 blocks (scipy's DCT)."""
    m = torch.tensor(RGB_TO_YCBCR, dtype=torch.float64)
    y = torch.einsum("j,bjhw->bhw", m[0], images).numpy() - 128
    b, h, w = y.shape
    blocks = y.reshape(b, h // 8, 8, w // 8, 8).transpose(0, 1, 3, 2, 4)
    coef = dctn(blocks, type=2, norm="ortho", axes=(-2, -1))
    u, v = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    return float((coef[..., u + v >= 8] ** 2).sum())


def test_lower_quality_removes_high_frequencies(natural_images) -> None:
    x = natural_images(4)
    energies = [_high_freq_energy(x)] + [_high_freq_energy(jpeg_filter(x, q)) for q in (50, 25, 15)]
    # Coarser steps zero more high-frequency coefficients. (At fine steps, e.g. q = 90, rounding
    # can add about step^2/12 of energy per coefficient, so only coarse qualities are compared.)
    assert all(a > b for a, b in zip(energies, energies[1:]))
    assert energies[-1] < 0.3 * energies[0]


def test_per_image_quality_and_padding(natural_images) -> None:
    x = natural_images(3)
    batched = jpeg_filter(x, torch.tensor([15, 18, 25]))
    for i, q in enumerate((15, 18, 25)):
        assert torch.allclose(batched[i], jpeg_filter(x[i : i + 1], q)[0])
    # A 29x27 image is padded by edge replication: equal to filtering the replicated 32x32 image.
    small = x[:, :, :29, :27]
    padded = F.pad(small, (0, 5, 0, 3), mode="replicate")
    out = jpeg_filter(small, 18)
    assert out.shape == small.shape
    assert torch.allclose(out, jpeg_filter(padded, 18)[:, :, :29, :27])
    assert out.min() >= 0 and out.max() <= 255


def test_filter_batch_replaces_five_percent(natural_images) -> None:
    mean, std = torch.tensor([0.49, 0.48, 0.45]), torch.tensor([0.25, 0.24, 0.26])
    raw = natural_images(40).float() / 255
    x = (raw - mean[:, None, None]) / std[:, None, None]
    out, idx = filter_batch(x, mean, std, frac=0.05, generator=torch.Generator().manual_seed(0), return_indices=True)
    assert len(idx) == 2  # max(1, int(0.05 * 40))
    changed = (out != x).flatten(1).any(1)
    assert changed.nonzero().flatten().sort().values.tolist() == sorted(idx.tolist())
    # Each replaced image is the renormalized JPEG filter of the original at one of 15/18/25.
    for i in idx.tolist():
        candidates = [
            ((jpeg_filter(raw[i : i + 1] * 255, q)[0] / 255) - mean[:, None, None]) / std[:, None, None]
            for q in (15, 18, 25)
        ]
        assert min((out[i] - c).abs().max().item() for c in candidates) < 1e-4
    assert int((filter_batch(x[:8], mean, std) != x[:8]).flatten(1).any(1).sum()) == 1  # max(1, 0)
    with pytest.raises(ValueError, match="frac"):
        filter_batch(x, mean, std, frac=0.0)
    with pytest.raises(ValueError, match="std"):
        filter_batch(x, mean, [1.0, 2.0])


def test_filtered_rows_are_filter_batch_rows(natural_images) -> None:
    """filtered_rows draws the same images and qualities as filter_batch for the same generator."""
    mean, std = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]
    x = (natural_images(60).float() / 255 - 0.5) / 0.25
    rows, idx = filtered_rows(x, mean, std, generator=torch.Generator().manual_seed(3))
    full, idx2 = filter_batch(x, mean, std, generator=torch.Generator().manual_seed(3), return_indices=True)
    assert rows.shape == (3, 3, 32, 32) and torch.equal(idx, idx2)  # max(1, int(0.05 * 60)) = 3
    assert torch.equal(full[idx], rows)


def test_jpeg_filter_ignores_autocast(natural_images) -> None:
    """Inside a bf16 autocast region (how lib.moe.methods runs FGR on CUDA) the filter keeps full precision."""
    x = natural_images(2).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = jpeg_filter(x, 18)
    assert inside.dtype == torch.float32
    assert torch.equal(inside, jpeg_filter(x, 18))


def test_one_block_is_the_jpeg_round_trip_written_out() -> None:
    """An 8 x 8 RGB block at quality 40, against the definition in numpy with scipy's DCT: RGB ->
    YCbCr (JFIF matrix, offsets 0/128/128) shifted by -128, 2-D orthonormal DCT, coefficients rounded
    to multiples of the standard tables x (101 - q) / 50 (at least 1), inverse DCT, back to RGB,
    clipped to [0, 255]."""
    from scipy.fft import idctn

    rgb = np.random.default_rng(3).uniform(0, 255, (3, 8, 8))
    m = np.array([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]])
    ycc = np.einsum("ij,jhw->ihw", m, rgb) + np.array([0.0, 128.0, 128.0])[:, None, None] - 128.0
    tables = np.maximum(np.array([JPEG_LUMA, JPEG_CHROMA, JPEG_CHROMA], dtype=float) * (101 - 40) / 50, 1.0)
    coef = np.stack([dctn(c, norm="ortho") for c in ycc])
    back = np.stack([idctn(c, norm="ortho") for c in np.round(coef / tables) * tables])
    want = np.einsum("ij,jhw->ihw", np.linalg.inv(m), back + 128.0 - np.array([0.0, 128.0, 128.0])[:, None, None])
    got = jpeg_filter(torch.tensor(rgb[None]), 40)[0].numpy()
    # the library's tables are float32 (19.52 is not exact): 1e-4, far below one quantization step (>= 1)
    np.testing.assert_allclose(got, np.clip(want, 0, 255), atol=1e-4)
    assert np.abs(got - rgb).max() > 1  # quality 40 changes the block: the check is not the identity
