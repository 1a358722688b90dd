"""Smoke run of the performance page: live loss timings and the committed benchmark results.

The live timings depend on the machine and its load, so nothing here asserts on their values:
the page's structure, and the arithmetic on the committed (fixed) benchmark results. The scaling
exponent's arithmetic is tested on fixed tables in tests/unit/calibook/test_benchmarks.py."""

import math

import pytest

from calibook import performance as bm
from lib.config import settings
from lib.report import VERDICTS


def test_performance_publishes_timings_and_claims(smoke_published) -> None:
    out = smoke_published("performance")
    cfg = settings("performance", "smoke")
    assert out["scale_summary"].startswith("smoke: live loss timings")
    assert out["timed_sizes"] == cfg["sizes"]
    assert out["kde_max_n"] == max(n for n in cfg["sizes"] if n <= cfg["kde_max_n"])
    assert set(out["exponents"]) == set(out["timed_losses"]) and len(out["timed_losses"]) == 4
    assert all(isinstance(k, float) and math.isfinite(k) for k in out["exponents"].values())
    assert [int(n) for n in out["au_over_aurc"]] == cfg["sizes"] and all(v > 0 for v in out["au_over_aurc"].values())
    # The training-step ratios are the committed benchmark's, recomputed.
    costs = bm.method_costs(bm.bench_results("methods_cpu")).set_index("method")
    for method, ratio in out["method_x_vanilla"].items():
        assert ratio == pytest.approx(costs.loc[method, "x vanilla"], abs=1e-4)
    assert out["method_x_vanilla"]["vanilla"] == 1.0
    assert set(out["reference_x_vanilla"]) == {"robust_filtered", "fgr", "fgr_robust"}
    assert len(out["claims"]) == 4 and all(c["verdict"] in VERDICTS for c in out["claims"])
    # A CPU benchmark cannot settle the paper's GPU figure for FGR.
    fgr = next(c for c in out["claims"] if c["claim"].startswith("FGR"))
    assert fgr["verdict"] == "inconclusive at this scale"
