"""Issue #17, item 5: scalar and array inputs that used to slip through public functions (raw
TypeErrors, NaN results, silent bounds, GiB allocations) now raise a ValueError naming the argument."""

import numpy as np
import pytest
import torch

from lib.calibration import posthoc as calibrate
from lib.ccc import cascade
from lib.ccc import cleaning
from lib.l2d import surrogates as l2d
from lib.calibration import metrics
from lib.rr import losses as reweighted
from lib.moe import robust

RNG = np.random.default_rng(0)
Z = RNG.normal(size=(60, 4))
Y = RNG.integers(0, 4, size=60)
P = torch.softmax(torch.tensor(Z), dim=1).numpy()
CONF, OUTCOME = P.max(1), (P.argmax(1) == Y).astype(float)


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: metrics.reliability_table(CONF, OUTCOME, level="x"), "level"),
        (lambda: metrics.reliability_table(CONF, OUTCOME, level=1.5), "level"),
        (lambda: robust.cvar(torch.rand(10), "0.5"), "alpha"),
        (lambda: robust.cvar(torch.rand(10), 1.5), "alpha"),
        (lambda: cascade.split_halves(10, cal_fraction="a"), "cal_fraction"),
        (lambda: cascade.split_halves(10, seed="a"), "seed"),
        (lambda: calibrate.apply_temperature(Z, "abc"), "T"),
        (lambda: cleaning.inject_symmetric_noise(Y, 4, "3"), "rate"),
        (lambda: reweighted.get_loss("au", covrage=0.5), "kw"),
        (lambda: reweighted.kde_xe_loss(torch.tensor(Z), torch.tensor(Y), weight="a"), "weight"),
        (lambda: metrics.ece(P, Y, n_bins=10**9), "n_bins"),
        (lambda: metrics.reliability_table(CONF, OUTCOME, n_bins=10**9), "n_bins"),
        (lambda: l2d.system_accuracy(np.zeros((0, 3)), np.zeros(0, int), np.zeros((0, 1)), 2), "logits"),
        (lambda: l2d.system_accuracy(np.zeros((2, 3)), [0, 1], np.array([[np.nan], [0.0]]), 2), "expert_preds"),
        (lambda: calibrate.TemperatureScaler().fit(Z * 1e6, Y), "logits"),
    ],
)
def test_bad_input_raises_a_value_error_naming_the_argument(call, argument) -> None:
    with pytest.raises(ValueError, match=rf"^{argument}\b"):
        call()


def test_misspelled_loss_keyword_is_refused_at_get_loss_with_a_suggestion() -> None:
    with pytest.raises(ValueError, match="did you mean 'coverage'"):
        reweighted.get_loss("au", covrage=0.5)
    loss = reweighted.get_loss("au", coverage=0.5)
    assert torch.isfinite(loss(torch.tensor(Z), torch.tensor(Y)))


def test_low_precision_probabilities_are_accepted() -> None:
    z = torch.tensor(RNG.normal(size=(500, 10)) * 3)
    y = torch.tensor(RNG.integers(0, 10, size=500))
    full = metrics.ece(torch.softmax(z, 1), y)
    assert metrics.ece(torch.softmax(z.half(), 1), y) == pytest.approx(full, abs=5e-3)
    assert metrics.ece(torch.softmax(z, 1).bfloat16(), y) == pytest.approx(full, abs=2e-2)
    assert metrics.nll(torch.softmax(z.half(), 1), y) > 0


def test_uninformative_labels_still_fit_to_the_bound_without_error() -> None:
    # labels unrelated to moderate logits: the optimum is uniform (T -> infinity), not a scale problem
    T = calibrate.TemperatureScaler().fit(RNG.normal(size=(500, 4)) * 5, RNG.integers(0, 4, 500)).temperature
    assert np.isfinite(T) and T > 5


def test_system_accuracy_is_a_number_on_valid_input() -> None:
    z = np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])  # first predicts class 0, second defers
    assert l2d.system_accuracy(z, [0, 1], np.array([[0], [1]]), 2) == 1.0


# ---- issue 25, item 4: public functions outside the core metrics -----------------------------------

from lib.calibration import ece_kde  # noqa: E402
from lib.ccc import confidence  # noqa: E402
from lib.moe import heads as moe  # noqa: E402
from lib.data import jpeg  # noqa: E402
from lib.rr import weights as reweighted_weights  # noqa: E402

