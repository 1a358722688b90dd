"""The cleaning page (``notebooks/cleaning.py``): paper 3, sections 2.3 and 3.5 (Fig. 6a, Table 3):
the two-model rule against Confident Learning on CIFAR-10 with injected noise, and MMLU questions
flagged by a model pair."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from lib.config import paper_numbers
from lib import report
from lib.ccc import cleaning
from lib.ccc.pages import CCCPage, logits_data
from lib.data import mmlu
from lib.validation import check_choice, check_same_length, to_flags

MMLU_PAIRS: dict[str, tuple[str, str]] = {
    "instruct": ("llama-3.1-70b-instruct", "llama-3.1-8b-instruct"),
    "base": ("llama-3.1-70b-base", "llama-3.1-8b-base"),
}
"""The MMLU model pairs whose agreeing confident answers against the key are flagged."""

RANKED_POINTS: int = 30
"""Points along each truncated Confident Learning ranking (its precision-detection curve)."""

TOP_BIN_PRECISION_MIN: float = 0.95
"""Our bar for 'the most confident bins flag almost only real errors' (precision at k = :data:`TOP_K`)."""

TOP_K: int = 3
"""The most confident bins that claim reads (3 of 15: the top bin alone holds too few flags to judge)."""

PAPER_CLEANING_PRECISION: float = paper_numbers("ccc")["cleaning"]["two_model_precision"]
"""The paper's precision of the rule's unique flags on ImageNet, checked by hand (Table 3)."""

PAPER_CL_PRECISION: float = paper_numbers("ccc")["cleaning"]["cl_precision"]
"""The paper's precision of Confident Learning's unique flags on ImageNet (Table 3)."""


def precision_se(precision: float, n_flagged: int) -> float:
    """The standard error of a precision measured on ``n_flagged`` flags, by the plus-four rule
    (Agresti and Caffo 2000): p~ = (x + 2) / (n + 4), SE = sqrt(p~ (1 - p~) / (n + 4)); unlike the
    plain binomial SE it is not 0 when every flag is right."""
    x = precision * n_flagged
    p = (x + 2) / (n_flagged + 4)
    return math.sqrt(p * (1 - p) / (n_flagged + 4))


def confident_learning(
    probs: Mapping[str, np.ndarray], labels: np.ndarray, is_noisy: np.ndarray
) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """Confident Learning (cleanlab) on each named set of out-of-sample probabilities: its flagged
    set as one point (method, n_flagged, precision, detection) and its self-confidence ranking
    truncated at every length as a curve (method "<name>, ranked"), whose last point is the whole set."""
    if not probs:
        raise ValueError("probs: need at least one set of probabilities")
    points, curves = [], []
    for name, p in probs.items():
        ranked = cleaning.confident_learning_flags(p, labels, out_of_sample=True, return_ranked=True)
        curve = cleaning.ranking_curve(ranked, is_noisy, n_points=RANKED_POINTS)
        last = {k: float(curve[k].iloc[-1]) for k in ("precision", "detection")}
        points.append({"method": name, "n_flagged": int(ranked.size), **last})
        curves.append(curve.assign(method=name + ", ranked"))
    return pd.DataFrame(points), curves


def compare_at_detection(ours: pd.DataFrame, cl_curves: list[pd.DataFrame]) -> pd.DataFrame:
    """At each of our points' detection rate, the precision of CL's best ranked curve (largest area
    under precision-detection), interpolated linearly along detection; ``cl_reaches`` is False (and
    ``cl_precision`` NaN) where our detection lies beyond CL's largest."""
    if not cl_curves:
        raise ValueError("cl_curves: need at least one curve")
    best = max(cl_curves, key=lambda c: float(np.trapezoid(c["precision"], c["detection"])))
    inside = ours["detection"] <= best["detection"].max()
    cl_at = np.where(inside, np.interp(ours["detection"], best["detection"], best["precision"]), np.nan)
    return ours.assign(cl_precision=cl_at, cl_reaches=inside)[
        ["k", "detection", "precision", "cl_precision", "cl_reaches"]
    ]


def mmlu_flags(probs: Mapping[str, np.ndarray], labels: np.ndarray, pair: str, k: int, n_bins: int) -> np.ndarray:
    """The calibrated rule for one MMLU model pair (:data:`MMLU_PAIRS`) at the top-``k`` bins."""
    check_choice(pair, MMLU_PAIRS, "pair")
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


def top_flagged(data: mmlu.MMLUData, probs: Mapping[str, np.ndarray], flags: np.ndarray, n: int) -> pd.DataFrame:
    """The ``n`` flagged questions the instruct pair is most confident about (the smaller of its two
    calibrated confidences): subject, question, key and both models' answers with their confidences."""
    m1, m2 = MMLU_PAIRS["instruct"]
    q = data.questions
    idx = np.flatnonzero(flags)
    idx = idx[np.argsort(-np.minimum(probs[m1][idx].max(1), probs[m2][idx].max(1)))][:n]

    def option(i: int, c: int) -> str:
        return f"{mmlu.LETTERS[c]}: {str(q.iloc[i][mmlu.LETTERS[c]])[:60]}"

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


