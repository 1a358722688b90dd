"""Paper 1's evaluation protocol (lib.moe.evaluate) against hand-computed cases and closed forms."""

import math

import numpy as np
import pytest
import torch

from lib.calibration.posthoc import TemperatureScaler
from lib.calibration.metrics import bin_edges
from lib.moe.mocae import mocae_probs
from lib.moe.evaluate import T_MAX, T_MIN, _metric_block, evaluate, mocae_calibrate


def fit_temperature(logits, labels, **options):
    """The fitted T of a TemperatureScaler with ``options``."""
    return TemperatureScaler(**options).fit(logits, labels).temperature


def fit_expert_temperatures(expert_logits, labels, fit="paper"):
    """MoCaE's per-expert temperatures as lib.moe.evaluate.mocae_calibrate fits them."""
    return TemperatureScaler(protocol=fit, bounds=(T_MIN, T_MAX)).fit(expert_logits, labels).temperature


def paper_temperature(logits, labels, **kw):
    """The temperature fit of App. D.5 (lib.calibration.posthoc's paper protocol; its closed-form test on a
    quadratic is in tests/unit/calibration/test_posthoc.py)."""
    return fit_temperature(logits, labels, protocol="paper", **kw)


def _calibrated_logits(n, c, scale, seed=0):
    """Logits z*scale whose labels are drawn from softmax(z): the NLL minimiser is T* ~= scale."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, c, generator=g, dtype=torch.float64) * 2
    y = torch.multinomial(torch.softmax(z, dim=1), 1, generator=g).squeeze(1)
    return z * scale, y


# --- the temperature fit of App. D.5 --------------------------------------------------------------------


def test_paper_temperature_is_a_partial_fit_towards_the_minimiser():
    z, y = _calibrated_logits(4000, 10, 3.0)
    t_star = fit_temperature(z, y)
    t_paper = paper_temperature(z, y)
    assert t_star == pytest.approx(3.0, rel=0.1)
    # LBFGS lr 0.01 x 50 from T = 1 moves towards T* but stops far short of it.
    assert 1.0 < t_paper < 1.0 + 0.5 * (t_star - 1.0)
    # With the full quasi-Newton step (lr = 1) the same routine reaches the minimiser.
    assert paper_temperature(z, y, lr=1.0, max_iter=100) == pytest.approx(t_star, rel=1e-4)


def test_paper_temperature_can_jump_past_an_underconfident_minimiser():
    """Below T* = 1 the partial fit is no partial move: at T* = 0.6 it stops between 1 and T*, at
    T* = 0.5 it jumps past T* (seed 0) or down to the lower bound 1e-6 (seed 1), where every
    prediction is one-hot."""
    z, y = _calibrated_logits(4000, 10, 0.6)
    assert fit_temperature(z, y) < paper_temperature(z, y) < 1.0
    z, y = _calibrated_logits(4000, 10, 0.5)
    t_star = fit_temperature(z, y)
    assert t_star == pytest.approx(0.5, rel=0.05) and 0.01 < paper_temperature(z, y) < 0.5 * t_star
    z, y = _calibrated_logits(4000, 10, 0.5, seed=1)
    assert fit_temperature(z, y) > 0.4 and paper_temperature(z, y) == pytest.approx(1e-6)


def test_paper_temperature_leaves_calibrated_logits_alone():
    z, y = _calibrated_logits(4000, 10, 1.0)
    assert paper_temperature(z, y) == pytest.approx(1.0, abs=0.01)


# --- MoCaE ------------------------------------------------------------------------------------


def test_expert_temperatures_are_fitted_per_expert_on_unweighted_logits():
    z1, y = _calibrated_logits(3000, 5, 2.0, seed=1)
    z2 = 0.5 * z1
    z = torch.stack([z1, z2], dim=1)
    temps = fit_expert_temperatures(z, y)
    assert temps[0] == pytest.approx(paper_temperature(z1, y), rel=1e-9)
    assert temps[1] == pytest.approx(paper_temperature(z2, y), rel=1e-9)
    conv = fit_expert_temperatures(z, y, fit="converged")
    # scaling an expert's logits by 1/2 halves its NLL minimiser
    assert conv[1] == pytest.approx(conv[0] / 2, rel=1e-4)


def test_expert_temperatures_are_clamped():
    n = 400
    y = torch.arange(n) % 4
    sharp = 0.01 * torch.nn.functional.one_hot(y, 4).double()  # right but shy: T* -> 0
    noise = (
        torch.randn(n, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 5
    )  # unrelated: T* -> inf
    temps = fit_expert_temperatures(torch.stack([sharp, noise], dim=1), y, fit="converged")
    assert temps[0] == T_MIN and temps[1] == T_MAX


def test_mocae_mixture_by_hand_and_argmax_can_move():
    # two experts, two classes: softmax(z_k / T_k) mixed with r = (0.3, 0.7) in probability space
    z = torch.tensor([[[2.0, 0.0], [0.0, 1.0]]], dtype=torch.float64)
    r = torch.tensor([[0.3, 0.7]], dtype=torch.float64)
    p1 = 1 / (1 + math.exp(-2.0 / 2.0))  # expert 1, T = 2: P(class 0)
    p2 = 1 / (1 + math.exp(1.0 / 0.5))  # expert 2, T = 0.5: P(class 0)
    expect0 = 0.3 * p1 + 0.7 * p2
    out = mocae_probs(z, r, torch.tensor([2.0, 0.5], dtype=torch.float64))
    assert out[0, 0].item() == pytest.approx(expect0, rel=1e-12)
    # vanilla (all T = 1) predicts class 1 here: 0.3*0.881 + 0.7*0.269 = 0.452 < 0.5 ...
    van = mocae_probs(z, r, torch.ones(2, dtype=torch.float64))
    assert van[0].argmax().item() == 1
    # ... and flattening expert 2 (T = 10) flips it to class 0: 0.3*0.881 + 0.7*0.475 = 0.597. The
    # accuracy of MoCaE is *not* Vanilla's by construction (the paper's equality is empirical).
    flip = mocae_probs(z, r, torch.tensor([1.0, 10.0], dtype=torch.float64))
    by_hand = 0.3 / (1 + math.exp(-2.0)) + 0.7 / (1 + math.exp(0.1))
    assert flip[0, 0].item() == pytest.approx(by_hand, rel=1e-12) and by_hand > 0.5


def test_mocae_calibrate_returns_the_fitted_mixture():
    g = torch.Generator().manual_seed(3)
    n, k, c = 300, 3, 4
    zl = torch.randn(n, k, c, generator=g, dtype=torch.float64) * 3
    routing = torch.softmax(torch.randn(n, k, generator=g, dtype=torch.float64), dim=1)
    y = torch.randint(0, c, (n,), generator=g)
    val = {"expert_logits": zl, "routing": routing}
    val_p, test_p, temps = mocae_calibrate(val, y, val)
    assert np.allclose(temps, fit_expert_temperatures(zl, y))
    assert torch.allclose(val_p, mocae_probs(zl, routing, torch.tensor(temps, dtype=torch.float64)))
    assert torch.allclose(val_p, test_p)


# --- ECE bins and the evaluation ----------------------------------------------------------------


def test_metric_block_ece_by_hand_with_a_bin_edge():
    # 15 equal-width bins (lo, hi]: a confidence exactly on the edge 6/15 shares the bin (5/15, 6/15]
    # with 0.35, so the two form one bin: |acc - conf| = |1/2 - (e + 0.35)/2|.
    e = float(bin_edges(np.array([0.5]), 15, "width")[6])
    probs = np.array([[e, (1 - e) / 2, (1 - e) / 2], [0.35, 0.33, 0.32]])
    y = np.array([0, 1])  # first right, second wrong
    block = _metric_block(probs, probs, y, probs)
    assert block["ece"] == pytest.approx(abs(0.5 - (e + 0.35) / 2), abs=1e-12)
    # a hair above the edge the first example moves to the next bin: two bins of one example each
    probs[0, 0] += 1e-9
    probs[0, 1] -= 1e-9
    block = _metric_block(probs, probs, y, probs)
    assert block["ece"] == pytest.approx(0.5 * (1 - probs[0, 0]) + 0.5 * 0.35, abs=1e-9)


def test_metric_block_hand_computed():
    # 4 examples at confidence 0.95 (3 right) and 2 at 0.55 (1 right)
    probs = np.array([[0.95, 0.05]] * 4 + [[0.55, 0.45]] * 2)
    y = np.array([0, 0, 0, 1, 0, 1])
    block = _metric_block(probs, probs, y, probs)
    assert block["accuracy"] == pytest.approx(4 / 6)
    assert block["ece"] == pytest.approx(4 / 6 * 0.2 + 2 / 6 * 0.05)
    assert block["n"] == 6


def test_evaluate_all_mask_hard_mask_and_temperature():
    g = torch.Generator().manual_seed(5)
    n, c = 400, 3
    vp = torch.softmax(3 * torch.randn(n, c, generator=g), dim=1)
    vy = torch.randint(0, c, (n,), generator=g)
    tp = torch.softmax(3 * torch.randn(n, c, generator=g), dim=1)
    ty = torch.randint(0, c, (n,), generator=g)
    hard = torch.arange(n) % 4 == 0
    keep = torch.arange(n) < 300
    m, probs = evaluate(vp, vy, tp, ty, hard, all_mask=keep)
    assert m["all"]["n"] == 300 and m["hard"]["n"] == 100
    from lib.calibration.posthoc import probs_to_logits

    vnp = vp.double().numpy()
    vnp = vnp / vnp.sum(1, keepdims=True)
    assert m["temperature"] == pytest.approx(paper_temperature(probs_to_logits(vnp), vy.numpy()), rel=1e-9)
    assert m["temperature_converged"] == pytest.approx(fit_temperature(probs_to_logits(vnp), vy.numpy()), rel=1e-6)
    pnp = probs[:300]
    assert m["all"]["accuracy"] == pytest.approx(float((pnp.argmax(1) == ty.numpy()[:300]).mean()))
    full, _ = evaluate(vp, vy, tp, ty, hard)
    assert full["all"]["n"] == n


def test_evaluate_reads_each_subset_on_its_own_rows():
    """The hard block is the metrics of the hard rows alone (ECE, ECE+TS at the fitted T, NLL), a
    group's ECE is its rows' alone, and the routing entropy of the hard subset is the mean of
    -sum_k r_k log r_k over its rows: hand-made routings, 0 for a one-hot row, log 2 for (1/2, 1/2)."""
    from lib.calibration.metrics import ece

    g = torch.Generator().manual_seed(7)
    n, c = 200, 3
    vp, vy = torch.softmax(2 * torch.randn(n, c, generator=g), dim=1), torch.randint(0, c, (n,), generator=g)
    tp, ty = torch.softmax(2 * torch.randn(n, c, generator=g), dim=1), torch.randint(0, c, (n,), generator=g)
    hard, grp = torch.arange(n) % 5 == 0, torch.arange(n) % 2 == 1
    routing = torch.tensor([[1.0, 0.0], [0.5, 0.5]]).repeat(n // 2, 1)  # even rows one-hot, odd rows even
    m, probs = evaluate(vp, vy, tp, ty, hard, test_routing=routing, groups={"odd": grp})
    h, y = hard.numpy(), ty.numpy()
    assert m["hard"]["ece"] == pytest.approx(ece(probs[h], y[h], n_bins=15))
    scaled = torch.softmax(torch.log(torch.as_tensor(probs)) / m["temperature"], dim=1).numpy()
    assert m["hard"]["ece_ts"] == pytest.approx(ece(scaled[h], y[h], n_bins=15), abs=1e-9)
    assert m["hard"]["nll"] == pytest.approx(float(-np.log(probs[h][np.arange(h.sum()), y[h]]).mean()))
    assert m["groups"]["odd"]["ece"] == pytest.approx(ece(probs[grp.numpy()], y[grp.numpy()], n_bins=15))
    # hard rows are 0, 5, 10, ...: every other one odd, so half have entropy log 2
    assert m["routing_entropy"]["hard"] == pytest.approx(math.log(2) / 2)
    assert m["routing_entropy"]["all"] == pytest.approx(math.log(2) / 2)


def test_validation_errors_name_the_argument():
    z = torch.zeros(4, 2, 3)
    with pytest.raises(ValueError, match="fit"):
        mocae_calibrate(
            {"expert_logits": z, "routing": torch.full((4, 2), 0.5)}, torch.tensor([0, 1, 2, 0]), {}, fit="best"
        )
    with pytest.raises(ValueError, match="lr"):
        paper_temperature(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), lr=0.0)
    with pytest.raises(ValueError, match="logits"):
        paper_temperature(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long))
    p = torch.full((4, 2), 0.5)
    y = torch.tensor([0, 1, 0, 1])
    with pytest.raises(ValueError, match="hard_mask"):
        evaluate(p, y, p, y, torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="all_mask"):
        evaluate(p, y, p, y, torch.ones(4, dtype=torch.bool), all_mask=torch.ones(2, dtype=torch.bool))
    with pytest.raises(ValueError, match="val"):
        mocae_calibrate({"routing": p}, y, {"routing": p})