EDGES = np.linspace(0, 1, 6)
EMPTY_Z, EMPTY_Y = torch.zeros(0, 4), torch.zeros(0, dtype=torch.long)


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: metrics.bin_index(np.array([0.2, np.nan]), EDGES), "conf"),
        (lambda: moe.MoEHead(4, 3)(torch.tensor([[np.nan, 0.0, 0.0, 0.0]])), "h"),
        (lambda: moe.MoEHead(4, 3)(torch.zeros(2, 4, dtype=torch.int64)), "h"),
        (lambda: moe.SingleExpertHead(4, 3)(torch.full((2, 4), float("inf"))), "h"),
        (lambda: l2d.softmax_l2d_loss(EMPTY_Z, EMPTY_Y, torch.zeros(0, 1)), "logits"),
        (lambda: l2d.ova_l2d_loss(EMPTY_Z, EMPTY_Y, torch.zeros(0, 1)), "logits"),
        (lambda: reweighted.focal_loss(EMPTY_Z, EMPTY_Y), "logits"),
        (lambda: reweighted.get_loss("xe")(EMPTY_Z, EMPTY_Y), "logits"),
        (lambda: cascade.advantage_table(np.array([0.0, 1.7]), 3, [0.5, 0.6], [0.7, 0.8], [1, 0], [1, 1]), "bins"),
        (lambda: confidence.fit_confidence("none", Z, Y + 0.5), "labels"),
        (lambda: confidence.model_outputs(Z, Y, [0.5, 1, 2], [3, 4]), "cal_idx"),
        (lambda: confidence.model_outputs(Z, Y, [0, 1, 2], [3, 4.5]), "test_idx"),
        (lambda: cleaning.inject_symmetric_noise(np.array([0, 1, 2] * 10), 3.5, 0.5), "num_classes"),
        (lambda: cleaning.basic_flags([0, 1], [0, 1], [-1, 1]), "labels"),
        (lambda: cleaning.basic_flags([0, -2], [0, 1], [0, 1]), "pred_a"),
        (lambda: ece_kde.ece_kde(torch.tensor(P), torch.tensor(Y), bandwidth="0.1"), "bandwidth"),
        (lambda: cascade.apgr([0, 1], [0.5, 0.9], "0.5", 0.9), "weak"),
        (lambda: cascade.apgr([0, 1], [0.5, 0.9], 0.5, None), "strong"),
        (lambda: cascade.random_curve("0.5", 0.9), "acc_small"),
        (lambda: cascade.random_curve(0.5, 0.9, "3"), "n_points"),
        (lambda: cascade.random_curve(0.5, 0.9, 0), "n_points"),
        (lambda: reweighted_weights.loss_gradient("focal", [0.5], gamma="2"), "gamma"),
        (lambda: cleaning.ranking_curve(np.arange(10), np.zeros(10, bool), n_points=0), "n_points"),
        (lambda: cascade.advantage_table(np.zeros(2, int), 0, [0.5, 0.6], [0.7, 0.8], [1, 0], [1, 1]), "n_bins"),
        (lambda: jpeg.jpeg_filter(torch.full((1, 3, 8, 8), 300.0), 50), "images"),
        (lambda: jpeg.jpeg_filter(torch.full((1, 3, 8, 8), -5.0), 50), "images"),
        (lambda: l2d.coverage_per_expert(torch.zeros(0, 4), 3), "logits"),
    ],
)
def test_issue25_bad_input_raises_one_line_naming_the_argument(call, argument) -> None:
    with pytest.raises(ValueError, match=rf"^{argument}\b") as err:
        call()
    assert "\n" not in str(err.value)


def test_issue25_valid_inputs_keep_their_numbers() -> None:
    """numpy and torch inputs, integral floats, float64 features and float16 probabilities still give
    the values the definitions give."""
    conf = np.array([0.0, 0.2, 0.21, 0.999, 1.0])
    idx = metrics.bin_index(conf, EDGES)
    assert idx.tolist() == [0, 0, 1, 4, 4] == metrics.bin_index(torch.tensor(conf).half().float(), EDGES).tolist()
    head = moe.MoEHead(4, 3)
    h = torch.randn(5, 4)
    torch.testing.assert_close(head(h.double()).probs, head(h).probs)  # float64 features: cast, same probs
    # one example keeps its mean: -log softmax(2, 0)_0 = log(1 + e^-2)
    one = reweighted.get_loss("xe")(torch.tensor([[2.0, 0.0]]), torch.tensor([0]))
    assert one.item() == pytest.approx(np.log1p(np.exp(-2.0)))
    table = cascade.advantage_table(np.array([0.0, 2.0]), 3, [0.5, 0.6], [0.7, 0.8], [1, 0], [1, 1])
    assert table["count"].tolist() == [1, 0, 1] and table["advantage"][0] == pytest.approx(0.2)
    noisy, flipped = cleaning.inject_symmetric_noise(np.array([0, 1, 2] * 10), np.int64(3), 0.5)
    assert flipped.sum() == 15 and np.all(noisy[flipped] != np.array([0, 1, 2] * 10)[flipped])
    assert cleaning.basic_flags([0, 1], torch.tensor([0, 2]), np.array([1.0, 1.0])).tolist() == [True, False]
    assert cascade.random_curve(np.float64(0.5), 0.9, 3).accuracy.tolist() == pytest.approx([0.9, 0.7, 0.5])
    assert cascade.apgr(np.array([0.0, 1.0]), [0.5, 0.9], np.float32(0.5), 0.9) == pytest.approx(0.5)
    half = torch.tensor(P).half()
    assert float(ece_kde.ece_kde(half, torch.tensor(Y), bandwidth=np.float64(0.1))) >= 0
    assert reweighted_weights.loss_gradient("xe", [0.5], gamma=2)[0] == pytest.approx(-2.0)
    img = torch.full((1, 3, 8, 8), 128.0)
    assert torch.allclose(jpeg.jpeg_filter(img.to(torch.uint8), 50), jpeg.jpeg_filter(img, 50))
    assert l2d.coverage_per_expert(torch.tensor([[5.0, 0.0, 0.0, 9.0]]), 3).tolist() == [0.0, 1.0]


