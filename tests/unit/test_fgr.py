"""Tests of lib.fgr (FGR baseline, paper 1 App. D.1) against the math of the DCT, soft ECE and the
gradient projection."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.fft import dctn

from lib.fgr import (
    JPEG_CHROMA,
    JPEG_LUMA,
    RGB_TO_YCBCR,
    dct_matrix,
    fgr_step,
    filter_batch,
    jpeg_filter,
    quantization_tables,
    rectify,
    soft_ece,
)
from lib.moe import MoEHead, MoEModel, mixture_nll
from lib.robust import robust_moe_loss


def _images(b: int = 4, h: int = 32, w: int = 32, seed: int = 0) -> torch.Tensor:
    """Natural-ish test images in [0, 255]: smooth gradients plus pixel noise."""
    g = torch.Generator().manual_seed(seed)
    yy = torch.linspace(0, 1, h)[:, None]
    xx = torch.linspace(0, 1, w)[None, :]
    base = 128 + 80 * torch.sin(5 * xx + 3 * yy)
    img = base.expand(b, 3, h, w) + 40 * torch.randn(b, 3, h, w, generator=g)
    return img.clamp(0, 255).double()


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


def test_quality_100_is_close_to_identity() -> None:
    """At q = 100 the tables are t = max(1, 0.02 Q), so each DCT coefficient of channel c moves by at
    most t_c,uv / 2. By Parseval (orthonormal DCT) the YCbCr error of channel c has mean square at most
    mean_uv(t_c,uv^2)/4; per pixel ||rgb error|| <= sigma_max(M^-1) ||YCbCr error||, so the RGB RMS
    error is at most sigma_max(M^-1) sqrt(sum_c mean(t_c^2) / 12). Clipping to [0, 255] only helps."""
    x = _images(3)
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


def test_lower_quality_removes_high_frequencies() -> None:
    x = _images(4)
    energies = [_high_freq_energy(x)] + [_high_freq_energy(jpeg_filter(x, q)) for q in (50, 25, 15)]
    # Coarser steps zero more high-frequency coefficients. (At fine steps, e.g. q = 90, rounding
    # can add about step^2/12 of energy per coefficient, so only coarse qualities are compared.)
    assert all(a > b for a, b in zip(energies, energies[1:]))
    assert energies[-1] < 0.3 * energies[0]


def test_per_image_quality_and_padding() -> None:
    x = _images(3)
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


def test_filter_batch_replaces_five_percent() -> None:
    mean, std = torch.tensor([0.49, 0.48, 0.45]), torch.tensor([0.25, 0.24, 0.26])
    raw = _images(40).float() / 255
    x = (raw - mean[:, None, None]) / std[:, None, None]
    out, idx = filter_batch(x, mean, std, frac=0.05, generator=torch.Generator().manual_seed(0),
                            return_indices=True)
    assert len(idx) == 2  # max(1, int(0.05 * 40))
    changed = (out != x).flatten(1).any(1)
    assert changed.nonzero().flatten().sort().values.tolist() == sorted(idx.tolist())
    # Each replaced image is the renormalized JPEG filter of the original at one of 15/18/25.
    for i in idx.tolist():
        candidates = [((jpeg_filter(raw[i : i + 1] * 255, q)[0] / 255) - mean[:, None, None]) / std[:, None, None]
                      for q in (15, 18, 25)]
        assert min((out[i] - c).abs().max().item() for c in candidates) < 1e-4
    assert int((filter_batch(x[:8], mean, std) != x[:8]).flatten(1).any(1).sum()) == 1  # max(1, 0)
    with pytest.raises(ValueError, match="frac"):
        filter_batch(x, mean, std, frac=0.0)
    with pytest.raises(ValueError, match="std"):
        filter_batch(x, mean, [1.0, 2.0])


def _hard_l2_ece(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """sqrt(sum_b (n_b/n) (acc_b - conf_b)^2) with equal-width bins, by brute force."""
    total = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        sel = [(c, a) for c, a in zip(conf, correct) if (lo <= c < hi) or (b == n_bins - 1 and c == 1.0)]
        if sel:
            cs, as_ = zip(*sel)
            total += len(sel) / len(conf) * (np.mean(as_) - np.mean(cs)) ** 2
    return math.sqrt(total)


def _random_probs(n: int, c: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(n, c, generator=g, dtype=torch.float64) * 2.5, 1)
    labels = torch.randint(0, c, (n,), generator=g)
    return probs, labels


def test_soft_ece_limits() -> None:
    """T -> 0: membership becomes the nearest centre = the equal-width bin, so soft ECE -> the hard
    L2 ECE. T -> infinity: one uniform bin, so soft ECE -> |mean accuracy - mean confidence|."""
    probs, labels = _random_probs(300, 5, 1)
    conf, pred = probs.max(1)
    correct = (pred == labels).double()
    hard = _hard_l2_ece(conf.numpy(), correct.numpy(), 15)
    assert soft_ece(probs, labels, temperature=1e-7).item() == pytest.approx(hard, rel=1e-6)
    big = soft_ece(probs, labels, temperature=1e6).item()
    assert big == pytest.approx(abs(correct.mean() - conf.mean()).item(), rel=1e-3)
    # Jensen: the hard L2 ECE upper-bounds the usual (L1) binned ECE.
    l1 = sum(
        abs(correct[m].mean() - conf[m].mean()).item() * m.double().mean().item()
        for m in [(conf > b / 15) & (conf <= (b + 1) / 15) for b in range(15)]
        if m.any()
    )
    assert hard >= l1 - 1e-12


def test_soft_ece_is_differentiable_and_validates() -> None:
    logits = torch.randn(50, 4, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, 4, (50,))
    soft_ece(torch.softmax(logits, 1), labels).backward()
    assert torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="probs"):
        soft_ece(torch.randn(5, 3), torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature"):
        soft_ece(torch.full((2, 2), 0.5), torch.tensor([0, 1]), temperature=0.0)


def test_rectify_projection() -> None:
    g = torch.Generator().manual_seed(5)
    for _ in range(20):
        gm, gc = torch.randn(30, generator=g, dtype=torch.float64), torch.randn(30, generator=g, dtype=torch.float64)
        r = rectify(gm, gc)
        dot = gm @ gc
        if dot >= 0:
            assert torch.equal(r, gm)
        else:
            assert (r @ gc).item() == pytest.approx(0.0, abs=1e-10)
            # The projection is the closest point to g_m in {g : <g, g_c> >= 0}: compare with
            # random members of that half-space.
            for _ in range(20):
                v = torch.randn(30, generator=g, dtype=torch.float64)
                if v @ gc < 0:
                    v = v - (v @ gc) / (gc @ gc) * gc
                assert (r - gm).norm() <= (v - gm).norm() + 1e-12
        assert (r @ gc).item() >= -1e-10
    with pytest.raises(ValueError, match="g_main"):
        rectify(torch.ones(3), torch.ones(4))


class _CountingBackbone(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.calls = 0
        self.out_features = 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return F.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1).flatten(1)


@pytest.mark.parametrize("robust", [False, True])
def test_fgr_step_applies_the_rectified_gradient(robust: bool) -> None:
    """One step with SGD(lr=1): the parameter change equals minus the flat-vector rectification of
    g_m (main loss on the filtered batch) against g_c (soft ECE on the original batch)."""
    torch.manual_seed(0)
    mean, std = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]
    model = MoEModel(_CountingBackbone(), MoEHead(4, 3, num_experts=2, router_hidden=5)).double()
    x = ((_images(20, 16, 16, seed=3) / 255 - 0.5) / 0.25)
    y = torch.randint(0, 3, (20,))

    def loss_fn(out, labels):
        l = mixture_nll(out, labels)
        return robust_moe_loss(l, 2.0) if robust else l.mean()

    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    xf = filter_batch(x, mean, std, generator=torch.Generator().manual_seed(42))
    gm = torch.cat([g.flatten() for g in torch.autograd.grad(loss_fn(model(xf), y), params)])
    gc = torch.cat([g.flatten() for g in torch.autograd.grad(soft_ece(model(x).probs, y), params)])
    expected = gm if gm @ gc >= 0 else gm - (gm @ gc) / (gc @ gc) * gc

    model.backbone.calls = 0
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    info = fgr_step(model, loss_fn, x, y, opt, mean=mean, std=std, generator=torch.Generator().manual_seed(42))
    assert model.backbone.calls == 2  # exactly two backbone forwards per step
    step = torch.cat([(b - p.detach()).flatten() for b, p in zip(before, params)])
    assert torch.allclose(step, expected, atol=1e-10)
    assert bool(info["rectified"]) == bool(gm @ gc < 0)
    assert float(info["dot"]) == pytest.approx((gm @ gc).item(), rel=1e-6, abs=1e-12)


def test_fgr_step_needs_normalization_for_images() -> None:
    model = MoEModel(_CountingBackbone(), MoEHead(4, 3, num_experts=2, router_hidden=5))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="mean"):
        fgr_step(model, lambda o, y: mixture_nll(o, y).mean(), torch.randn(4, 3, 8, 8), torch.zeros(4, dtype=torch.long), opt)


def test_jpeg_filter_ignores_autocast() -> None:
    """Inside a bf16 autocast region (how lib.moe_methods runs FGR on CUDA) the filter keeps full precision."""
    x = _images(2).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = jpeg_filter(x, 18)
    assert inside.dtype == torch.float32
    assert torch.equal(inside, jpeg_filter(x, 18))
