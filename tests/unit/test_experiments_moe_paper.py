"""lib.experiments.moe_paper's Table 5 verdicts: computed from the numbers, not typed in."""

from __future__ import annotations

import pytest


def test_support_claims_verdicts_are_computed():
    import pandas as pd

    from lib.experiments.moe import PAPER_TABLE5
    from lib.experiments.moe_paper import support_claims

    good = PAPER_TABLE5[["lam", "perplexity", "fraction", "ratio_bound"]].copy()
    rows = support_claims(good, PAPER_TABLE5)
    assert [r["verdict"] for r in rows] == ["held", "held"]
    bad = good.copy()
    bad.loc[bad.lam == 2.0, "fraction"] = 0.95  # far from 72.8% and breaks monotonicity
    rows = support_claims(bad, PAPER_TABLE5)
    assert [r["verdict"] for r in rows] == ["did not hold", "did not hold"]
    with pytest.raises(ValueError, match="support"):
        support_claims(pd.DataFrame(), PAPER_TABLE5)