# ---- issue 40: the last unclear and silent probes ----------------------------------------------------

from lib.ccc import cascade as ccc_cascade  # noqa: E402
from lib.moe import fgr  # noqa: E402

_W = torch.ones(2, requires_grad=True)
_CORRECT_A, _CORRECT_B = [1, 0, 1, 1], [1, 1, 0, 1]
_FLAGS = (np.array([0.9, 0.8, 0.7]), [0, 1, 1], np.array([0.6, 0.9, 0.8]), [0, 1, 0], [1, 1, 0], [True, False, True])


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: fgr.two_gradients((_W**2).sum(), _W.sum(), params=[]), "params"),
        (lambda: reweighted_weights.loss_weight("focal", [0.1, 0.5], gamma=-1), "gamma"),
        (lambda: reweighted_weights.loss_weight("focal", [0.1, np.nan]), "p"),
        (lambda: ccc_cascade.random_routing_curve(_CORRECT_A, _CORRECT_B, seed=-1), "seed"),
        (lambda: robust.robust_moe_loss([1.0, 2.0], lam=1e308), "lam"),
        (lambda: robust.tilted_weights([1.0, 2.0], lam=1e308), "lam"),
        (lambda: robust.entropic_risk([1.0, 2.0], lam=1e308), "lam"),
        (lambda: cleaning.calibrated_rule_curve(*_FLAGS, n_bins=0), "n_bins"),
    ],
)
def test_issue40_bad_input_raises_one_line_naming_the_argument(call, argument) -> None:
    with pytest.raises(ValueError, match=rf"^{argument}\b") as err:
        call()
    assert "\n" not in str(err.value)


def test_issue40_valid_neighbours_keep_their_values() -> None:
    """The inputs next to each refused one still give the values of the definitions."""
    ga, gb = fgr.two_gradients((_W**2).sum(), _W.sum(), params=iter([_W]))[0]  # any iterable of tensors
    assert ga.tolist() == [2.0, 2.0] and gb.tolist() == [1.0, 1.0]
    assert reweighted_weights.loss_weight("focal", [0.5], gamma=0).tolist() == [1.0]  # gamma = 0: no reweighting
    curve = ccc_cascade.random_routing_curve(_CORRECT_A, _CORRECT_B, n_points=2, seed=0)
    assert curve.accuracy.tolist() == pytest.approx([0.75, 0.75])  # all on the large model, then all on the small
    # lam x losses within float range: the softmax weights put everything on the largest loss
    assert float(robust.robust_moe_loss([1.0, 2.0], lam=1e300)) == pytest.approx(2.0)
    table = cleaning.calibrated_rule_curve(*_FLAGS, n_bins=1)  # one bin: the basic rule, flags {0}
    assert (table["precision"].tolist(), table["detection"].tolist()) == ([1.0], [0.5])


def test_issue40_moe_head_takes_float64_features_as_their_float32_cast() -> None:
    """MoEHead on float64 input is valid by design (features from numpy are float64): the features
    are cast to the head's parameter dtype, so the output is the float32 features' output."""
    head = moe.MoEHead(4, 3)
    h = torch.randn(6, 4, dtype=torch.float64)
    out = head(h)
    assert out.probs.dtype == torch.float32
    torch.testing.assert_close(out.probs, head(h.float()).probs, rtol=0, atol=0)


def test_issue40_an_explicit_root_without_the_data_raises_and_never_falls_back(tmp_path) -> None:
    """load_resnet50_logits(root=<empty folder>) names the folder, even where ../shared/data has the
    logits; a root that holds them is read."""
    from lib.data.locate import DataNotFoundError
    from lib.data.logits import load_resnet50_logits

    with pytest.raises(DataNotFoundError, match=r"^data root .*: holds no usable copy of dataset 'cifar10-resnet50"):
        load_resnet50_logits("ce", root=tmp_path)
    folder = tmp_path / "cifar10-resnet50-logits"
    folder.mkdir()
    np.savez(folder / "resnet50_ce_test.npz", logits=np.eye(3, 10), targets=np.arange(3))
    z, y = load_resnet50_logits("ce", root=tmp_path)
    assert z.shape == (3, 10) and y.tolist() == [0, 1, 2]
