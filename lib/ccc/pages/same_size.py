"""The same-size page (``notebooks/same_size.py``): paper 3, section 3.3 (Fig. 2b-c, Table 2):
two equally large models routed by the calibrated confidence advantage of a bin
(:func:`lib.ccc.cascade.same_size_route`) over random splits, against each alone and the oracle."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lib.config import paper_numbers
from lib import report
from lib.ccc import cascade, confidence
from lib.ccc.pages import CCCPage, logits_data, splits_verdict
from lib.validation import check_int

PUBLISHED_KEYS: tuple[str, ...] = ("mmlu_8b", "mmlu_70b", "cifar10")
"""The published short names of the page's three pairs, in the page's order."""

SAME_SIZE_PAPER_SAYS: str = paper_numbers("ccc")["same_size"]["paper_says"]
"""What the paper reports for same-size routing (quoted in the claims table)."""

PAPER_SAME_SIZE: list[tuple[str, str, str]] = [tuple(r) for r in paper_numbers("ccc")["same_size"]["pairs"]]
"""The paper's same-size pairs -- (pair, single models, routed pair) (sec. 3.3, Table 2)."""

TS: str = "routed (TS, bins on first)"
"""The column of the routed pair's accuracy (temperature scaling, bins on the first model)."""

UNCAL: str = "routed (uncalibrated, bins on first)"
"""The column of the same routing on uncalibrated confidences."""

NOISE_GAIN: str = "test-set SE of the gain"
"""The column of the test half's own SE of a split's gain, sqrt(d / n), d where the two differ in correctness."""

NOISE_TS_UC: str = "test-set SE of TS - uncalibrated"
"""The same for calibrated against uncalibrated routing."""


