"""Paper 3's calibration experiment: ECE before and after calibration on two halves, and monotonicity.

Paper: "Calibrated confidence cascades" (paper 3), section 3.1 (Fig. 1, Table 1). For every model,
:func:`ece_grid` splits the examples in halves, fits temperature scaling (and, for MMLU models, Platt
scaling on the answer-token logit) on the calibration half and measures the top-label ECE with
equal-count bins before and after on both halves, keeping the reliability tables;
:func:`monotonicity` asks whether accuracy rises with confidence; :func:`calibration_published`
and :func:`paper_table` give the page's published numbers and the paper's Table 1 beside ours.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from lib.ccc import cascade
from lib.ccc import confidence
from lib.calibration.posthoc import TemperatureScaler, apply_temperature
from lib.ccc.claims import PAPER_ECE_MMLU, PAPER_ECE_VISION
from lib.calibration.metrics import binary_ece, reliability_table

SPLITS: dict[str, str] = {"calibration half": "cal", "held-out half": "test"}
"""The two halves and their short names in the published keys."""

MONOTONE_STEP_TOL: float = 0.02
"""A step between adjacent bins counts as non-decreasing if accuracy drops by at most this."""


def ece_grid(
    models: Mapping[str, tuple[np.ndarray, np.ndarray]], platt_models: Collection[str], n_bins: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """For each named (logits, labels): ECE before, after TS and (for ``platt_models``) after Platt,
    on the calibration and the held-out half of one random split (``seed``).

    Returns ``results`` (model, split, stage, T, accuracy, ece) and the reliability tables of every
    (model, split, stage) stacked with those three columns added.
    """
    if n_bins < 1:
        raise ValueError(f"n_bins: need at least 1, got {n_bins}")
    rows, tables = [], []
    for name, (z, y) in models.items():
        cal, test = cascade.split_halves(len(y), seed=seed)
        T = TemperatureScaler().fit(z[cal], y[cal]).temperature
        platt = confidence.fit_confidence("platt", z[cal], y[cal]) if name in platt_models else None
        for split, idx in zip(SPLITS, (cal, test)):
            correct = z[idx].argmax(1) == y[idx]
            stages = [
                ("before", apply_temperature(z[idx], 1.0).max(1)),
                ("after TS", apply_temperature(z[idx], T).max(1)),
            ]
            if platt is not None:
                stages.append(("after Platt", platt(z[idx])))
            for stage, conf in stages:
                rows.append(
                    {
                        "model": name,
                        "split": split,
                        "stage": stage,
                        "T": T,
                        "accuracy": float(np.mean(correct)),
                        "ece": binary_ece(conf, correct, n_bins, binning="mass"),
                    }
                )  # top-label ECE
                t = reliability_table(conf, correct, n_bins, binning="mass")
                tables.append(t.assign(model=name, split=split, stage=stage))
    return pd.DataFrame(rows), pd.concat(tables, ignore_index=True)


def ece(results: pd.DataFrame, model: str, split: str, stage: str) -> float:
    """One ECE of :func:`ece_grid`'s results."""
    sel = results[(results["model"] == model) & (results["split"] == split) & (results["stage"] == stage)]
    if sel.empty:
        raise ValueError(f"model, split, stage: no result for {(model, split, stage)!r}")
    return float(sel["ece"].iloc[0])


def monotonicity(tables: pd.DataFrame, split: str = "held-out half", stage: str = "before") -> pd.DataFrame:
    """Per model: the Spearman correlation between a bin's mean confidence and its accuracy, and the
    share of adjacent bins where accuracy does not drop by more than :data:`MONOTONE_STEP_TOL`."""
    out = []
    for name in tables["model"].unique():
        t = tables[(tables["model"] == name) & (tables["split"] == split) & (tables["stage"] == stage)].dropna(
            subset=["acc"]
        )
        out.append(
            {
                "model": name,
                "spearman": float(spearmanr(t["conf"], t["acc"]).statistic),
                "non_decreasing_steps": float(np.mean(np.diff(t["acc"].to_numpy()) >= -MONOTONE_STEP_TOL)),
            }
        )
    return pd.DataFrame(out).set_index("model")


def published_key(model: str) -> str:
    """A model's short name in the published keys: "llama-3.1-8b-instruct" -> "8b_instruct"."""
    return model.split(" ")[0].replace("llama-3.1-", "").replace("-", "_").replace(".", "")


def calibration_published(results: pd.DataFrame, mono: pd.DataFrame, small: str) -> dict[str, float]:
    """The numbers the calibration page publishes: every model's ECE before/after TS on both halves,
    the small model's held-out ECE before/after TS and after Platt, and the minimum Spearman."""
    published = {}
    for name in results["model"].unique():
        for split, s in SPLITS.items():
            for stage, st in (("before", "before"), ("after TS", "after")):
                published[f"ece_{published_key(name)}_{s}_{st}"] = round(ece(results, name, split, stage), 4)
    published["ece_before"] = round(ece(results, small, "held-out half", "before"), 4)
    published["ece_after"] = round(ece(results, small, "held-out half", "after TS"), 4)
    for split, s in SPLITS.items():
        published[f"ece_platt_8b_instruct_{s}"] = round(ece(results, small, split, "after Platt"), 4)
    published["min_spearman"] = round(float(mono["spearman"].min()), 3)
    return published


def paper_table(results: pd.DataFrame, small: str, vision: str) -> pd.DataFrame:
    """The paper's Table 1 (MMLU 8B-Instruct with Platt scaling; ImageNet EVA02-L) beside ours: the
    small MMLU model after Platt and after TS, and the ``vision`` model after TS (rows), four ECEs each."""

    def ours(model: str, after: str) -> dict[str, float]:
        return {
            f"ours {s} {st}": ece(results, model, split, stage)
            for split, s in SPLITS.items()
            for st, stage in (("before", "before"), ("after", after))
        }

    return pd.DataFrame(
        [
            {
                "row": "MMLU, 8B-Instruct (ours: Platt, answer-token logit)",
                **PAPER_ECE_MMLU,
                **ours(small, "after Platt"),
            },
            {"row": "MMLU, 8B-Instruct (ours: temperature scaling)", **PAPER_ECE_MMLU, **ours(small, "after TS")},
            {
                "row": "vision (paper: ImageNet EVA02-L; ours: CIFAR-10 ResNet-50)",
                **PAPER_ECE_VISION,
                **ours(vision, "after TS"),
            },
        ]
    ).set_index("row")
