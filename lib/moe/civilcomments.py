"""The CivilComments page's own table and claims (ECE and accuracy per identity group, Figure 2).

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1), Table 3 and Figure 2.
The shared claims (i)-(iv) are :func:`lib.moe.claims.moe_claims`; here are the table
behind Figure 2 (:func:`group_table`), the claim only CivilComments can judge (robust methods lower
ECE in every identity group, :func:`group_claim`) and :func:`civilcomments_claims`, which puts every
claim of the page together and gates it by the book's accuracy floor against the paper's best
accuracy (``lib.moe.paper.PAPER_CIVIL_BEST_ACCURACY``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lib import report
from lib.data.locate import DataNotFoundError
from lib.data.synthetic import synthetic_comments
from lib.data.text import TextBundle, load_civilcomments
from lib.moe import experiment as exp
from lib.moe.experiment import METHOD_LABELS
from lib.moe.claims import best_accuracy, moe_claims
from lib.moe.paper import PAPER_CIVIL_BEST_ACCURACY

GROUP_ECE_MARGIN: float = 0.01
"""How much lower (or higher) the robust methods' group ECE must be to count as a win (or a loss).

A group counts as a win when the best robust method's ECE is below the best plain method's by more
than this margin, as a loss when it is above by more; the claim holds when every group is a win and
does not hold when any group is a loss."""

PLAIN_LABELS: tuple[str, ...] = ("Vanilla MoE", "MoCaE")
"""The plain methods of Figure 2's claim, by their table labels (their lower group ECE is compared)."""

ROBUST_LABELS: tuple[str, ...] = ("Robust MoE", "Robust Filtered")
"""The robust methods of Figure 2's claim, by their table labels (their lower group ECE is compared)."""


def load_data(cfg: Mapping[str, Any], data_dir: str = "") -> tuple[TextBundle | None, str | None]:
    """The page's comments at the scale of ``cfg``, WILDS CivilComments when ``cfg["data"]`` is
    "real" (None and the loader's message when it is missing from ``data_dir`` and the usual
    places), else the synthetic template comments of the smoke scale (``cfg["n_train"]``, seed 0)."""
    if cfg["data"] != "real":
        return synthetic_comments(n=cfg["n_train"], seed=0), None
    try:
        return load_civilcomments(data_dir, n_train=cfg["n_train"], seed=0), None
    except DataNotFoundError as err:
        return None, str(err)


def scale_summary(cfg: Mapping[str, Any], data: TextBundle | None) -> str:
    """The sentence :func:`lib.report.publish_scale` prints (backbone, data, sizes, epochs and seeds)."""
    if data is None:
        return "not run: CivilComments (WILDS) is not available on this machine"
    sizes = data.sizes()
    return (
        (
            "tiny random 1-layer BERT (smoke only)"
            if cfg["backbone"] == exp.TINY_TEXT
            else f"{cfg['backbone'][5:]} (or its offline fallback, named below)"
        )
        + "; "
        f"{'WILDS CivilComments' if cfg['data'] == 'real' else 'SYNTHETIC template comments (CI only)'}: "
        f"{sizes['train']} train, {sizes['val']} val, {sizes['test']} test ({sizes['hard']} identity); "
        f"{cfg['epochs']} epochs, lr {cfg['lr']}; seeds {cfg['seeds']}"
    )


