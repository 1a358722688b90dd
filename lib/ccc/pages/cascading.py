"""The cascading page (``notebooks/cascading.py``): paper 3, sections 2.2, 3.2 and 3.4, appendix A
(Tables 4-5): CC, UC and RC over random splits, the calibrator and bin ablations, the shift check,
read from one :class:`CascadeGrid` of every model's outputs."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lib.config import paper_numbers
from lib import report
from lib.ccc import cascade, confidence
from lib.data import mmlu
from lib.ccc.pages import CCCPage, floored_verdict, splits_verdict
from lib.validation import check_choice, check_int

PAIRS: dict[str, tuple[str, str]] = {
    "instruct": ("llama-3.1-8b-instruct", "llama-3.1-70b-instruct"),
    "base": ("llama-3.1-8b-base", "llama-3.1-70b-base"),
}
"""The (small, large) model pairs cascaded on MMLU."""

PAPER_APGR_BY_CALIBRATOR: dict[str, float] = paper_numbers("ccc")["cascading"]["apgr_by_calibrator"]
"""The paper's MMLU APGR of CC with 15 bins, per calibrator (Table 4, LLaMA-8B -> 70B)."""

PAPER_APGR_BY_BINS: dict[int, float] = {int(b): v for b, v in paper_numbers("ccc")["cascading"]["apgr_by_bins"].items()}
"""The paper's MMLU APGR of CC per number of bins (Table 5; Platt scaling, :data:`BINS_CALIBRATOR`)."""

PAPER_APGR_MF_ROUTER: float = paper_numbers("ccc")["cascading"]["apgr_mf_router"]
"""RouteLLM's matrix-factorisation router, best variant (paper 3, appendix D: fine-tuned, MMLU); not
run here."""

PAPER_APGR_CC: float = PAPER_APGR_BY_CALIBRATOR["temperature"]
"""The paper's MMLU APGR of CC (temperature and Platt scaling, 15 bins; Table 4)."""

RANDOM_APGR: float = 0.5
"""The expected APGR of random routing (RC), by definition of APGR."""

APGR_PAPER_TOL: float = 0.03
"""How close to the paper's 0.7013 our CC APGR must be for "CC APGR on MMLU is about 0.70"."""

BINS_CALIBRATOR: str = "platt"
"""The calibrator of the bins ablation, as in the paper's Table 5, which names none: its 15-bin GSM8K
entry (.7496) is Table 4's Platt scaling, not temperature scaling (.7593); on MMLU the two tie (.7013)."""

ABLATION_RANGE_MAX: float = 0.02
"""The APGR range over calibrators (or bins) below which CC is insensitive to them (paper: 0.0007, 0.0127)."""


@dataclass(eq=False)
class CascadeGrid:
    """Every (split, model, calibrator)'s :class:`lib.ccc.confidence.ModelOutputs`, computed once
    (calibrator ``"none"`` is UC), and the cascade curves read from them, each computed once."""

    outputs: dict[tuple[int, str, str], confidence.ModelOutputs]
    n_bins: int
    seed: int
    n_splits: int
    _curves: dict[tuple[int, str, str, int], cascade.CascadeCurve] = field(default_factory=dict, repr=False)

    def curve(self, split: int, pair: str, calibrator: str, bins: int) -> cascade.CascadeCurve:
        """CC (or UC for ``"none"``) of one pair on one split's test half with ``bins`` bins."""
        key = (split, pair, calibrator, bins)
        if key not in self._curves:
            self._curves[key] = cascade.cascade_curve(*(self.outputs[split, m, calibrator] for m in PAIRS[pair]), bins)
        return self._curves[key]

    def curves(self, split: int, pair: str) -> tuple[cascade.CascadeCurve, ...]:
        """CC (temperature), UC and RC of one pair on one split's test half with the grid's bins; RC:
        a random subset of the test half goes to the large model, mixing the two models' real correctness."""
        small, large = (self.outputs[split, m, "none"].correct_test for m in PAIRS[pair])
        rc = cascade.random_routing_curve(small, large, self.n_bins + 1, seed=self.seed + split)
        return self.curve(split, pair, "temperature", self.n_bins), self.curve(split, pair, "none", self.n_bins), rc


