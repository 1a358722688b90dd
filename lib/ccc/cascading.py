"""Paper 3's cascading grid: CC, UC and RC over splits, the calibrator and bin ablations, the shift check.

Paper: "Calibrated confidence cascades" (paper 3), sections 2.2, 3.2 and 3.4, appendix A (Tables 4-5).
The cascading page builds one :class:`CascadeGrid` (every split x model x calibrator's top-1
confidence and correctness on both halves, computed once), then reads its APGR tables from
:func:`main_apgr`, :func:`ablations` and :func:`shift_apgr`; :func:`cascading_published` gives the
numbers the page publishes and :func:`paper_table` sets the paper's Tables 4-5 beside ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lib.ccc import cascade
from lib.ccc import confidence
from lib.data import mmlu

PAIRS: dict[str, tuple[str, str]] = {
    "instruct": ("llama-3.1-8b-instruct", "llama-3.1-70b-instruct"),
    "base": ("llama-3.1-8b-base", "llama-3.1-70b-base"),
}
"""The (small, large) model pairs cascaded on MMLU."""

PAPER_APGR_BY_CALIBRATOR: dict[str, float] = {"temperature": 0.7013, "platt": 0.7013, "histogram": 0.7006}
"""The paper's MMLU APGR of CC with 15 bins, per calibrator (Table 4, LLaMA-8B -> 70B)."""

PAPER_APGR_BY_BINS: dict[int, float] = {5: 0.6917, 15: 0.7013, 50: 0.7044, 100: 0.7035}
"""The paper's MMLU APGR of CC with temperature scaling, per number of bins (Table 5)."""

PAPER_APGR_MF_ROUTER: float = 0.5497
"""RouteLLM's matrix-factorisation router, best variant (paper 3, appendix A); not run here."""

RANDOM_APGR: float = 0.5
"""The expected APGR of random routing (RC), by definition of APGR."""


@dataclass
class CascadeGrid:
    """Every (split, model, calibrator)'s :class:`lib.ccc.confidence.ModelOutputs`, computed once.

    ``calibrator "none"`` is UC. :meth:`curve` and :meth:`random_routing` read them for one split and pair.
    """

    outputs: dict[tuple[int, str, str], confidence.ModelOutputs]
    n_bins: int
    seed: int
    n_splits: int
    pairs: Mapping[str, tuple[str, str]] = field(default_factory=lambda: dict(PAIRS))

    def curve(self, split: int, pair: str, calibrator: str, bins: int) -> cascade.CascadeCurve:
        """CC (or UC for ``"none"``) of one pair on one split's test half with ``bins`` bins."""
        small, large = self.pairs[pair]
        return cascade.cascade_curve(
            self.outputs[split, small, calibrator], self.outputs[split, large, calibrator], bins
        )

    def random_routing(self, split: int, pair: str) -> cascade.CascadeCurve:
        """RC: a random subset of the test half goes to the large model, mixing the two models' real correctness."""
        small, large = self.pairs[pair]
        return cascade.random_routing_curve(
            self.outputs[split, small, "none"].correct_test,
            self.outputs[split, large, "none"].correct_test,
            self.n_bins + 1,
            seed=self.seed + split,
        )


def build_grid(
    data: Any,
    calibrators: Sequence[str],
    n_splits: int,
    n_bins: int,
    seed: int,
    pairs: Mapping[str, tuple[str, str]] = PAIRS,
) -> CascadeGrid:
    """Split ``data`` (an :class:`lib.data.mmlu.MMLUData`-like object with ``logits`` and ``labels``) in
    random halves ``n_splits`` times (seeds ``seed + s``) and compute every model's outputs under
    ``"none"`` and each of ``calibrators``."""
    if n_splits < 1:
        raise ValueError(f"n_splits: need at least 1, got {n_splits}")
    if n_bins < 1:
        raise ValueError(f"n_bins: need at least 1, got {n_bins}")
    outputs = {}
    for s in range(n_splits):
        cal, test = cascade.split_halves(len(data), seed=seed + s)
        for models in pairs.values():
            for m in models:
                for c in ("none", *calibrators):
                    outputs[s, m, c] = confidence.model_outputs(data.logits[m], data.labels, cal, test, c, n_bins)
    return CascadeGrid(outputs, n_bins, seed, n_splits, dict(pairs))


def first_split_curves(grid: CascadeGrid) -> pd.DataFrame:
    """The CC (temperature), UC and RC curves of split 0 for every pair, one frame for the chart."""
    frames = []
    for pair in grid.pairs:
        cc, uc = grid.curve(0, pair, "temperature", grid.n_bins), grid.curve(0, pair, "none", grid.n_bins)
        for name, cur in (
            ("CC (calibrated)", cc),
            ("UC (uncalibrated)", uc),
            ("RC (random)", grid.random_routing(0, pair)),
        ):
            frames.append(cur.to_frame(name).assign(panel=f"8B -> 70B {pair}"))
    return pd.concat(frames, ignore_index=True)


def advantage_frame(grid: CascadeGrid, pair: str = "instruct") -> pd.DataFrame:
    """The per-bin advantage tables of split 0, calibrated (TS) and uncalibrated, for the chart."""
    return pd.concat(
        [
            grid.curve(0, pair, c, grid.n_bins).table.assign(method=name)
            for c, name in (("temperature", "calibrated (TS)"), ("none", "uncalibrated"))
        ]
    )


