"""Papers 2 and 4: the four notebooks run at smoke scale and publish sane numbers.

What must hold by construction on the smoke data: the mixture's clusters 1 and 4 are nearly
separable and 2 and 3 overlap strongly (lib.l2d.gaussian_mixture's fixed means and covariances); every sweep of the
L2D pages has one run per (point, surrogate, seed); the inverse-focal sign threshold is a closed
form; the synthetic "XE" logits are over-confident (scaled), so temperature scaling fitted on one
half lowers ECE on the other; no released run is degenerate at smoke scale.
"""

from __future__ import annotations

import math

import pytest

import nbformat

from lib import config
from calibook.book import executed_path
from lib.report import KINDS, NOT_TESTABLE, VERDICTS

pytestmark = pytest.mark.notebook


def _unit(x: float) -> bool:
    return isinstance(x, float) and math.isfinite(x) and 0.0 <= x <= 1.0


def _claims(out: dict) -> list[dict]:
    """The page's published claims table: rows with a verdict, the paper's own and a kind."""
    rows = out["claims"]
    assert rows and all(r["verdict"] in VERDICTS and r.get("kind", KINDS[0]) in KINDS for r in rows)
    return rows


def _lesson(name: str, shown: str) -> None:
    """The executed page shows its formula functions' output (``shown``: text of that output) and
    hides its setup cells (page.start / page.finish) in the book."""
    nb = nbformat.read(executed_path(name, "smoke"), as_version=4)
    text = "".join(
        str(o.get("data", {}).get("text/plain", "")) for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert shown in text, f"{name}: the method cell's output is not on the page"
    for call in ("page.start(", "page.finish("):
        cell = next(c for c in nb.cells if c.cell_type == "code" and call in c.source)
        assert "remove-cell" in cell.metadata.get("tags", []), f"{name}: {call} is not hidden"


def test_l2d_gaussians_smoke(smoke_published) -> None:
    out = smoke_published("l2d_gaussians")
    cfg = config.settings("l2d_gaussians", "smoke")
    assert out["scale_summary"].startswith("smoke:")
    assert out["gauss_runs"] == (len(cfg["num_experts"]) + len(cfg["dependence_p"])) * 2 * cfg["seeds"]
    pairs = out["gauss_pair_bayes"]
    assert pairs["1 vs 4"] > 0.99 and pairs["2 vs 3"] < 0.85  # the picture of Figure 3
    assert 0.5 < out["gauss_bayes_accuracy"] < 0.95
    assert all(_unit(v) for v in out["gauss_all_ece"]) and all(_unit(v) for v in out["gauss_all_accuracy"])
    assert min(out["gauss_all_accuracy"]) > 0.4  # far above chance (0.25) even after a few epochs
    for s in ("softmax", "ova"):
        assert _unit(out[f"gauss_random_ece_{s}_hi"])
    assert out["gauss_claims"] and set(out["gauss_claims"].values()) <= set(VERDICTS)
    assert {r["paper_own"] for r in _claims(out)} == {NOT_TESTABLE}  # the paper's figures are plots
    _lesson("l2d_gaussians", "(tensor(3.5066), tensor(3.5066))")  # the softmax loss by lib and by formula


def test_l2d_cifar10_smoke(smoke_published) -> None:
    out = smoke_published("l2d_cifar10")
    cfg = config.settings("l2d_cifar10", "smoke")
    assert out["scale_summary"].startswith("smoke: synthetic images")
    n_points = len(cfg["num_experts"]) + len(cfg["dependence_p"]) + len(cfg["specialized_experts"])
    assert out["cifar_runs"] == n_points * 2 * cfg["seeds"]
    assert all(_unit(v) for v in out["cifar_all_ece"]) and all(_unit(v) for v in out["cifar_all_accuracy"])
    assert _unit(out["cifar_backbone_test_accuracy"])
    assert out["cifar_claims"] and set(out["cifar_claims"].values()) <= set(VERDICTS)
    assert len(_claims(out)) == 7 and out["scale_summary"].endswith("; 1 seed")
    _lesson("l2d_cifar10", "(tensor([[0.3750, 0.2308]]), tensor([[0.3750, 0.2308]]))")  # OvA's estimates, twice


TRAINED_LOSSES = ("xe", "fl53", "inverse_focal", "dual_focal", "kde_xe", "aurc", "au", "au_margin", "au_entropy")


def test_losses_cifar10_smoke(smoke_published) -> None:
    out = smoke_published("losses_cifar10")
    assert out["scale_summary"].startswith("smoke: synthetic images")
    assert out["rr_inverse_focal_gamma_threshold"] == pytest.approx(3.5911, abs=1e-3)
    for name in TRAINED_LOSSES:
        for key in ("accuracy", "ece", "ece_a", "cwece", "ece_ts", "cwece_ts"):
            assert _unit(out[f"rr_{name}_{key}"]), (name, key)
        assert out[f"rr_{name}_temperature"] > 0
        assert -1 <= out[f"rr_{name}_conf_gap"] <= 1
    assert len(out["rr_sweep_val_ece"]) == 2 and all(0 <= v <= 100 for v in out["rr_sweep_val_ece"])
    assert set(out["rr_train_accuracy"]) == set(TRAINED_LOSSES)  # heads on features: each keeps its fit
    assert all(_unit(v) for v in out["rr_train_accuracy"].values())
    assert set(out["rr_claims"].values()) <= set(VERDICTS)
    assert out["rr_claims"]["the inverse focal gradient turns positive for gamma above about 3.5"] == "held"
    checks = [r for r in _claims(out) if r["kind"] == KINDS[1]]
    assert [r["claim"] for r in checks] == ["the inverse focal gradient turns positive for gamma above about 3.5"]
    assert "AU coverage 0.88" in out["scale_summary"]  # Table 3's ResNet-50 coverage, the row compared with
    _lesson("losses_cifar10", "focal, gamma 0")


def test_losses_released_logits_smoke(smoke_published) -> None:
    out = smoke_published("losses_released_logits")
    assert out["scale_summary"].startswith("smoke: synthetic")
    assert out["released_failed_runs"] == {}
    assert sorted(out["released_losses"]) == ["aurc", "dual_focal", "fl53", "kde_xe", "xe"]
    for name in out["released_losses"]:
        for key in ("accuracy", "ece", "ece_a", "cwece", "ece_ts", "cwece_ts"):
            assert _unit(out[f"released_{name}_{key}"]), (name, key)
    # the synthetic XE logits are over-confident by construction: TS on one half helps the other
    assert out["released_xe_ece_ts"] < out["released_xe_ece"]
    assert out["released_xe_temperature"] > 1 and out["released_xe_temperature_nll"] > 1
    # on misclassified examples: eq. 33 (largest competitor) >= released (largest below p_t) >= eqs. 34-35 (none)
    w = out["released_dual_focal_weights_misclassified"]
    assert w["eq33"] >= w["released"] >= w["eqs34_35"] > 0
    assert set(out["released_claims"].values()) <= set(VERDICTS)
    # gamma cross-validation (App. Fig. 4 / App. Table 2): one chosen gamma per map and loss, on the grid
    cfg = config.settings("losses_released_logits", "smoke")
    for chosen in (out["released_gamma_chosen"], out["released_gamma_chosen_ece"]):
        assert set(chosen) == set(cfg["gamma_maps"])
        for by_loss in chosen.values():
            assert set(by_loss) == set(cfg["gamma_losses"]) and set(by_loss.values()) <= set(cfg["gammas"])
    # focal loss with gamma > 0 fits a softer temperature than cross-entropy (gamma = 0) ...
    t = out["released_gamma_focal_temperature"]
    assert len(t) == len(cfg["gammas"]) and t[-1] > t[1] > t[0] > 1
    # ... which the validation NLL, a proper scoring rule, does not reward here: gamma 0 is chosen
    assert out["released_gamma_chosen"]["temperature"]["focal"] == 0.0
    # every loss at gamma = 0 is cross-entropy: one validation NLL per map
    at0 = out["released_gamma_nll_at_0"]
    for kind in cfg["gamma_maps"]:
        same = [v for k, v in at0.items() if k.startswith(f"{kind}/")]
        assert len(same) == len(cfg["gamma_losses"]) and max(same) - min(same) < 1e-9
    assert (
        "inverse focal: every gamma >= 4 has a higher validation NLL than every gamma below it"
        in out["released_claims"]
    )
    kinds = {r["claim"]: r["kind"] for r in _claims(out)}
    # the book's expectation, not a theorem
    assert kinds["inverse focal: every gamma >= 4 has a higher validation NLL than every gamma below it"] == KINDS[2]


# --- the overviews' "Try it" commands, at smoke scale -------------------------------------------


def test_try_it_more_seeds_and_fewer_epochs_on_the_mixture(smoke_published) -> None:
    """book/l2d/overview.md: ``-p seeds 2`` and ``-p epochs 30`` on l2d_gaussians."""
    out = smoke_published("l2d_gaussians", seeds=2)
    assert out["gauss_runs"] == 2 * smoke_published("l2d_gaussians")["gauss_runs"]
    assert "2 seeds" in out["scale_summary"] and all("2 seeds" in r["ours"] for r in _claims(out))
    out = smoke_published("l2d_gaussians", epochs=30)
    assert "up to 30 epochs" in out["scale_summary"] and len(_claims(out)) == 5


def test_try_it_the_au_coverage_moves_only_the_au_runs(smoke_published) -> None:
    """book/rr/overview.md: ``python -m calibook run losses_cifar10 -p coverage 0.5``."""
    out, base = smoke_published("losses_cifar10", coverage=0.5), smoke_published("losses_cifar10")
    assert "AU coverage 0.5," in out["scale_summary"]
    assert out["rr_xe_ece"] == base["rr_xe_ece"]  # cross-entropy ignores the coverage (same seed, same head)
    assert out["rr_au_ece"] != base["rr_au_ece"]
    out = smoke_published("losses_cifar10", nu=1.0)
    assert "nu 1;" in out["scale_summary"] and out["rr_xe_ece"] == base["rr_xe_ece"]


def test_losses_cifar10_reads_published_runs_and_trains_nothing(smoke_notebook, tmp_path, monkeypatch) -> None:
    """The paper-scale path at smoke size: the queue publishes every run the page needs, the loss
    runs leave the cache, and the page with ``train="no"`` shows the published numbers without
    training any (the frozen smoke backbone stays cached: the queue does not publish it)."""
    import shutil

    import calibook.gpu.queue as q
    from calibook.page import read_published

    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    q.run_queue(["losses_cifar10"], minutes=30, scale="smoke", log=lambda s: None)
    shutil.rmtree(tmp_path / "cache" / "runs" / "rr_losses")
    out = read_published(smoke_notebook("losses_cifar10", train="no"))
    xe = next(r for i, r in q.published("losses_cifar10").items() if i.startswith("losses_cifar10/xe/"))
    assert out["rr_xe_ece"] == pytest.approx(xe["metrics"]["ece"])
    assert len(out["rr_sweep_val_ece"]) == 2
    assert not list((tmp_path / "cache" / "runs").glob("rr_losses/*/result.json"))  # nothing trained here