def build_grid(data: Any, calibrators: Sequence[str], n_splits: int, n_bins: int, seed: int) -> CascadeGrid:
    """Split ``data`` (an :class:`lib.data.mmlu.MMLUData`-like object with ``logits`` and ``labels``) in
    random halves ``n_splits`` times (seeds ``seed + s``) and compute every model's outputs under
    ``"none"``, each of ``calibrators`` and :data:`BINS_CALIBRATOR`."""
    check_int(n_splits, "n_splits")
    outputs = {}
    for s in range(n_splits):
        cal, test = cascade.split_halves(len(data), seed=seed + s)
        for m in itertools.chain(*PAIRS.values()):
            for c in dict.fromkeys(("none", *calibrators, BINS_CALIBRATOR)):
                outputs[s, m, c] = confidence.model_outputs(data.logits[m], data.labels, cal, test, c, n_bins)
    return CascadeGrid(outputs, n_bins, seed, n_splits)


def first_split_curves(grid: CascadeGrid) -> pd.DataFrame:
    """The CC (temperature), UC and RC curves of split 0 for every pair, one frame for the chart."""
    return pd.concat(
        [cascade.curves_frame(f"8B -> 70B {pair}", *grid.curves(0, pair)) for pair in PAIRS], ignore_index=True
    )


def advantage_frame(grid: CascadeGrid) -> pd.DataFrame:
    """The instruct pair's per-bin advantage tables of split 0, calibrated (TS) and uncalibrated, for the chart."""
    return pd.concat(
        [
            grid.curve(0, "instruct", c, grid.n_bins).table.assign(method=name)
            for c, name in (("temperature", "calibrated (TS)"), ("none", "uncalibrated"))
        ]
    )


def main_apgr(grid: CascadeGrid) -> pd.DataFrame:
    """APGR of CC (TS), UC and RC per split and pair: columns split, pair, method, apgr."""
    return pd.DataFrame(
        {"split": s, "pair": pair, "method": method, "apgr": curve.apgr()}
        for s in range(grid.n_splits)
        for pair in PAIRS
        for method, curve in zip(("CC (TS)", "UC", "RC"), grid.curves(s, pair))
    )


def noise_key(kind: str, a: str, b: str | None = None) -> str:
    """The ``what`` of a :func:`noise_table` row: ``kind`` "CC" with a pair (CC's APGR), "CC - UC" with
    a pair, or "calibrator" / "bins" with two settings (their APGRs' difference, either order)."""
    if b is None:
        return f"{kind} {a}"
    lo, hi = sorted((str(a), str(b)))
    return f"{kind} {lo} - {hi}"


def _ablation_curves(
    grid: CascadeGrid, split: int, calibrators: Sequence[str], bins: Sequence[int]
) -> dict[str, dict[str, cascade.CascadeCurve]]:
    """The instruct pair's curves of one split per calibrator (the grid's bins) and per number of
    bins (:data:`BINS_CALIBRATOR`), keyed by ablation and setting."""
    return {
        "calibrator": {c: grid.curve(split, "instruct", c, grid.n_bins) for c in calibrators},
        "bins": {str(b): grid.curve(split, "instruct", BINS_CALIBRATOR, b) for b in bins},
    }


def noise_table(grid: CascadeGrid, calibrators: Sequence[str], bins: Sequence[int]) -> pd.DataFrame:
    """Per split, the test half's own standard error (:func:`lib.ccc.cascade.apgr_test_se`, a closed
    form over its examples) of what the claims compare: CC's APGR and CC minus UC per pair, and on
    the instruct pair the difference of every two calibrators (the grid's bins) and of every two
    numbers of bins (:data:`BINS_CALIBRATOR`); columns split, what (:func:`noise_key`), test_se."""
    rows = []
    for s in range(grid.n_splits):
        for pair in PAIRS:
            cc, uc = grid.curve(s, pair, "temperature", grid.n_bins), grid.curve(s, pair, "none", grid.n_bins)
            rows += [(s, noise_key("CC", pair), cascade.apgr_test_se(cc))]
            rows += [(s, noise_key("CC - UC", pair), cascade.apgr_test_se(cc, uc))]
        for kind, curves in _ablation_curves(grid, s, calibrators, bins).items():
            for a, b in itertools.combinations(curves, 2):
                rows.append((s, noise_key(kind, a, b), cascade.apgr_test_se(curves[a], curves[b])))
    return pd.DataFrame(rows, columns=["split", "what", "test_se"])