def overlap_claim(rule_flags: np.ndarray, cl_flags: np.ndarray, is_noisy: np.ndarray) -> dict[str, Any]:
    """Table 3's overlap as a claim row: of the real label errors Confident Learning flags (``cl_flags``
    and ``is_noisy``), the share the two-model rule flags too (``rule_flags``), against one half
    ("most"), its noise bar :func:`precision_se` on CL's real errors (a closed-form binomial SE:
    infinite degrees of freedom); ``ours`` also counts the real errors each finds that the other misses.
    ``paper_own`` is not testable: the text extraction lost a cell of Table 3's CL row, and neither row
    reports an error. Hand case: CL finds errors {0, 1, 2, 3}, the rule {1, 2, 3, 4, 5}: 3 of 4 recovered."""
    rule, cl, noisy = (
        to_flags(f, n) for f, n in ((rule_flags, "rule_flags"), (cl_flags, "cl_flags"), (is_noisy, "is_noisy"))
    )
    check_same_length(rule, noisy, "rule_flags", "is_noisy")
    check_same_length(cl, noisy, "cl_flags", "is_noisy")
    found = cl & noisy
    n, both = int(found.sum()), int((found & rule).sum())
    share, se = (both / n, precision_se(both / n, n)) if n else (float("nan"), float("nan"))
    extra = int((rule & noisy & ~cl).sum())
    verdict = report.t_verdict(share - 0.5, se, df=math.inf) if n else report.VERDICTS[2]
    return report.claim_row(
        claim="the two-model rule recovers most of the real label errors Confident Learning finds (more than half)",
        paper="'Our method recovers most mislabeled samples found by CL and additionally discovers a much "
        "larger set of label errors' (sec. 3.5, Table 3, ImageNet)",
        ours=f"{both} of CL's {n} real errors ({share:.3f}, SE {se:.3f}); "
        f"the rule finds {extra} real errors CL misses, CL {n - both} the rule misses",
        verdict=verdict,
    )


def claims(curve: pd.DataFrame, compare: pd.DataFrame, *more: Mapping[str, Any]) -> pd.DataFrame:
    """The claims table: the page's three claims from the rule's ``curve`` (k = 1..B) and its comparison
    with CL at equal detection (``compare``, :func:`compare_at_detection`), each precision's noise bar :func:`precision_se` (CL's on about as
    many flags; "precision falls" compares k = 1's flags with those k = 2..B add, as k = B's flags
    contain k = 1's: precision at k = B falls below k = 1's exactly when the added flags' does), judged by :func:`lib.report.t_verdict` at infinite degrees of freedom (binomial SEs:
    the plus-four interval is a normal-approximation one); ``paper_own`` is not testable (Table 3
    gives no flag counts); ``more`` rows follow them (:func:`overlap_claim`)."""
    if len(curve) == 0:
        raise ValueError("curve: needs at least one point")
    prec, det, n = (curve[c].to_numpy() for c in ("precision", "detection", "n_flagged"))
    hits = prec * n
    n_noisy = float(hits[-1] / det[-1]) if det[-1] > 0 else 0.0
    t = min(TOP_K, len(curve)) - 1  # the row of k = TOP_K
    falls, added_line = report.VERDICTS[2], "no flags added after k = 1"
    if n[0] > 0 and n[-1] > n[0]:  # k = B's flags hold k = 1's: test k = 1 against the flags added after it
        added = (hits[-1] - hits[0]) / (n[-1] - n[0])  # disjoint from k = 1's, so the two SEs add
        se = math.hypot(precision_se(prec[0], n[0]), precision_se(added, int(n[-1] - n[0])))
        falls = report.t_verdict(prec[0] - added, se, df=math.inf)
        ks = f"k = 2..{len(curve)}" if len(curve) > 2 else "k = 2"
        added_line = f"{int(n[-1] - n[0])} flags added by {ks}: precision {added:.3f}"
    top = report.t_verdict(prec[t] - TOP_BIN_PRECISION_MIN, precision_se(prec[t], int(n[t])), df=math.inf)
    reached = compare[compare["cl_reaches"]].merge(curve[["k", "n_flagged"]], on="k")
    tied = (reached["precision"] >= 1) & (reached["cl_precision"] >= 1)  # at the ceiling neither is more precise
    reached, n_tied = reached[~tied], int(tied.sum())

    def versus_cl(r: pd.Series) -> str:
        n_cl = max(int(round(r["detection"] * n_noisy / max(r["cl_precision"], 1e-12))), 0)
        se = math.hypot(precision_se(r["precision"], int(r["n_flagged"])), precision_se(r["cl_precision"], n_cl))
        return report.t_verdict(float(r["precision"] - r["cl_precision"]), se, df=math.inf)

    cl_verdicts = [versus_cl(r) for _, r in reached.iterrows()]
    counts = {v: cl_verdicts.count(v) for v in report.VERDICTS[:3]}
    rows = [
        report.claim_row(
            claim="precision falls as detection rises (k = 1's flags against those the larger k add)",
            paper="'as the detection rate increases ... the cleaning precision consistently declines' "
            "(sec. 3.5, Fig. 6a; plot only)",
            ours=f"precision {prec[0]:.3f} -> {prec[-1]:.3f} ({n[0]} -> {n[-1]} flags; {added_line}), "
            f"detection {det[0]:.3f} -> {det[-1]:.3f}",
            verdict=falls,
        ),
        report.claim_row(
            claim="at equal detection, the two-model rule is more precise than CL (every k CL's curve reaches)",
            paper=f"'across the entire detection range' higher than CL (Fig. 6a); unique flags "
            f"{PAPER_CLEANING_PRECISION} vs CL {PAPER_CL_PRECISION} (Table 3, ImageNet)",
            ours=f"of {len(cl_verdicts)} points: {counts[report.VERDICTS[0]]} more precise, "
            f"{counts[report.VERDICTS[1]]} less, {counts[report.VERDICTS[2]]} within the noise"
            + (f"; {n_tied} where both are exactly 1 left out (neither can be more precise)" if n_tied else ""),
            verdict=report.every(cl_verdicts) if cl_verdicts else report.VERDICTS[2],
        ),
        report.claim_row(
            claim="the most confident bins flag almost only real errors "
            f"(precision at k = {t + 1} > {TOP_BIN_PRECISION_MIN})",
            paper="the book's own bar: the paper says only that 'higher confidence consistently yields higher "
            f"cleaning precision' (sec. 3), with no number for the top bins; {TOP_BIN_PRECISION_MIN} is ours",
            ours=f"{prec[t]:.3f} on {int(n[t])} flags (SE {precision_se(prec[t], int(n[t])):.3f})",
            verdict=top,
            kind=report.KINDS[2],
        ),
    ]
    return report.claims_table(rows + list(more))


