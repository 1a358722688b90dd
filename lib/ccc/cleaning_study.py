"""Paper 3's label cleaning experiment: the two-model rule against Confident Learning, and MMLU flags.

Paper: "Calibrated confidence cascades" (paper 3), section 3.5 (Fig. 6a, Table 3). The cleaning page
computes cross-fitted probabilities (:func:`lib.ccc.cleaning.cross_fitted_probs`) and the rule's curve
(:func:`lib.ccc.cleaning.calibrated_rule_curve`); this module runs Confident Learning on the same
probabilities (:func:`confident_learning`), compares the two at equal detection
(:func:`compare_at_detection`), flags MMLU questions for a model pair (:func:`mmlu_flags`,
:func:`top_flagged`) and gathers the numbers the page publishes (:func:`cleaning_published`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from lib.ccc import cleaning
from lib.data import mmlu

MMLU_PAIRS: dict[str, tuple[str, str]] = {
    "instruct": ("llama-3.1-70b-instruct", "llama-3.1-8b-instruct"),
    "base": ("llama-3.1-70b-base", "llama-3.1-8b-base"),
}
"""The MMLU model pairs whose agreeing confident answers against the key are flagged."""

RANKED_POINTS: int = 30
"""Points along each truncated Confident Learning ranking (its precision-detection curve)."""


def confident_learning(
    probs: Mapping[str, np.ndarray], labels: np.ndarray, is_noisy: np.ndarray
) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """Confident Learning (cleanlab) on each named set of out-of-sample probabilities: its flagged
    set as one point (method, n_flagged, precision, detection) and its self-confidence ranking
    truncated at every length as a curve (method "<name>, ranked")."""
    if not probs:
        raise ValueError("probs: need at least one set of probabilities")
    points, curves = [], []
    for name, p in probs.items():
        flags = cleaning.confident_learning_flags(p, labels, out_of_sample=True)
        prec, det = cleaning.precision_detection(flags, is_noisy)
        points.append({"method": name, "n_flagged": int(flags.sum()), "precision": prec, "detection": det})
        ranked = cleaning.confident_learning_flags(p, labels, out_of_sample=True, return_ranked=True)
        curves.append(cleaning.ranking_curve(ranked, is_noisy, n_points=RANKED_POINTS).assign(method=name + ", ranked"))
    return pd.DataFrame(points), curves


def compare_at_detection(ours: pd.DataFrame, cl_curves: list[pd.DataFrame]) -> pd.DataFrame:
    """At each of our points' detection rate, the precision of CL's best ranked curve (largest area
    under precision-detection), interpolated linearly along detection; ``cl_reaches`` is False
    where our detection lies beyond CL's largest."""
    if not cl_curves:
        raise ValueError("cl_curves: need at least one curve")
    best = max(cl_curves, key=lambda c: float(np.trapezoid(c["precision"], c["detection"])))
    cl_at = np.interp(ours["detection"], best["detection"], best["precision"])
    inside = ours["detection"] <= best["detection"].max()
    return ours.assign(cl_precision=cl_at, cl_reaches=inside)[
        ["k", "detection", "precision", "cl_precision", "cl_reaches"]
    ]


def mmlu_flags(probs: Mapping[str, np.ndarray], labels: np.ndarray, pair: str, k: int, n_bins: int) -> np.ndarray:
    """The calibrated rule for one MMLU model pair (:data:`MMLU_PAIRS`) at the top-``k`` bins."""
    if pair not in MMLU_PAIRS:
        raise ValueError(f"pair: {pair!r} is not one of {list(MMLU_PAIRS)}")
    m1, m2 = MMLU_PAIRS[pair]
    return cleaning.calibrated_flags(
        probs[m1].max(1), probs[m1].argmax(1), probs[m2].max(1), probs[m2].argmax(1), labels, k, n_bins
    )


def mmlu_flag_counts(probs: Mapping[str, np.ndarray], labels: np.ndarray, n_bins: int) -> pd.DataFrame:
    """Questions flagged per pair at k = 1, 3, 5 and ``n_bins`` (rows k, columns pairs)."""
    return pd.DataFrame(
        [
            {"pair": pair, "k": k, "flagged": int(mmlu_flags(probs, labels, pair, k, n_bins).sum())}
            for pair in MMLU_PAIRS
            for k in (1, 3, 5, n_bins)
        ]
    ).pivot(index="k", columns="pair", values="flagged")


def top_flagged(
    data: mmlu.MMLUData, probs: Mapping[str, np.ndarray], flags: np.ndarray, n: int, pair: str = "instruct"
) -> pd.DataFrame:
    """The ``n`` flagged questions the pair is most confident about (the smaller of its two
    calibrated confidences): subject, question, key and both models' answers with their confidences."""
    m1, m2 = MMLU_PAIRS[pair]
    q = data.questions
    idx = np.flatnonzero(flags)
    idx = idx[np.argsort(-np.minimum(probs[m1][idx].max(1), probs[m2][idx].max(1)))][:n]
    letters = mmlu.LETTERS

    def option(i: int, c: int) -> str:
        return f"{letters[c]}: {str(q.iloc[i][letters[c]])[:60]}"

    short = {m: m.replace("llama-3.1-", "").replace("b-", "B-") for m in (m1, m2)}
    return pd.DataFrame(
        {
            "subject": q["subject"].to_numpy()[idx],
            "question": [str(s)[:160] for s in q["question"].to_numpy()[idx]],
            "key": [option(i, data.labels[i]) for i in idx],
            short[m1]: [f"{option(i, probs[m1][i].argmax())} ({probs[m1][i].max():.2f})" for i in idx],
            short[m2]: [f"{option(i, probs[m2][i].argmax())} ({probs[m2][i].max():.2f})" for i in idx],
        }
    )


def cleaning_published(ours: pd.DataFrame, cl_points: pd.DataFrame, flagged_k3: int, both_pairs_k3: int) -> dict:
    """The numbers the cleaning page publishes: the rule at k = 1 and k = B, its whole curve, CL on
    the averaged probabilities (the last point) and the MMLU flag counts at k = 3."""
    return {
        "cleaning_precision_k1": round(float(ours["precision"].iloc[0]), 4),
        "cleaning_detection_k1": round(float(ours["detection"].iloc[0]), 4),
        "cleaning_precision_basic": round(float(ours["precision"].iloc[-1]), 4),
        "cleaning_detection_basic": round(float(ours["detection"].iloc[-1]), 4),
        "cleaning_precisions": [round(float(v), 4) for v in ours["precision"]],
        "cleaning_detections": [round(float(v), 4) for v in ours["detection"]],
        "cl_precision": round(float(cl_points["precision"].iloc[-1]), 4),
        "cl_detection": round(float(cl_points["detection"].iloc[-1]), 4),
        "mmlu_flagged_instruct_k3": int(flagged_k3),
        "mmlu_flagged_both_pairs_k3": int(both_pairs_k3),
    }