def ablations(grid: CascadeGrid, calibrators: Sequence[str], bins: Sequence[int]) -> pd.DataFrame:
    """Paper Tables 4-5 on the instruct pair: APGR per split for each calibrator (the grid's bins) and for each
    number of bins (:data:`BINS_CALIBRATOR`); columns split, ablation, setting, apgr."""
    return pd.DataFrame(
        {"split": s, "ablation": kind, "setting": x, "apgr": curve.apgr()}
        for s in range(grid.n_splits)
        for kind, curves in _ablation_curves(grid, s, calibrators, bins).items()
        for x, curve in curves.items()
    )


def ablation_means(abl: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Mean APGR per calibrator and per number of bins (in increasing order of bins)."""
    by_cal = abl.query("ablation == 'calibrator'").groupby("setting")["apgr"].mean()
    by_bins = abl.query("ablation == 'bins'").groupby("setting")["apgr"].mean()
    return by_cal, by_bins[sorted(by_bins.index, key=int)]


def shift_apgr(data: Any, calibrate_on: str, n_bins: int, seed: int) -> pd.DataFrame:
    """The shift stand-in on the instruct pair: calibrate and fit the bins on one MMLU category and cascade on each other
    category ("shifted"), against halves of that category ("in-distribution"); columns target,
    setting, method (CC (TS) or UC), apgr and test_se (its closed-form SE over the target's
    examples, :func:`lib.ccc.cascade.apgr_test_se`)."""
    check_choice(calibrate_on, mmlu.CATEGORIES, "calibrate_on")
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
                pair = (confidence.model_outputs(data.logits[m], data.labels, ci, ti, c) for m in PAIRS["instruct"])
                curve = cascade.cascade_curve(*pair, n_bins)
                rows.append((target, setting, method, curve.apgr(), cascade.apgr_test_se(curve)))
    return pd.DataFrame(rows, columns=["target", "setting", "method", "apgr", "test_se"])


def shifted_cc(shift: pd.DataFrame, column: str = "apgr") -> pd.Series:
    """CC (TS)'s APGR under shift (or another ``column``, e.g. its ``test_se``), one per target category."""
    return shift.query("method == 'CC (TS)' and setting.str.startswith('shifted')").set_index("target")[column]


def _per_split(frame: pd.DataFrame, **where: str) -> np.ndarray:
    sel = np.logical_and.reduce([(frame[k] == v).to_numpy() for k, v in where.items()])
    return frame[sel].sort_values("split")["apgr"].to_numpy()


def _test_se(noise: pd.DataFrame, what: str) -> float:
    """The mean over the splits of :func:`noise_table`'s ``what`` (``ValueError`` if it has none)."""
    got = noise.loc[noise["what"] == what, "test_se"]
    if got.empty:
        raise ValueError(f"noise: no test-set SE of {what!r}")
    return float(got.mean())


def _range_verdict(abl: pd.DataFrame, ablation: str, noise: pd.DataFrame) -> tuple[str, str]:
    """'The APGR range over the settings is below ABLATION_RANGE_MAX': the range of the mean APGRs
    against the paired SE of the difference between the highest and the lowest setting over the
    splits (n - 1 degrees of freedom, n splits), floored by that difference's test-set SE
    (:func:`lib.ccc.pages.floored_verdict`)."""
    sub = abl[abl["ablation"] == ablation]
    means = sub.groupby("setting")["apgr"].mean()
    order = means.sort_values(kind="stable").index  # the lowest and the highest, distinct even in a tie
    hi, lo = _per_split(sub, setting=order[-1]), _per_split(sub, setting=order[0])
    spread = float(means.max() - means.min())
    paired = hi - lo
    test_se = _test_se(noise, noise_key(ablation, order[-1], order[0])) if len(order) > 1 else 0.0
    verdict = floored_verdict(ABLATION_RANGE_MAX - spread, report.standard_error(paired), paired.size, test_se)
    return verdict, f"range {spread:.4f} (test-set SE {test_se:.4f})"


def cascading_claims(
    main: pd.DataFrame,
    abl: pd.DataFrame,
    shift_cc: Mapping[str, float],
    noise: pd.DataFrame,
    shift_se: Mapping[str, float],
) -> list[dict[str, Any]]:
    """The page's six claims from the per-split APGR of :func:`main_apgr`, of :func:`ablations`,
    and CC's APGR under shift per target, each against the larger of two noise bars
    (:func:`lib.ccc.pages.floored_verdict`): the spread over the k random splits of one data set (the
    paired SE of differences over the same splits, the SE of the mean APGR, or for each shift row,
    one split, the split-to-split SD of CC's APGR; k - 1 degrees of freedom), and the test set's own
    (:func:`noise_table`'s closed-form SEs, mean over the splits; ``shift_se`` per target), which more
    splits of the same data never shrink. ``paper_own`` is not testable (no errors reported)."""
    if not len(abl) or not len(shift_cc):
        raise ValueError("abl, shift_cc: need at least one setting each")
    if set(shift_se) != set(shift_cc):
        raise ValueError("shift_se: needs the test-set SE of every target of shift_cc")
    cc = {p: _per_split(main, pair=p, method="CC (TS)") for p in PAIRS}
    uc = {p: _per_split(main, pair=p, method="UC") for p in PAIRS}
    k, cc_mean = cc["instruct"].size, float(cc["instruct"].mean())
    sd, se_mean = (float(cc["instruct"].std(ddof=1)), report.standard_error(cc["instruct"])) if k >= 2 else (None, None)
    cal_v, cal_txt = _range_verdict(abl, "calibrator", noise)
    bin_v, bin_txt = _range_verdict(abl, "bins", noise)
    by_cal, by_bins = ablation_means(abl)
    worst = min(shift_cc, key=lambda t: shift_cc[t])
    se_cc = {p: _test_se(noise, noise_key("CC", p)) for p in PAIRS}
    se_cc_uc = {p: _test_se(noise, noise_key("CC - UC", p)) for p in PAIRS}

    return [
        report.claim_row(
            claim="CC beats random routing (APGR > 0.5) for both pairs",
            paper=f"MMLU CC {PAPER_APGR_CC:.4f} vs random 0.5 (App. A.1, Table 4); the paper's pair is "
            "LLaMA-8B -> 70B only",
            ours=", ".join(f"{p} {cc[p].mean():.4f} (test-set SE {se_cc[p]:.4f})" for p in PAIRS)
            + f" (means of {k} splits)",
            verdict=report.every(splits_verdict(cc[p] - RANDOM_APGR, se_cc[p]) for p in PAIRS),
        ),
        report.claim_row(
            claim="CC beats UC for both pairs (calibration improves routing; paired over splits)",
            paper="'CC consistently outperforms UC across the entire accuracy-small-model-ratio trade-off curve' "
            "(sec. 3.2, Fig. 3; no UC APGR number)",
            ours="; ".join(
                f"{p} {cc[p].mean():.4f} vs {uc[p].mean():.4f} (diff SE over splits "
                f"{(cc[p] - uc[p]).std(ddof=1) / np.sqrt(k) if k >= 2 else float('nan'):.4f}, test-set "
                f"{se_cc_uc[p]:.4f})"
                for p in PAIRS
            ),
            verdict=report.every(splits_verdict(cc[p] - uc[p], se_cc_uc[p]) for p in PAIRS),
        ),
        report.claim_row(
            claim=f"CC APGR on MMLU is about 0.70 (within {APGR_PAPER_TOL} of the paper's {PAPER_APGR_CC})",
            paper=f"{PAPER_APGR_CC:.4f} (Table 4, temperature and Platt scaling, 15 bins); the tolerance "
            f"{APGR_PAPER_TOL} is the book's",
            ours=f"ours {cc_mean:.4f} (test-set SE {se_cc['instruct']:.4f})",
            verdict=floored_verdict(APGR_PAPER_TOL - abs(cc_mean - PAPER_APGR_CC), se_mean, k, se_cc["instruct"]),
        ),
        *(
            report.claim_row(
                claim=f"insensitive to {what} (APGR range < {ABLATION_RANGE_MAX})",
                paper=", ".join(f"{k}{sep}{v:.4f}" for k, v in paper.items())
                + f" ({table}); the bound {ABLATION_RANGE_MAX} is the book's",
                ours=", ".join(f"{k}{sep}{v:.4f}" for k, v in got.items()) + f"; {txt}",
                verdict=v,
            )
            for what, sep, paper, table, got, txt, v in (
                ("the calibrator", " ", PAPER_APGR_BY_CALIBRATOR, "Table 4", by_cal, cal_txt, cal_v),
                ("the number of bins, 5-100", ": ", PAPER_APGR_BY_BINS, "Table 5", by_bins, bin_txt, bin_v),
            )
        ),
        report.claim_row(
            claim="under shift (calibrate on another subject group) CC stays above random",
            paper="MMLU-Adversarial: 'substantially better than the random baseline' (sec. 3.4, Fig. 5; no "
            "number in the text)",
            ours=", ".join(f"{t} {v:.4f}" for t, v in shift_cc.items())
            + f" (lowest {worst}: test-set SE {float(shift_se[worst]):.4f})",
            verdict=floored_verdict(float(shift_cc[worst]) - RANDOM_APGR, sd, k, float(shift_se[worst])),
        ),
    ]


def _means(main: pd.DataFrame, abl: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """The mean APGRs over the splits: per (pair, method) of :func:`main_apgr`, then :func:`ablation_means`."""
    return main.groupby(["pair", "method"])["apgr"].mean(), *ablation_means(abl)


def published(main: pd.DataFrame, abl: pd.DataFrame, shift: pd.DataFrame) -> dict[str, Any]:
    """The numbers the page publishes from :func:`main_apgr`, :func:`ablations` and :func:`shift_apgr`
    (means over splits, 4 decimals)."""
    m, by_cal, by_bins = _means(main, abl)
    means = {"cc": ("instruct", "CC (TS)"), "uc": ("instruct", "UC"), "rc": ("instruct", "RC")}
    means |= {"cc_base": ("base", "CC (TS)"), "uc_base": ("base", "UC")}
    return {
        **{f"apgr_{k}": round(float(m[i]), 4) for k, i in means.items()},
        "apgr_by_calibrator": {k: round(float(v), 4) for k, v in by_cal.items()},
        "apgr_by_bins": {k: round(float(v), 4) for k, v in by_bins.items()},
        "apgr_shift_min": round(float(shifted_cc(shift).min()), 4),
    }


def paper_table(main: pd.DataFrame, abl: pd.DataFrame) -> pd.DataFrame:
    """The paper's MMLU APGR (Tables 4-5, RouteLLM) beside ours (instruct pair, means over splits of
    :func:`main_apgr` and :func:`ablations`)."""
    m, by_cal, by_bins = _means(main, abl)
    names = {"temperature": "temperature scaling", "platt": "Platt scaling", "histogram": "histogram binning"}
    return pd.DataFrame(
        [
            *[(f"{names[c]}, 15 bins (Table 4)", p, by_cal.get(c)) for c, p in PAPER_APGR_BY_CALIBRATOR.items()],
            *[
                (f"{names[BINS_CALIBRATOR]}, {b} bins (Table 5)", p, by_bins.get(str(b)))
                for b, p in PAPER_APGR_BY_BINS.items()
            ],
            ("random routing (RC)", RANDOM_APGR, float(m["instruct", "RC"])),
            ("MF router (RouteLLM, best variant)", PAPER_APGR_MF_ROUTER, np.nan),
        ],
        columns=["MMLU APGR", "paper", "ours"],
    ).set_index("MMLU APGR")


def claims(main: pd.DataFrame, abl: pd.DataFrame, shift: pd.DataFrame, noise: pd.DataFrame) -> pd.DataFrame:
    """The claims table: :func:`cascading_claims` on one run's :func:`main_apgr`, :func:`ablations`,
    :func:`shift_apgr` and :func:`noise_table`."""
    return report.claims_table(
        cascading_claims(main, abl, shifted_cc(shift).to_dict(), noise, shifted_cc(shift, "test_se").to_dict())
    )


class CascadingPage(CCCPage):
    """Paper 3's cascading page: its settings, scale line and data (the notebook builds the
    :class:`CascadeGrid` and reads CC, UC and RC, the ablations and the shift check from it)."""

    name = "cascading"
    title = "Cascades by calibrated advantage: Sections 3.2-3.4 (APGR)"
    real_summary = "MMLU test, Llama-3.1 8B -> 70B zero-shot logits, {n_splits} random half splits"
    synthetic_summary = "synthetic MMLU ({n_synthetic} questions), {n_splits} splits"

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> mmlu.MMLUData:
        """The MMLU logits (synthetic at smoke scale)."""
        return mmlu.load_mmlu() if cfg["data"] == "real" else mmlu.synthetic_mmlu(cfg["n_synthetic"], seed=cfg["seed"])


PAGE = CascadingPage()