def published(
    ours: pd.DataFrame, cl_points: pd.DataFrame, flag_instruct: np.ndarray, both_pairs: int
) -> dict[str, Any]:
    """The rule at k = 1 and k = B and its whole curve (``ours``, :func:`lib.ccc.cleaning.calibrated_rule_curve`),
    CL on the averaged probabilities (the last of :func:`confident_learning`'s ``cl_points``) and the
    MMLU flag counts at k = 3 (the instruct pair's ``flag_instruct``, ``both_pairs`` flagged by both pairs)."""
    out: dict[str, Any] = {"mmlu_flagged_instruct_k3": int(np.sum(flag_instruct))}
    out["mmlu_flagged_both_pairs_k3"] = int(both_pairs)
    for q in ("precision", "detection"):
        rule = [round(float(v), 4) for v in ours[q]]
        out |= {f"cleaning_{q}_k1": rule[0], f"cleaning_{q}_basic": rule[-1], f"cleaning_{q}s": rule}
        out[f"cl_{q}"] = round(float(cl_points[q].iloc[-1]), 4)
    return out


def paper_table(ours: pd.DataFrame, cl_points: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 3 precisions beside ours (the rule's curve ``ours`` at k = 3, the best of
    :func:`confident_learning`'s ``cl_points``)."""
    rule = float(ours.loc[ours["k"] == 3, "precision"].iloc[0])
    rows = [
        (
            "precision of the rule (paper: unique flags, ImageNet; ours: k = 3, CIFAR-10)",
            PAPER_CLEANING_PRECISION,
            rule,
        ),
        (
            "precision of Confident Learning (best of our three)",
            PAPER_CL_PRECISION,
            float(cl_points["precision"].max()),
        ),
    ]
    return pd.DataFrame(rows, columns=["quantity", "paper", "ours"]).set_index("quantity")


class CleaningPage(CCCPage):
    """Paper 3's cleaning page: its settings, scale line and data (the notebook injects the noise,
    flags with the two-model rule and Confident Learning, and flags MMLU questions)."""

    name = "cleaning"
    title = "Label cleaning with two models: Section 3.5"
    real_summary = (
        "CIFAR-10 ResNet-50 {losses} test logits with {noise_rate:.0%} injected symmetric noise (seed {seed}); "
        "MMLU x Llama-3.1 70B/8B"
    )
    synthetic_summary = "synthetic logits ({n_synthetic} examples), {noise_rate:.0%} noise, seed {seed}"

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> dict[str, Any]:
        """The two ResNet-50s' CIFAR-10 logits with the clean labels (``resnets``, ``labels``) and
        the MMLU data (``mmlu``); synthetic at smoke scale."""
        md, rz, y = logits_data(cfg["data"] == "real", cfg["resnet_losses"], cfg["n_synthetic"], cfg["seed"])
        return {"resnets": rz, "labels": y, "mmlu": md}


PAGE = CleaningPage()