def run(configs: Sequence[Any], data: TextBundle, train: bool) -> list[dict[str, Any]]:
    """The page's runs (``configs``: its :class:`~lib.page.Page`'s, where the smoke scale's backbone is
    a tiny random BERT built on the spot) through the engine (:func:`lib.moe.experiment.run_methods`),
    the encoder's numerical RuntimeWarnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return exp.run_methods(configs, data, train=train)


def group_table(
    records: Sequence[Mapping[str, Any]],
    predictions: Mapping[str, Mapping[str, np.ndarray]],
    test_groups: Mapping[str, Any],
    groups: Sequence[str],
) -> pd.DataFrame:
    """ECE and accuracy per method and identity group, averaged over seeds (Figure 2).

    ECE comes from each record's per-group evaluation (``metrics["groups"]``); accuracy is
    recomputed from the pooled predictions (:func:`lib.moe.experiment.pooled_predictions`) and the
    boolean test masks ``test_groups[g]`` of the ``groups``.
    """
    if not groups:
        raise ValueError("groups: must name at least one identity group")
    rows = []
    for rec in records:
        label = METHOD_LABELS[rec["method"]]
        for g, block in (rec["metrics"].get("groups") or {}).items():
            rows.append({"method": label, "group": g, "ece": block["ece"], "n": block["n"]})
    group_ece = (
        pd.DataFrame(rows, columns=["method", "group", "ece", "n"])
        .groupby(["method", "group"], as_index=False)[["ece", "n"]]
        .mean()
    )
    masks = {
        g: np.asarray(test_groups[g].numpy() if hasattr(test_groups[g], "numpy") else test_groups[g]).astype(bool)
        for g in groups
    }
    acc_rows = []
    for m, p in predictions.items():
        for g in groups:
            reps = len(p["correct"]) // len(masks[g])
            mask = np.tile(masks[g], reps)
            if mask.any():
                acc_rows.append({"method": m, "group": g, "accuracy": float(np.asarray(p["correct"])[mask].mean())})
    return group_ece.merge(
        pd.DataFrame(acc_rows, columns=["method", "group", "accuracy"]), on=["method", "group"], how="left"
    )


def group_ece_published(groups: pd.DataFrame) -> dict[str, float]:
    """The page's published group ECEs from :func:`group_table`, keyed ``"method/group"``."""
    return {f"{r.method}/{r.group}": float(r.ece) for r in groups.dropna(subset=["ece"]).itertuples()}


def group_claim(groups: pd.DataFrame, margin: float = GROUP_ECE_MARGIN) -> list[dict[str, str]]:
    """Figure 2's claim from :func:`group_table`, that the best robust method's ECE is lower than the best
    plain method's in every identity group; no row when no group has both."""
    plain = groups[groups["method"].isin(PLAIN_LABELS)].groupby("group")["ece"].min()
    robust = groups[groups["method"].isin(ROBUST_LABELS)].groupby("group")["ece"].min()
    both = pd.concat([plain, robust], axis=1, keys=["plain", "robust"]).dropna()
    if not len(both):
        return []
    wins = int((both["robust"] < both["plain"] - margin).sum())
    losses = int((both["robust"] > both["plain"] + margin).sum())
    verdict = "held" if wins == len(both) else ("did not hold" if losses > 0 else "inconclusive at this scale")
    return [
        {
            "claim": "robust methods lower ECE in every identity group (Fig. 2)",
            "paper": "consistent reduction across the eight groups",
            "ours": f"lower by > {margin:g} in {wins} of {len(both)} groups, higher by > {margin:g} in {losses}",
            "verdict": verdict,
        }
    ]


def civilcomments_claims(
    summary: pd.DataFrame,
    records: Sequence[Mapping[str, Any]],
    groups: pd.DataFrame,
    chance: float,
    paper_accuracy: float = PAPER_CIVIL_BEST_ACCURACY,
) -> tuple[pd.DataFrame, str]:
    """Every claim of the CivilComments page, gated by the book's accuracy floor.

    Claims (i)-(iv) and MoCaE's equal accuracy on the identity-mentioning comments
    (:func:`lib.moe.claims.moe_claims`), then :func:`group_claim`; ``chance`` is the
    majority rate of the test labels (the task is imbalanced). Returns the claims table and the
    gate's sentence (:func:`lib.report.gate_claims`).
    """
    claims = moe_claims(summary, records, subset="hard", subset_name="identity-mentioning")
    rows = report.claims_table(claims.to_dict("records") + group_claim(groups)).to_dict("records")
    gated, why = report.gate_claims(rows, accuracy=best_accuracy(summary), paper_accuracy=paper_accuracy, chance=chance)
    return report.claims_table(gated), why
