"""The CivilComments page (``notebooks/civilcomments.py``): paper 1's Table 3 and Figures 2, E.6: its
data (WILDS CivilComments, or labelled synthetic comments at smoke scale), plan, the table behind
Figure 2 and its claims, (i)-(iv), MoCaE's equal accuracy and Figure 2's, gated by the book's
accuracy floor. Table 3 lost its digits in the text extraction: the paper's own verdict is "not testable"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lib import report
from lib.data.locate import DataNotFoundError
from lib.data.synthetic import synthetic_comments
from lib.data.text import TextBundle, load_civilcomments
from lib.moe import experiment as exp
from lib.moe import paper as paper_text
from lib.moe.claims import gate, moe_claims, verdict_of
from lib.moe.pages import MoEPage
from lib.moe.record import run_fields
from lib.validation import to_numpy

#: The smallest group-ECE difference Figure 2's claim is about (the margin of the rule).
#:
#: Per group, the best plain method's ECE minus the best robust method's, per seed, is judged by
#: :func:`lib.report.paired_verdict`; the claim holds when every group holds and does not hold when any
#: group does not.
GROUP_ECE_MARGIN: float = 0.01
#: The plain methods of Figure 2's claim, by their table labels (their lower group ECE is compared).
PLAIN_LABELS: tuple[str, ...] = ("Vanilla MoE", "MoCaE")
#: The robust methods of Figure 2's claim, by their table labels (their lower group ECE is compared).
ROBUST_LABELS: tuple[str, ...] = ("Robust MoE", "Robust Filtered")


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
    """The sentence :func:`calibook.page.publish_scale` prints (backbone, data, sizes, epochs and seeds)."""
    if data is None:
        return "not run: CivilComments (WILDS) is not available on this machine"
    sizes = data.sizes()
    net = (
        "tiny random 1-layer BERT (smoke only)"
        if cfg["backbone"] == exp.TINY_TEXT
        else f"{cfg['backbone'][5:]} (or its offline fallback, named below)"
    )
    return (
        f"{net}; {'WILDS CivilComments' if cfg['data'] == 'real' else 'SYNTHETIC template comments (CI only)'}: "
        f"{sizes['train']} train, {sizes['val']} val, {sizes['test']} test ({sizes['hard']} identity); "
        f"{cfg['epochs']} epochs, lr {cfg['lr']}; seeds {cfg['seeds']}"
    )


def group_frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """ECE per method, seed and identity group, from each record's per-group evaluation
    (``metrics["groups"]``)."""
    rows = [
        {"method": exp.METHOD_LABELS[r["method"]], "seed": seed, "group": g, "ece": b["ece"], "n": b["n"]}
        for r, seed in ((r, run_fields(r)["seed"]) for r in records)
        for g, b in (r["metrics"].get("groups") or {}).items()
    ]
    return pd.DataFrame(rows, columns=["method", "seed", "group", "ece", "n"])


def group_table(
    records: Sequence[Mapping[str, Any]],
    predictions: Mapping[str, Mapping[str, np.ndarray]],
    test_groups: Mapping[str, Any],
    groups: Sequence[str],
) -> pd.DataFrame:
    """ECE (:func:`group_frame`) and accuracy (from the pooled predictions and the boolean test masks
    ``test_groups[g]``) per method and identity group, averaged over seeds (Figure 2)."""
    if not groups:
        raise ValueError("groups: must name at least one identity group")
    group_ece = group_frame(records).groupby(["method", "group"], as_index=False)[["ece", "n"]].mean()
    masks = {g: to_numpy(test_groups[g], "test_groups", dtype=bool) for g in groups}
    acc_rows = []
    for m, p in predictions.items():
        for g in groups:
            mask = np.tile(masks[g], len(p["correct"]) // len(masks[g]))
            if mask.any():
                acc_rows.append({"method": m, "group": g, "accuracy": float(np.asarray(p["correct"])[mask].mean())})
    return group_ece.merge(
        pd.DataFrame(acc_rows, columns=["method", "group", "accuracy"]), on=["method", "group"], how="left"
    )


def group_ece_published(groups: pd.DataFrame) -> dict[str, float]:
    """The page's published group ECEs from :func:`group_table`, keyed ``"method/group"``."""
    return {f"{r.method}/{r.group}": float(r.ece) for r in groups.dropna(subset=["ece"]).itertuples()}


def group_claim(per_seed: pd.DataFrame, margin: float = GROUP_ECE_MARGIN) -> list[dict[str, str]]:
    """Figure 2's claim from :func:`group_frame`: in every identity group the best robust method's ECE
    is below the best plain method's (best by mean), judged per group on per-seed differences by
    :func:`lib.report.paired_verdict`; held when every group holds, did not hold when any group does
    not, else inconclusive. No row when no group has both kinds of method."""
    verdicts: dict[str, str] = {}
    for g, rows in per_seed.dropna(subset=["ece"]).groupby("group"):
        ece = rows.pivot_table(index="seed", columns="method", values="ece")
        plain = [m for m in PLAIN_LABELS if m in ece]
        robust = [m for m in ROBUST_LABELS if m in ece]
        if plain and robust:
            best_plain, best_robust = ece[plain].mean().idxmin(), ece[robust].mean().idxmin()
            verdicts[str(g)] = verdict_of((ece[best_plain] - ece[best_robust]).dropna().to_numpy(), margin)
    if not verdicts:
        return []
    lower, higher, unsure = (sum(x == v for x in verdicts.values()) for v in report.VERDICTS[:3])
    return [
        report.claim_row(
            "robust methods lower ECE in every identity group (Fig. 2)",
            "consistent reduction across the eight groups",
            f"of {len(verdicts)} groups: lower in {lower}, higher in {higher}, inconclusive in {unsure} "
            f"(margin {margin:g})",
            report.every(verdicts.values()),
        )
    ]


def claims(
    frame: pd.DataFrame,
    records: Sequence[Mapping[str, Any]],
    test_labels: Any,
    paper_accuracy: float = paper_text.PAPER_CIVIL_BEST_ACCURACY,
) -> tuple[pd.DataFrame, str]:
    """Every claim of the page: (i)-(iv) and MoCaE's equal accuracy on the identity-mentioning comments,
    then :func:`group_claim`, gated (:func:`lib.moe.claims.gate`) against ``paper_accuracy`` above chance,
    the majority rate of ``test_labels`` (the task is imbalanced). Returns the claims table and the floor
    rule (:func:`lib.report.floor_rule`) followed by the gate's sentence."""
    claims = moe_claims(frame, records, subset="hard", subset_name="identity-mentioning")
    rows = claims.to_dict("records") + group_claim(group_frame(records))
    return gate(rows, frame, paper_accuracy, test_labels)[:2]


class CivilCommentsPage(MoEPage):
    name = "civilcomments"
    title = "CivilComments: Table 3, Figure 2"
    rank = 3
    needs = ("transformers",)

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> Any:
        data, why = load_data(cfg)
        if data is None:
            raise DataNotFoundError(why)
        return data


PAGE = CivilCommentsPage()
