"""Paper 4's claims judged from the numbers: the trained losses against Table 2 and Figure 2
(:func:`reweighted_claims`) and the released runs against Table 2 (:func:`released_claims`), each
threshold named.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lib.rr import losses as rw
from lib.rr.experiment import LABELS, PAPER_RESNET50
from lib.validation import check_choice

__all__ = [
    "AU_ACCURACY_COST",
    "CLAIM_TOL",
    "FINE_TOL_FACTOR",
    "RELEASED_ECE_TOL",
    "RELEASED_NAMES",
    "released_claims",
    "reweighted_claims",
]


CLAIM_TOL: float = 0.005
"""ECE (and confidence-gap) differences within this (half an ECE point) are 'inconclusive at this scale'."""

FINE_TOL_FACTOR: float = 5.0
"""Class-wise ECE and the ECE drop from temperature scaling are smaller numbers -- they are judged
within ``tol / FINE_TOL_FACTOR``."""

AU_ACCURACY_COST: float = 0.025
"""'AU loss costs little accuracy' holds when the AU run is at most this far (2.5 points) below XE
(Table 2: 92.52 vs 94.51 on ResNet-50, 2 points)."""

RELEASED_ECE_TOL: float = 0.01
"""A released run's ECE is 'as in Table 2' when within this (one point) of the paper's."""


def _verdict(diff: float, tol: float) -> str:
    """'held' if ``diff`` > ``tol``, 'did not hold' if ``diff`` < -``tol``, else inconclusive."""
    if diff > tol:
        return "held"
    if diff < -tol:
        return "did not hold"
    return "inconclusive at this scale"


def reweighted_claims(
    metrics: Mapping[str, Mapping[str, float]], tol: float = CLAIM_TOL, row: str = "resnet50"
) -> list[dict[str, Any]]:
    """The paper's claims (section 5 and Figure 2) judged from ``metrics[loss]`` (fractions, from
    :func:`lib.rr.experiment.evaluate_logits`); differences within ``tol`` (default half an ECE point) are
    'inconclusive at this scale'. Claims whose losses are missing are skipped. The "paper" column
    quotes Table 2's ``row`` (a key of ``lib.rr.losses.PAPER_CIFAR10``: the architecture the page
    compares with); class-wise ECE is in Table 1, which has a ResNet-50 row only.
    """
    check_choice(row, tuple(rw.PAPER_CIFAR10), "row")
    rows: list[dict[str, Any]] = []
    m = metrics
    ref = rw.PAPER_CIFAR10[row]
    arch, acc, ece_ = ref["label"], ref["accuracy"], ref["ece"]

    def add(claim: str, paper: str, ours: str, verdict: str) -> None:
        rows.append({"claim": claim, "paper": paper, "ours": ours, "verdict": verdict})

    if "au" in m and "xe" in m:
        add(
            "AU loss has lower ECE than XE",
            f"{ece_['au']:.2f} vs {ece_['xe']:.2f} ({arch}, Table 2, x100)",
            f"{100 * m['au']['ece']:.2f} vs {100 * m['xe']['ece']:.2f}",
            _verdict(m["xe"]["ece"] - m["au"]["ece"], tol),
        )
        cw = PAPER_RESNET50
        add(
            "AU loss has lower cwECE than XE",
            f"{cw['au']['cwece']:.3f} vs {cw['xe']['cwece']:.3f} (ResNet-50, Table 1, x100)"
            + ("" if row == "resnet50" else f"; Table 1 has no {arch} row"),
            f"{100 * m['au']['cwece']:.3f} vs {100 * m['xe']['cwece']:.3f}",
            _verdict(m["xe"]["cwece"] - m["au"]["cwece"], tol / FINE_TOL_FACTOR),
        )
        gap = m["xe"]["accuracy"] - m["au"]["accuracy"]
        add(
            f"AU loss costs little accuracy (at most {100 * AU_ACCURACY_COST:g} points below XE)",
            f"{acc['au']:.2f} vs {acc['xe']:.2f} ({arch}, Table 2)",
            f"{100 * m['au']['accuracy']:.2f} vs {100 * m['xe']['accuracy']:.2f}",
            _verdict(AU_ACCURACY_COST - gap, 0.0),
        )
    if "fl53" in m or "focal" in m:
        k = "fl53" if "fl53" in m else "focal"
        add(
            "focal loss leaves the model overconfident (mean confidence > accuracy)",
            "overconfident (Fig. 2)",
            f"confidence - accuracy = {100 * m[k]['conf_gap']:+.2f}",
            _verdict(m[k]["conf_gap"], tol),
        )
    for k, label in (("inverse_focal", "inverse focal"), ("aurc", "AURC")):
        if k in m:
            add(
                f"{label} loss leaves the model underconfident",
                "underconfident (Fig. 2)",
                f"confidence - accuracy = {100 * m[k]['conf_gap']:+.2f}",
                _verdict(-m[k]["conf_gap"], tol),
            )
    if "xe" in m:
        add(
            "temperature scaling lowers XE's ECE",
            "lower in Tables 1 and 4",
            f"{100 * m['xe']['ece']:.2f} -> {100 * m['xe']['ece_ts']:.2f}",
            _verdict(m["xe"]["ece"] - m["xe"]["ece_ts"], tol / FINE_TOL_FACTOR),
        )
    return rows


# The released files' loss names -> the names used here (the released "focal" run is taken to be
# the paper's focal baseline, FL-53; the file does not say which gamma it used).
RELEASED_NAMES: dict[str, str] = {
    "ce": "xe",
    "focal": "fl53",
    "dual_focal": "dual_focal",
    "inverse_focal": "inverse_focal",
    "ece_kde": "kde_xe",
    "aurc": "aurc",
}


def released_claims(
    metrics: Mapping[str, Mapping[str, float]],
    paper: Mapping[str, Mapping[str, float]] = PAPER_RESNET50,
    tol: float = RELEASED_ECE_TOL,
) -> list[dict[str, Any]]:
    """Claims checkable on the released ResNet-50 logits: each run's ECE within ``tol`` (one
    point) of the paper's Table 2, and dual focal's ECE the lowest of the released runs (as in
    Table 2's ResNet-50 row)."""
    rows: list[dict[str, Any]] = []
    for name, m in metrics.items():
        if name not in paper:
            continue
        diff = abs(100 * m["ece"] - paper[name]["ece"]) / 100
        rows.append(
            {
                "claim": f"{LABELS.get(name, name)}: ECE as in Table 2 (within {100 * tol:.0f} point)",
                "paper": f"{paper[name]['ece']:.2f}",
                "ours": f"{100 * m['ece']:.2f}",
                "verdict": "held" if diff <= tol else "did not hold",
            }
        )
    if "dual_focal" in metrics and len(metrics) > 1:
        best = min(metrics, key=lambda k: metrics[k]["ece"])
        rows.append(
            {
                "claim": "dual focal has the lowest ECE of the released runs",
                "paper": "Dual 1.27 lowest in the ResNet-50 row (AU aside)",
                "ours": f"lowest: {LABELS.get(best, best)} ({100 * metrics[best]['ece']:.2f})",
                "verdict": "held" if best == "dual_focal" else "did not hold",
            }
        )
    return rows
