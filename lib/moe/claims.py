"""Paper 1's claims judged from the numbers, and the numbers the pages publish for their tests.

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1),
section 6. The claims (i)-(iv) of book/moe/overview, and MoCaE's accuracy equalling Vanilla's, are
judged as "held", "did not hold" or "inconclusive at this scale" from the summaries of
:mod:`lib.moe.tables` (:func:`compare`, :func:`moe_claims`); :func:`lib.report.claims_table`
lays them out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lib.moe.experiment import METHOD_LABELS, METRICS
from lib.moe.record import MoERecord
from lib.moe.tables import fmt
from lib.report import VERDICTS, claims_table, publish
from lib.validation import check_choice

ROBUST: tuple[str, ...] = ("robust", "robust_filtered", "fgr_robust")
NON_ROBUST: tuple[str, ...] = ("single", "vanilla", "mocae", "fgr")
# The paper prints accuracies to three decimals and says MoCaE's equal Vanilla's "in every cell":
# the claim holds when the two round alike, |difference| < 0.0005. (A probability mixture of
# tempered experts can move the argmax, so exact equality is not implied; lib.moe.evaluate.)
MOCAE_ACC_TOL = 5e-4


def compare(a: float, a_se: float, b: float, b_se: float, margin: float = 0.01) -> str:
    """Is ``a`` lower than ``b``? 'held' when b - a exceeds the noise, 'did not hold' when a - b
    does, else 'inconclusive at this scale'. Noise = 2 * sqrt(se_a^2 + se_b^2) when both standard
    errors exist (>= 2 seeds), else the fixed ``margin`` (one seed gives no error estimate).
    """
    vals = (a, b)
    if any(v is None or not np.isfinite(v) for v in vals):
        return "inconclusive at this scale"
    ses = [s for s in (a_se, b_se) if s is not None and np.isfinite(s)]
    noise = 2 * math.sqrt(sum(s * s for s in ses)) if len(ses) == 2 else margin
    if b - a > noise:
        return "held"
    if a - b > noise:
        return "did not hold"
    return "inconclusive at this scale"


def _best(
    summary: pd.DataFrame, methods: Sequence[str], subset: str, metric: str, lowest: bool = True
) -> tuple[str, float, float]:
    sub = summary[(summary["subset"] == subset) & summary["method"].isin(methods)].dropna(subset=[metric])
    if sub.empty:
        return "", float("nan"), float("nan")
    row = sub.loc[sub[metric].idxmin() if lowest else sub[metric].idxmax()]
    return str(row["method"]), float(row[metric]), float(row[f"{metric}_se"])


# What the paper reports for claims (i)-(iv): the "paper" column of every page's claims table, also
# when the page could not run (not_run_claims).
PAPER_SAYS: tuple[str, ...] = (
    "a robust method has the lowest hard/shifted ECE in every table",
    "MoCaE improves ECE only modestly over Vanilla MoE",
    "Robust Filtered keeps more accuracy (e.g. best PACS-Sketch accuracy)",
    "robust methods remain best on hard/shifted ECE+TS",
)


def best_accuracy(summary: pd.DataFrame) -> float:
    """The best mean accuracy on all points over the methods of ``summary`` (the accuracy a page
    hands to :func:`lib.report.gate_claims`); NaN when there is none."""
    if not isinstance(summary, pd.DataFrame) or not {"subset", "accuracy"} <= set(summary.columns):
        raise ValueError("summary: expected the DataFrame of lib.moe.tables.summarize")
    acc = summary.loc[summary["subset"] == "all", "accuracy"].dropna()
    return float(acc.max()) if len(acc) else float("nan")


def moe_claims(
    summary: pd.DataFrame,
    records: Sequence[Mapping[str, Any]] = (),
    subset: str = "hard",
    subset_name: str = "hard",
    margin: float = 0.01,
) -> pd.DataFrame:
    """The paper's claims (i)-(iv) (book/moe/overview) judged from ``summary`` (:func:`lib.moe.tables.summarize`), plus MoCaE's
    accuracy equalling Vanilla's (checked on the ``records`` themselves).

    (i) the best robust method has lower ECE on the ``subset`` than the best non-robust one;
    (ii) MoCaE's ECE gain over Vanilla is smaller than the best robust method's;
    (iii) Robust Filtered loses less accuracy than Robust MoE (higher accuracy on all points);
    (iv) (i) still holds after temperature scaling (ECE+TS).

    Whether the models learned enough to be judged is the page's call, with the book's one rule
    (:func:`lib.report.gate_claims` on :func:`best_accuracy`).
    """
    L = METHOD_LABELS
    rows: list[dict[str, Any]] = []
    rb, rb_e, rb_se = _best(summary, ROBUST, subset, "ece")
    nb, nb_e, nb_se = _best(summary, NON_ROBUST, subset, "ece")
    rows.append(
        {
            "claim": f"(i) robust objectives lower ECE on {subset_name} data",
            "paper": PAPER_SAYS[0],
            "ours": f"best robust {L.get(rb, '—')} {fmt(rb_e, rb_se)} vs best non-robust {L.get(nb, '—')} {fmt(nb_e, nb_se)}",
            "verdict": compare(rb_e, rb_se, nb_e, nb_se, margin),
        }
    )
    get = lambda m, s, k: _value(summary, m, s, k)  # noqa: E731
    v, v_se = get("vanilla", subset, "ece")
    mc, mc_se = get("mocae", subset, "ece")
    gain_mocae = v - mc
    gain_robust = v - rb_e
    verdict = "inconclusive at this scale"
    if all(np.isfinite(x) for x in (gain_mocae, gain_robust)):
        verdict = compare(-gain_robust, rb_se, -gain_mocae, mc_se, margin)
    rows.append(
        {
            "claim": "(ii) per-expert calibration (MoCaE) helps little compared with robust training",
            "paper": PAPER_SAYS[1],
            "ours": f"{subset_name} ECE gain over Vanilla: MoCaE {fmt(gain_mocae)}, best robust {fmt(gain_robust)}",
            "verdict": verdict,
        }
    )
    rf, rf_se = get("robust_filtered", "all", "accuracy")
    r, r_se = get("robust", "all", "accuracy")
    rows.append(
        {
            "claim": "(iii) Robust Filtered trades less accuracy than Robust MoE",
            "paper": PAPER_SAYS[2],
            "ours": f"accuracy: Robust Filtered {fmt(rf, rf_se)}, Robust MoE {fmt(r, r_se)}",
            "verdict": compare(-rf, rf_se, -r, r_se, margin),
        }
    )
    rb2, rb2_e, rb2_se = _best(summary, ROBUST, subset, "ece_ts")
    nb2, nb2_e, nb2_se = _best(summary, NON_ROBUST, subset, "ece_ts")
    rows.append(
        {
            "claim": "(iv) the gains survive temperature scaling",
            "paper": PAPER_SAYS[3],
            "ours": f"{subset_name} ECE+TS: best robust {L.get(rb2, '—')} {fmt(rb2_e, rb2_se)} vs best non-robust {L.get(nb2, '—')} {fmt(nb2_e, nb2_se)}",
            "verdict": compare(rb2_e, rb2_se, nb2_e, nb2_se, margin),
        }
    )
    eq = mocae_accuracy_check(records)
    if eq is not None:
        rows.append(
            {
                "claim": "MoCaE's accuracy equals Vanilla MoE's",
                "paper": "identical in every cell of every table (printed to 3 decimals)",
                "ours": f"largest |difference| over runs and subsets: {eq:.4f}",
                "verdict": "held" if eq < MOCAE_ACC_TOL else "did not hold",
            }
        )
    return claims_table(rows)


def _value(summary: pd.DataFrame, method: str, subset: str, metric: str) -> tuple[float, float]:
    row = summary[(summary["method"] == method) & (summary["subset"] == subset)]
    if row.empty:
        return float("nan"), float("nan")
    return float(row[metric].iloc[0]), float(row[f"{metric}_se"].iloc[0])


def mocae_accuracy_check(records: Sequence[Mapping[str, Any]]) -> float | None:
    """Largest |accuracy(MoCaE) - accuracy(Vanilla)| over MoCaE records (lib.moe.train stores the
    Vanilla accuracy of the same trained model in each MoCaE record); None without MoCaE runs.
    """
    diffs = []
    for r in map(MoERecord.from_record, records):
        if r.method != "mocae":
            continue
        van = r.metrics.get("vanilla_accuracy") or {}
        for s, block in r.subsets.items():
            if van.get(s) is not None:
                diffs.append(abs(block.accuracy - van[s]))
    return max(diffs) if diffs else None


def publish_results(summary: pd.DataFrame, records: Sequence[Mapping[str, Any]], subset: str | None = None) -> None:
    """Publish the numbers the paper-1 pages' tests and readers get: ``methods`` (those run),
    ``table`` (each method's mean metrics, keyed ``"method/subset"``; with ``subset``, only that
    subset, keyed by method) and ``mocae_accuracy_diff`` (:func:`mocae_accuracy_check`).
    """
    rows = summary if subset is None else summary[summary["subset"] == subset]
    publish("methods", sorted(set(summary["method"])))
    publish(
        "table",
        {
            (r.method if subset is not None else f"{r.method}/{r.subset}"): {m: float(getattr(r, m)) for m in METRICS}
            for r in rows.itertuples()
        },
    )
    publish("mocae_accuracy_diff", mocae_accuracy_check(records))


def not_run_claims(reason: str = "not run: data unavailable") -> pd.DataFrame:
    """The claims table of a page whose data is missing: every claim marked ``reason``, with what
    the paper reports for it (``PAPER_SAYS``) all the same."""
    check_choice(reason, VERDICTS, "reason")
    names = [
        "(i) robust objectives lower ECE on hard data",
        "(ii) per-expert calibration (MoCaE) helps little compared with robust training",
        "(iii) Robust Filtered trades less accuracy than Robust MoE",
        "(iv) the gains survive temperature scaling",
    ]
    return claims_table([{"claim": n, "paper": p, "ours": "—", "verdict": reason} for n, p in zip(names, PAPER_SAYS)])