def main_apgr(grid: CascadeGrid) -> pd.DataFrame:
    """APGR of CC (TS), UC and RC per split and pair: columns split, pair, method, apgr."""
    rows = []
    for s in range(grid.n_splits):
        for pair in grid.pairs:
            rows.append(
                {
                    "split": s,
                    "pair": pair,
                    "method": "CC (TS)",
                    "apgr": grid.curve(s, pair, "temperature", grid.n_bins).apgr(),
                }
            )
            rows.append(
                {"split": s, "pair": pair, "method": "UC", "apgr": grid.curve(s, pair, "none", grid.n_bins).apgr()}
            )
            rows.append({"split": s, "pair": pair, "method": "RC", "apgr": grid.random_routing(s, pair).apgr()})
    return pd.DataFrame(rows)


def ablations(
    grid: CascadeGrid, calibrators: Sequence[str], bins: Sequence[int], pair: str = "instruct"
) -> pd.DataFrame:
    """Paper Tables 4-5 on one pair: APGR per split for each calibrator (the grid's bins) and for each
    number of bins (temperature scaling); columns split, ablation, setting, apgr."""
    rows = []
    for s in range(grid.n_splits):
        for c in calibrators:
            rows.append(
                {"split": s, "ablation": "calibrator", "setting": c, "apgr": grid.curve(s, pair, c, grid.n_bins).apgr()}
            )
        for b in bins:
            rows.append(
                {
                    "split": s,
                    "ablation": "bins",
                    "setting": str(b),
                    "apgr": grid.curve(s, pair, "temperature", b).apgr(),
                }
            )
    return pd.DataFrame(rows)


def ablation_means(abl: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Mean APGR per calibrator and per number of bins (in increasing order of bins)."""
    by_cal = abl.query("ablation == 'calibrator'").groupby("setting")["apgr"].mean()
    by_bins = abl.query("ablation == 'bins'").groupby("setting")["apgr"].mean()
    return by_cal, by_bins[sorted(by_bins.index, key=int)]


def shift_apgr(
    data: Any, calibrate_on: str, n_bins: int, seed: int, pair: tuple[str, str] = PAIRS["instruct"]
) -> pd.DataFrame:
    """The shift stand-in: calibrate and fit the bins on one MMLU category and cascade on each other
    category ("shifted"), against halves of that category ("in-distribution"); columns target,
    setting, method (CC (TS) or UC), apgr."""
    if calibrate_on not in mmlu.CATEGORIES:
        raise ValueError(f"calibrate_on: {calibrate_on!r} is not one of {mmlu.CATEGORIES}")
    cat = data.questions["category"].to_numpy()
    src = np.flatnonzero(cat == calibrate_on)
    rows = []
    for target in [c for c in mmlu.CATEGORIES if c != calibrate_on]:
        tgt = np.flatnonzero(cat == target)
        half_cal, half_test = cascade.split_halves(len(tgt), seed=seed)
        for setting, (ci, ti) in (
            (f"shifted (calibrate on {calibrate_on})", (src, tgt)),
            ("in-distribution (halves of target)", (tgt[half_cal], tgt[half_test])),
        ):
            for method, c in (("CC (TS)", "temperature"), ("UC", "none")):
                small, large = (confidence.model_outputs(data.logits[m], data.labels, ci, ti, c) for m in pair)
                rows.append(
                    {
                        "target": target,
                        "setting": setting,
                        "method": method,
                        "apgr": cascade.cascade_curve(small, large, n_bins).apgr(),
                    }
                )
    return pd.DataFrame(rows)


def shifted_cc(shift: pd.DataFrame) -> pd.DataFrame:
    """The CC (TS) rows of :func:`shift_apgr` under shift (one per target category)."""
    return shift.query("method == 'CC (TS)' and setting.str.startswith('shifted')")


def cascading_published(
    main: pd.DataFrame, by_cal: pd.Series, by_bins: pd.Series, shift: pd.DataFrame
) -> dict[str, Any]:
    """The numbers the cascading page publishes (means over splits, 4 decimals)."""
    m = main.groupby(["pair", "method"])["apgr"].mean()
    return {
        "apgr_cc": round(float(m["instruct", "CC (TS)"]), 4),
        "apgr_uc": round(float(m["instruct", "UC"]), 4),
        "apgr_rc": round(float(m["instruct", "RC"]), 4),
        "apgr_cc_base": round(float(m["base", "CC (TS)"]), 4),
        "apgr_uc_base": round(float(m["base", "UC"]), 4),
        "apgr_by_calibrator": {k: round(float(v), 4) for k, v in by_cal.items()},
        "apgr_by_bins": {k: round(float(v), 4) for k, v in by_bins.items()},
        "apgr_shift_min": round(float(shifted_cc(shift)["apgr"].min()), 4),
    }


def paper_table(main: pd.DataFrame, by_cal: pd.Series, by_bins: pd.Series) -> pd.DataFrame:
    """The paper's MMLU APGR (Tables 4-5, RouteLLM) beside ours (instruct pair, means over splits)."""
    m = main.groupby(["pair", "method"])["apgr"].mean()
    names = {"temperature": "temperature scaling", "platt": "Platt scaling", "histogram": "histogram binning"}
    return pd.DataFrame(
        [
            *[(f"{names[c]}, 15 bins", p, by_cal.get(c)) for c, p in PAPER_APGR_BY_CALIBRATOR.items()],
            *[(f"TS, {b} bins", p, by_bins.get(str(b))) for b, p in PAPER_APGR_BY_BINS.items()],
            ("random routing (RC)", RANDOM_APGR, float(m["instruct", "RC"])),
            ("MF router (RouteLLM, best variant)", PAPER_APGR_MF_ROUTER, np.nan),
        ],
        columns=["MMLU APGR", "paper", "ours"],
    ).set_index("MMLU APGR")
