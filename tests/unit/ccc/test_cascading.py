"""lib.ccc.cascading: the cascading grid's tables agree with lib.ccc.cascade called directly, and the
published numbers and the paper table follow from those tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.ccc import cascade
from lib.ccc import confidence
from lib.data import mmlu
from lib.ccc import cascading as ccc


@pytest.fixture(scope="module")
def data():
    return mmlu.synthetic_mmlu(600, seed=1)


@pytest.fixture(scope="module")
def grid(data):
    return ccc.build_grid(data, ["temperature"], n_splits=2, n_bins=5, seed=3)


def test_grid_curve_is_the_cascade_of_its_split(data, grid):
    cal, test = cascade.split_halves(len(data), seed=3 + 1)
    small, large = ccc.PAIRS["base"]
    outs = [confidence.model_outputs(data.logits[m], data.labels, cal, test, "temperature", 5) for m in (small, large)]
    assert grid.curve(1, "base", "temperature", 5).apgr() == pytest.approx(cascade.cascade_curve(*outs, 5).apgr())
    assert set(c for (_, _, c) in grid.outputs) == {"none", "temperature"}


def test_main_apgr_and_ablations_shapes(grid):
    main = ccc.main_apgr(grid)
    assert len(main) == 2 * 2 * 3 and set(main["method"]) == {"CC (TS)", "UC", "RC"}
    abl = ccc.ablations(grid, ["temperature"], [10, 2])
    by_cal, by_bins = ccc.ablation_means(abl)
    assert list(by_bins.index) == ["2", "10"]  # numeric order, not text order
    assert by_cal["temperature"] == pytest.approx(
        main.query("pair == 'instruct' and method == 'CC (TS)'")["apgr"].mean()
    )


def test_published_and_paper_table_read_the_means():
    main = pd.DataFrame(
        {
            "split": [0, 1] * 5,
            "pair": ["instruct"] * 6 + ["base"] * 4,
            "method": ["CC (TS)"] * 2 + ["UC"] * 2 + ["RC"] * 2 + ["CC (TS)"] * 2 + ["UC"] * 2,
            "apgr": [0.7, 0.8, 0.6, 0.6, 0.4, 0.6, 0.9, 0.7, 0.5, 0.5],
        }
    )
    by_cal = pd.Series({"temperature": 0.75})
    by_bins = pd.Series({"5": 0.7, "15": 0.75})
    shift = pd.DataFrame(
        {
            "target": ["a", "a", "b"],
            "setting": ["shifted (x)", "in-distribution", "shifted (x)"],
            "method": ["CC (TS)"] * 3,
            "apgr": [0.62, 0.1, 0.58],
        }
    )
    pub = ccc.cascading_published(main, by_cal, by_bins, shift)
    assert pub["apgr_cc"] == 0.75 and pub["apgr_rc"] == 0.5 and pub["apgr_cc_base"] == 0.8
    assert pub["apgr_shift_min"] == 0.58  # the in-distribution row is not a shifted one
    table = ccc.paper_table(main, by_cal, by_bins)
    assert table.loc["TS, 15 bins", "paper"] == ccc.PAPER_APGR_BY_BINS[15] and table.loc["TS, 15 bins", "ours"] == 0.75
    assert np.isnan(table.loc["TS, 50 bins", "ours"])  # a setting not run stays empty
    assert table.loc["random routing (RC)", "ours"] == 0.5


def test_build_grid_validates():
    with pytest.raises(ValueError, match="n_splits"):
        ccc.build_grid(mmlu.synthetic_mmlu(50), [], n_splits=0, n_bins=5, seed=0)
