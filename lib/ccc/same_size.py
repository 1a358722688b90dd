"""Paper 3's same-size routing experiment: route each example of a pair of equally large models by
the calibrated confidence advantage of its bin, over random splits.

Paper: "Calibrated confidence cascades" (paper 3), section 3.3 (Fig. 2b-c, Table 2). :func:`route_grid`
runs every pair and split (bins on the first model and joint bins, calibrated and not, against
each model alone and the oracle); :func:`gains` and :func:`same_size_published` summarise it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from lib.ccc import cascade
from lib.ccc import confidence
from lib.ccc import same_size_routing

PUBLISHED_KEYS: tuple[str, ...] = ("mmlu_8b", "mmlu_70b", "cifar10")
"""The published short names of the page's three pairs, in the page's order."""


def route_grid(
    pairs: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
    n_splits: int,
    n_bins: int,
    joint_bins: int,
    seed: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """For each named (logits of the first model, logits of the second, labels) and split (seed
    ``seed + s``): test accuracies of each model alone, the oracle, routing with TS by bins on the
    first model, by ``joint_bins`` x ``joint_bins`` joint bins, uncalibrated, and the best point of the
    TS cascade curve (one row each). Also the CC / UC / RC curves of split 0 (one frame, ``panel`` = pair)."""
    if n_splits < 1:
        raise ValueError(f"n_splits: need at least 1, got {n_splits}")
    rows, curves = [], []
    for pair, (z1, z2, y) in pairs.items():
        for s in range(n_splits):
            cal, test = cascade.split_halves(len(y), seed=seed + s)
            out = {
                c: (confidence.model_outputs(z1, y, cal, test, c), confidence.model_outputs(z2, y, cal, test, c))
                for c in ("temperature", "none")
            }
            first, second = out["temperature"]
            row = {
                "pair": pair,
                "split": s,
                "first alone": first.acc_test,
                "second alone": second.acc_test,
                "oracle (either right)": float(np.mean(first.correct_test | second.correct_test)),
            }
            row["routed (TS, bins on first)"] = same_size_routing.same_size_route(first, second, n_bins).accuracy
            row["routed (TS, joint bins)"] = same_size_routing.same_size_route(
                first, second, joint_bins, "joint"
            ).accuracy
            row["routed (uncalibrated, bins on first)"] = same_size_routing.same_size_route(
                *out["none"], n_bins
            ).accuracy
            cc = cascade.cascade_curve(first, second, n_bins)
            row["best point of the TS curve"] = cc.best_accuracy()
            rows.append(row)
            if s == 0:
                uc = cascade.cascade_curve(*out["none"], n_bins)
                rc = cascade.random_curve(first.acc_test, second.acc_test, n_bins + 1)
                for name, cur in (("CC (calibrated)", cc), ("UC (uncalibrated)", uc), ("RC (random)", rc)):
                    curves.append(cur.to_frame(name).assign(panel=pair))
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def summary(res: pd.DataFrame) -> pd.DataFrame:
    """Mean of every accuracy of :func:`route_grid` over the splits, one row per pair."""
    return res.drop(columns="split").groupby("pair").mean()


def gains(res: pd.DataFrame) -> pd.DataFrame:
    """Gain of routing (bins on first, joint bins) over the better single model per split, then its
    mean and minimum per pair (columns (gain, "mean"/"min"))."""
    best = res[["first alone", "second alone"]].max(axis=1)
    g = pd.DataFrame(
        {
            "pair": res["pair"],
            "gain (bins on first)": res["routed (TS, bins on first)"] - best,
            "gain (joint bins)": res["routed (TS, joint bins)"] - best,
        }
    )
    return g.groupby("pair")[["gain (bins on first)", "gain (joint bins)"]].agg(["mean", "min"])


def same_size_published(pairs: list[str], summ: pd.DataFrame, gain: pd.DataFrame) -> dict:
    """The numbers the same-size page publishes, keyed by :data:`PUBLISHED_KEYS` in the order of ``pairs``."""
    if len(pairs) != len(PUBLISHED_KEYS):
        raise ValueError(f"pairs: need {len(PUBLISHED_KEYS)} pairs, got {len(pairs)}")
    published = {}
    for pair, key in zip(pairs, PUBLISHED_KEYS):
        published[f"same_size_gain_{key}"] = round(float(gain.loc[pair, ("gain (bins on first)", "mean")]), 4)
        published[f"same_size_gain_joint_{key}"] = round(float(gain.loc[pair, ("gain (joint bins)", "mean")]), 4)
        published[f"same_size_acc_{key}"] = {k: round(float(v), 4) for k, v in summ.loc[pair].items()}
    return published
