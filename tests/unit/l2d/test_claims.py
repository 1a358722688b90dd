"""Paper 2's pages (lib.l2d.pages) and their claims: the accuracy floor's gate on hand-made runs
(lib.l2d.results.gated_claims: claims judged when the classifier learned, inconclusive when it did
not), the published means and the Bayes accuracy."""

from __future__ import annotations

import numpy as np
import pytest

from lib.config import settings
from lib.l2d import results as lr
from lib.l2d.gaussian_mixture import GAUSSIAN_MEANS, gaussian_mixture
from lib.l2d.pages import l2d_cifar10 as cifar
from lib.l2d.pages import l2d_gaussians as gauss
from lib.l2d.pages.l2d_cifar10 import CIFAR_REFERENCE_ACCURACY
from lib.report import floor_rule


def test_cifar_claims_are_judged_above_the_floor_and_inconclusive_below(l2d_fake_runs):
    runs = l2d_fake_runs(0.03, 0.0, 0.01)
    balanced = np.repeat(np.arange(10), 5)  # chance 1/10: floor 0.1 + 0.8 x (0.9 - 0.1) = 0.74

    def claims(accuracy: float, labels: np.ndarray) -> tuple[set[str], str]:
        table, why = lr.gated_claims(runs.assign(classifier_accuracy=accuracy), CIFAR_REFERENCE_ACCURACY, labels)
        assert why.startswith(floor_rule() + " ")  # the rule, then this run's case
        return set(table["verdict"]), why.removeprefix(floor_rule() + " ")

    verdicts, why = claims(CIFAR_REFERENCE_ACCURACY, balanced)
    assert why.startswith("The model is judged") and verdicts == {"held"}
    verdicts, why = claims(0.2, balanced)
    assert "did not learn" in why and verdicts == {"inconclusive at this scale"}
    # chance is the test labels' majority rate: 0.75 passes a balanced set's 0.74, not 0.3 + 0.8 x 0.6 = 0.78
    assert claims(0.75, balanced)[1].startswith("The model is judged")
    skewed = np.r_[np.zeros(15, int), np.repeat(np.arange(1, 10), 4)[:35]]  # 30% in class 0
    verdicts, why = claims(0.75, skewed)
    assert "chance 0.300" in why and verdicts == {"inconclusive at this scale"}
    with pytest.raises(ValueError, match="classifier_accuracy"):
        lr.gated_claims(runs, CIFAR_REFERENCE_ACCURACY, balanced)  # the hand-made runs have none


def test_gaussians_claims_use_the_bayes_accuracy_as_reference(l2d_fake_runs):
    runs = l2d_fake_runs(0.03, 0.0, 0.01)
    labels = np.repeat(np.arange(4), 10)  # chance 1/4
    table, _ = lr.gated_claims(runs.assign(classifier_accuracy=0.8), 0.85, labels)
    assert set(table["verdict"]) == {"held"}  # 0.8 >= 0.25 + 0.8 * (0.85 - 0.25) = 0.73
    table, _ = lr.gated_claims(runs.assign(classifier_accuracy=0.7), 0.85, labels)
    assert set(table["verdict"]) == {"inconclusive at this scale"}


def test_published_means_read_the_ends_of_each_sweep(l2d_fake_runs):
    summary = lr.summarize(l2d_fake_runs(0.03, 0.0, 0.01), metrics=["ece", "system_accuracy", "ece_random_expert"])
    cfg = {"num_experts": [1, 4, 8], "dependence_p": [0.2, 0.95]}
    pub = gauss.sweep_ends(summary, cfg)
    assert pub["gauss_ece_softmax_j8"] == pytest.approx(0.05 + 0.03 * 8, abs=0.002)
    assert pub["gauss_acc_ova_j8"] == pytest.approx(0.91)
    table = gauss.paper_table(pub, cfg)
    assert table["ours"].iloc[0] == f"{pub['gauss_ece_softmax_j1']:.3f} -> {pub['gauss_ece_softmax_j8']:.3f}"
    # Fig. 1a's ends as the authors' repository holds them (mog_results.ipynb), where both are in it
    assert table["paper"].iloc[0] == "rises (Fig. 1a); the authors' repository: 0.036 -> 0.132"
    assert table["paper"].iloc[1] == "roughly flat (Fig. 1a); the authors' repository: 0.031 -> 0.027"
    to_four = gauss.paper_table(
        gauss.sweep_ends(summary, {**cfg, "num_experts": [1, 4]}), {**cfg, "num_experts": [1, 4]}
    )
    assert to_four["paper"].iloc[0].endswith("0.036 -> 0.042")
    with pytest.raises(ValueError, match="no summary row"):
        cifar.sweep_ends(summary, {**cfg, "num_experts": [1, 8], "specialized_experts": [1, 5]})
    with pytest.raises(ValueError, match="no summary row"):
        lr.pick(summary, "specialized", 1, "ova", "ece")


def test_scale_lines_say_what_the_plan_runs():
    for scale in ("smoke", "cpu", "paper"):
        cfg = settings("l2d_cifar10", scale)
        n = len({it.seed for it in cifar.PAGE.plan(scale)})
        assert cifar.scale_line(cfg).endswith(f"{n} seed{'s' if n != 1 else ''}")
        cfg = settings("l2d_gaussians", scale)
        n = len({it.seed for it in gauss.PAGE.plan(scale)})
        assert f"{n} seed{'s' if n != 1 else ''}, experts" in gauss.scale_line(cfg)
        # early stopping is said only where its patience can end a run before the last epoch
        stops = cfg["patience"] < cfg["epochs"]
        assert ("with early stopping" in gauss.scale_line(cfg)) == stops
        assert ("is never reached" in gauss.scale_line(cfg)) == (not stops)
    assert "is never reached" in gauss.scale_line(settings("l2d_gaussians", "smoke"))  # patience 20, 15 epochs


def test_bayes_accuracy_beats_the_nearest_mean_rule():
    pairs, overall, labels = gauss.bayes_accuracy(n=20000, seed=5)
    assert len(pairs) == 6 and len(labels) == 20000
    x, y, _ = gaussian_mixture(20000, seed=5)
    nearest = np.argmin(((x[:, None, :] - np.asarray(GAUSSIAN_MEANS)[None]) ** 2).sum(-1), 1)
    assert overall >= float((nearest == y).mean()) - 0.005  # the Bayes rule is optimal (up to sampling noise)
    assert 0.25 < overall < 1
