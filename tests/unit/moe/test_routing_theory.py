"""The routing-theory page's numerical checks on hand-made numbers, and its computations on small populations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from lib.moe import routed_population
from lib.moe.pages import routing_theory as theory
from lib.moe.pages.sensitivity import PAPER_TABLE5


def _gaps(predicted: list[float], z: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"beta": [0.0] + [1.0] * (len(predicted) - 1), "predicted": predicted, "z": z})


def _checks(soft_train: float, disagreement: float) -> dict[str, float]:
    return {"aggregate residual, soft": soft_train, "largest |eta - p| of a single configuration": disagreement}


def test_claims_hold_on_exact_residuals_and_the_papers_support() -> None:
    rows = theory.claims(
        _checks(1e-15, 0.1), 1e-14, 5, _gaps([0.0, 0.05, -0.08], [0.3, -1.0, 2.0]), 1e-12, PAPER_TABLE5.copy(), 0.0
    )
    assert set(rows["verdict"]) == {"held"} and len(rows) == 6
    # every row holds by theorem or construction: a numerical check, never an empirical claim
    assert set(rows["kind"]) == {"numerical check"}


def test_claims_fail_on_miscalibration_disagreement_and_broken_bounds() -> None:
    support = PAPER_TABLE5.copy()
    support["fraction"] = support["fraction"].to_numpy()[::-1]  # rises with lambda
    rows = theory.claims(
        _checks(1e-3, 0.001), 1e-3, 5, _gaps([0.0, 0.005, 0.08], [0.0, 9.0, 1.0]), 1e-6, support, -1e-6
    )
    assert set(rows["verdict"]) == {"did not hold"}


def test_section_4_2_example_is_calibrated_on_p_but_not_per_configuration() -> None:
    pop = routed_population.two_configuration_example()
    checks = theory.training_checks(pop)
    assert theory.training_residual_max(checks) < theory.EXACT_TOL
    assert checks["largest |eta - p| of a single configuration"] > theory.BREAK_MIN


def test_hard_routing_survives_region_draws() -> None:
    region = theory.region_draws(theory.random_population("hard", 0), 3, 0)
    assert len(region) == 3 and region["hard: max |residual|"].max() < theory.EXACT_TOL
    with pytest.raises(ValueError, match="n_draws"):
        theory.region_draws(theory.random_population("hard", 0), 0, 0)


def test_gap_published_excludes_the_unshifted_level() -> None:
    gaps = pd.DataFrame({"beta": [0.0, 1.0], "predicted": [0.5, 0.1], "measured": [0.5, 0.2], "z": [0.0, -3.0]})
    pub = theory.gap_published(gaps)
    assert pub["soft_gap_predicted_max"] == 0.1 and pub["soft_gap_measured_max"] == 0.2
    assert pub["soft_gap_max_abs_z"] == 3.0 and pub["soft_gap_max_abs_error"] == pytest.approx(0.1)


def test_robust_identities_and_support_on_simulated_losses() -> None:
    losses = theory.simulated_losses(2, 16, seed=0)
    assert losses.shape == (2, 16) and bool((losses > 0).all())
    checks = theory.identity_checks(losses, [0.0, 2.0])
    assert checks[theory.KL_IDENTITY] < 1e-9 and min(checks.values()) >= 0
    support = theory.simulated_support(losses, [0.0, 0.5, 2.0])
    assert list(support["lam"]) == [0.5, 2.0] and support["fraction"].iloc[0] > support["fraction"].iloc[1]
    weights = theory.weights_by_rank(losses[0], [0.0, 2.0])
    assert weights.groupby("lambda")["n * w"].sum().to_numpy() == pytest.approx([16.0, 16.0])
    assert np.allclose(weights[weights["lambda"] == "0"]["n * w"], 1.0)
    assert isinstance(losses, torch.Tensor)


def test_multiaccuracy_chain_holds_on_the_example() -> None:
    table, slack = theory.multiaccuracy_table(routed_population.two_configuration_example(), [0.0, 2.0])
    assert set(table["beta"]) == {0.0, 2.0} and slack >= -theory.CHAIN_TOL


def test_support_check() -> None:
    good = PAPER_TABLE5[["lam", "perplexity", "fraction", "ratio_bound"]].copy()
    assert theory.support_check(good)["verdict"] == "held"
    bad = good.copy()
    bad.loc[bad.lam == 2.0, "fraction"] = 0.95  # breaks monotonicity
    assert theory.support_check(bad)["verdict"] == "did not hold"