def route_grid(
    pairs: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
    n_splits: int,
    n_bins: int,
    joint_bins: int,
    seed: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per pair (logits of the first and second model, labels) and split (seed ``seed + s``): test
    accuracies alone, of the oracle, routed (TS on the first model's bins, on joint bins, uncalibrated),
    the TS cascade's best, and the test-set noise :data:`NOISE_GAIN`, :data:`NOISE_TS_UC`; and split 0's
    CC / UC / RC curves."""
    check_int(n_splits, "n_splits")
    rows, curves = [], []
    for pair, (z1, z2, y) in pairs.items():
        for s in range(n_splits):
            cal, test = cascade.split_halves(len(y), seed=seed + s)
            out = {
                c: (confidence.model_outputs(z1, y, cal, test, c), confidence.model_outputs(z2, y, cal, test, c))
                for c in ("temperature", "none")
            }
            first, second = out["temperature"]
            cc = cascade.cascade_curve(first, second, n_bins)
            ts, un = cascade.same_size_route(first, second, n_bins), cascade.same_size_route(*out["none"], n_bins)
            best = first.correct_test if first.acc_test >= second.acc_test else second.correct_test
            rows.append(
                {
                    "pair": pair,
                    "split": s,
                    "first alone": first.acc_test,
                    "second alone": second.acc_test,
                    "oracle (either right)": float(np.mean(first.correct_test | second.correct_test)),
                    TS: ts.accuracy,
                    "routed (TS, joint bins)": cascade.same_size_route(first, second, joint_bins, "joint").accuracy,
                    UNCAL: un.accuracy,
                    "best point of the TS curve": float(cc.accuracy.max()),
                    NOISE_GAIN: float(np.sqrt(np.mean(ts.correct != best) / len(best))),
                    NOISE_TS_UC: float(np.sqrt(np.mean(ts.correct != un.correct) / len(best))),
                }
            )
            if s == 0:
                uc = cascade.cascade_curve(*out["none"], n_bins)
                rc = cascade.random_curve(first.acc_test, second.acc_test, n_bins + 1)
                curves.append(cascade.curves_frame(pair, cc, uc, rc))
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def summary(res: pd.DataFrame) -> pd.DataFrame:
    """Mean of every accuracy of :func:`route_grid` over the splits, one row per pair."""
    return res.drop(columns=["split", NOISE_GAIN, NOISE_TS_UC]).groupby("pair").mean()


def split_gains(res: pd.DataFrame) -> pd.DataFrame:
    """Per split: the gain of routing (bins on first, joint bins) over the better single model."""
    best = res[["first alone", "second alone"]].max(axis=1)
    return pd.DataFrame(
        {
            "pair": res["pair"],
            "split": res["split"],
            "gain (bins on first)": res[TS] - best,
            "gain (joint bins)": res["routed (TS, joint bins)"] - best,
        }
    )


def gains(res: pd.DataFrame) -> pd.DataFrame:
    """:func:`split_gains`' mean and minimum per pair (columns (gain, "mean"/"min"))."""
    return split_gains(res).groupby("pair")[["gain (bins on first)", "gain (joint bins)"]].agg(["mean", "min"])


def claims(res: pd.DataFrame, pairs: Sequence[str]) -> pd.DataFrame:
    """The claims table of :func:`route_grid`'s per-split rows: per pair, routing beats the better
    single model; and TS routing beats uncalibrated routing for every pair: each the mean per-split
    difference by :func:`lib.ccc.pages.splits_verdict`, floored by the mean of the splits' test-set
    SEs (:data:`NOISE_GAIN`, :data:`NOISE_TS_UC`). ``paper_own`` is not testable."""
    if set(pairs) != set(res["pair"]):
        raise ValueError("pairs: must name exactly the pairs of res")
    g = split_gains(res)
    rows, helps = [], []
    for pair in pairs:
        r = res[res["pair"] == pair].sort_values("split")
        d = g[g["pair"] == pair].sort_values("split")["gain (bins on first)"].to_numpy()
        rows.append(
            report.claim_row(
                claim=f"{pair}: calibrated routing beats both models (bins on the first model)",
                paper=SAME_SIZE_PAPER_SAYS,
                ours=f"gain {d.mean():+.4f} (worst of {d.size} splits {d.min():+.4f}; test-set SE "
                f"{r[NOISE_GAIN].mean():.4f})",
                verdict=splits_verdict(d, float(np.mean(r[NOISE_GAIN].to_numpy()))),
            )
        )
        ts_uc = splits_verdict((r[TS] - r[UNCAL]).to_numpy(), float(np.mean(r[NOISE_TS_UC].to_numpy())))
        helps.append((r[TS].mean(), r[UNCAL].mean(), ts_uc))
    rows.append(
        report.claim_row(
            claim="calibration helps same-size routing (TS beats uncalibrated, every pair)",
            paper="not in the paper as a same-size comparison (it routes by calibrated confidence only); "
            "the book's own expectation",
            ours=", ".join(f"{a:.4f} vs {b:.4f}" for a, b, _ in helps),
            verdict=report.every(v for _, _, v in helps),
            kind=report.KINDS[2],
        )
    )
    return report.claims_table(rows)


def published(res: pd.DataFrame, pairs: Sequence[str]) -> dict[str, Any]:
    """The numbers the page publishes from :func:`route_grid`'s per-split rows (their :func:`summary`
    and :func:`gains`), keyed by :data:`PUBLISHED_KEYS` in the order of ``pairs``."""
    summ, gain = summary(res), gains(res)
    if len(pairs) != len(PUBLISHED_KEYS):
        raise ValueError(f"pairs: need {len(PUBLISHED_KEYS)} pairs, got {len(pairs)}")
    out = {}
    for pair, key in zip(pairs, PUBLISHED_KEYS):
        out[f"same_size_gain_{key}"] = round(float(gain.loc[pair, ("gain (bins on first)", "mean")]), 4)
        out[f"same_size_gain_joint_{key}"] = round(float(gain.loc[pair, ("gain (joint bins)", "mean")]), 4)
        out[f"same_size_acc_{key}"] = {k: round(float(v), 4) for k, v in summ.loc[pair].items()}
    return out


def paper_table(res: pd.DataFrame, pairs: Sequence[str]) -> pd.DataFrame:
    """The paper's pairs and ours (:func:`route_grid`'s rows, means over splits), in the order of
    ``pairs``, accuracies as text."""
    s = summary(res)
    best = s[["first alone", "second alone"]].max(axis=1)
    ours = [(pair, f"{best[pair]:.2%} (ours, better one)", f"{s.loc[pair, TS]:.2%} (ours)") for pair in pairs]
    return pd.DataFrame([*PAPER_SAME_SIZE, *ours], columns=["pair", "single models", "routed pair"]).set_index("pair")


class SameSizePage(CCCPage):
    """Paper 3's same-size page: its settings, scale line and three pairs (the notebook routes them
    with :func:`route_grid`)."""

    name = "same_size"
    title = "Routing between models of the same size: Section 3.3"
    real_summary = "MMLU Llama-3.1 base/instruct pairs and CIFAR-10 ResNet-50 {losses}, {n_splits} random half splits"
    synthetic_summary = "synthetic logits ({n_synthetic} examples), {n_splits} splits"

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> dict[str, tuple[Any, Any, Any]]:
        """The three pairs as (logits of the first model, logits of the second, labels)."""
        data, rz, ry = logits_data(cfg["data"] == "real", cfg["resnet_losses"], cfg["n_synthetic"], cfg["seed"])
        a, b = cfg["resnet_losses"]
        z, y = data.logits, data.labels
        return {
            "MMLU 8B base + 8B instruct": (z["llama-3.1-8b-base"], z["llama-3.1-8b-instruct"], y),
            "MMLU 70B base + 70B instruct": (z["llama-3.1-70b-base"], z["llama-3.1-70b-instruct"], y),
            f"CIFAR-10 ResNet-50 {a} + {b}": (rz[a], rz[b], ry),
        }


PAGE = SameSizePage()
