"""Paper 4 trained on CIFAR-10: the losses_cifar10 page's tables, AU sweep and claims.

Paper: "Reweighted losses and calibration" (paper 4), Tables 1-2, Figures 3 and 6, App. C.2. The
page trains one run per loss (:func:`lib.rr.experiment.run_loss`); this module lays out the
numbers it publishes (:func:`published_metrics`), the AU loss's confidence-score table
(:func:`csf_table`), the coverage x nu sweep (:func:`au_sweep`), the paper's row beside ours
(:func:`paper_comparison`) and the page's claims (:func:`page_claims`, with the analytic
inverse-focal gradient claim of :func:`gradient_claim` exempt from the accuracy floor).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.special import softmax

from lib import report
from lib.rr import losses as rw
from lib.rr import weights as rwt
from lib.engine.runs import training
from lib.rr import experiment as rx
from lib.rr.claims import reweighted_claims
from lib.rr.record import LossRecord

PUBLISHED_METRICS: tuple[str, ...] = (
    "accuracy",
    "ece",
    "ece_a",
    "cwece",
    "ece_ts",
    "cwece_ts",
    "conf_gap",
    "temperature",
)
"""The metrics published per loss as ``rr_<loss>_<metric>``."""

GRADIENT_CLAIM: str = "the inverse focal gradient turns positive for gamma above about 3.5"
"""The analytic claim (App. C.2, E.1) -- it needs no trained model, so the accuracy floor spares it."""

GRADIENT_THRESHOLD_RANGE: tuple[float, float] = (3.4, 4.0)
"""'About 3.5' holds when the analytic threshold gamma lies in this closed interval."""


CDF_NUS: tuple[float, ...] = (0.005, 0.05, 0.1, 0.3)
"""The smoothing widths nu drawn in the smoothed-CDF figure (cf. Fig. 5)."""


def smoothed_cdf_curves(
    n: int = 512, n_bins: int = 15, nus: tuple[float, ...] = CDF_NUS, seed: int = 0
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The AU loss's smoothed CDF over ``n_bins`` equal bins for each ``nu`` beside the empirical CDF,
    of ``n`` MSP-like scores (1 - Beta(0.6, 4): most near 1), on 201 points of [0, 1] (cf. Fig. 5)."""
    rng = np.random.default_rng(seed)
    scores = np.clip(1 - rng.beta(0.6, 4.0, size=n), 0, 1)
    edges = torch.linspace(0, 1, n_bins + 1, dtype=torch.float64)
    grid = torch.linspace(0, 1, 201, dtype=torch.float64)
    curves = {"empirical CDF": np.searchsorted(np.sort(scores), grid.numpy(), side="right") / len(scores)}
    for v in nus:
        curves[f"nu = {v}"] = rwt.smoothed_cdf(torch.as_tensor(scores), edges, v, at=grid).numpy()
    return grid.numpy(), curves


def reliability_diagrams(
    records: Mapping[str, Any], metrics: Mapping[str, Mapping[str, float]]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per loss of Table 2: the test confidences and correctness of its run, labelled with its ECE x100."""
    diagrams = {}
    for name in rx.TABLE_LOSSES:
        lg = rx.run_logits(records[name])
        pt = softmax(lg["test"].astype(np.float64), axis=1)
        diagrams[f"{rx.LABELS[name]} (ECE {100 * metrics[name]['ece']:.2f})"] = (
            pt.max(1),
            pt.argmax(1) == lg["test_y"],
        )
    return diagrams


def published_metrics(metrics: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """``rr_<loss>_<metric>`` for every run and metric of :data:`PUBLISHED_METRICS`."""
    return {f"rr_{name}_{key}": float(m[key]) for name, m in metrics.items() for key in PUBLISHED_METRICS}


def csf_table(metrics: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """The AU loss with each confidence score function: test ECE x100 and accuracy (cf. Fig. 3)."""
    return pd.DataFrame(
        [
            {"CSF": rx.LABELS[n], "ECE x100": 100 * metrics[n]["ece"], "accuracy": metrics[n]["accuracy"]}
            for n in rx.CSF_LOSSES
        ]
    )


def au_sweep(cfg: Mapping[str, Any], data: Mapping[str, Any], train: bool) -> pd.DataFrame:
    """Validation ECE x100 and accuracy of the AU loss (MSP) over the ``cfg["coverages"]`` x
    ``cfg["nus"]`` grid (cf. Fig. 6), with the head's accuracy on its own training features at
    ``mode="features"`` (else NaN); one cached run each, trained only if ``train``. A run that
    diverged has NaN in the metric columns and its epoch in ``diverged epoch`` (else NaN)."""
    from lib.calibration.metrics import ece

    rows = []
    for kappa in cfg["coverages"]:
        for v in cfg["nus"]:
            with training(train):
                rec = LossRecord.from_record(rx.run_loss("au", cfg, data, seed=0, coverage=kappa, nu=v))
            if rec.diverged_epoch is not None:
                rows.append({"coverage": kappa, "nu": v, "val ECE x100": np.nan, "val accuracy": np.nan,
                             "train accuracy": np.nan, "diverged epoch": float(rec.diverged_epoch)})  # fmt: skip
                continue
            lg = rx.run_logits(rec)
            pv = softmax(lg["val"].astype(np.float64), axis=1)
            rows.append(
                {
                    "coverage": kappa,
                    "nu": v,
                    "val ECE x100": 100 * ece(pv, lg["val_y"]),
                    "val accuracy": float((pv.argmax(1) == lg["val_y"]).mean()),
                    "train accuracy": np.nan if rec.train_accuracy is None else rec.train_accuracy,
                    "diverged epoch": np.nan,
                }
            )
    return pd.DataFrame(rows)


def au_fit_note(records: Mapping[str, LossRecord], sweep: pd.DataFrame) -> str:
    """What the AU loss's heads fitted, in Markdown, computed from the runs: the training accuracy of
    the AU (MSP) head beside cross-entropy's, that of each sweep point, and the sweep's diverged
    points. Empty where the records keep no training accuracy (end-to-end runs, published copies).

    Why it can be low (eq. 36, :func:`lib.rr.weights.au_weights`): the gradient flows through
    G(s_i) for the samples below the batch's coverage threshold, and d beta_i / d s_i > 0, so every
    step also lowers their confidence score, against their cross-entropy."""
    au, xe = records.get("au"), records.get("xe")
    if au is None or xe is None or au.train_accuracy is None or xe.train_accuracy is None:
        return ""
    fitted = sweep.dropna(subset=["train accuracy"])
    points = ", ".join(
        f"{r['train accuracy']:.3f} at κ = {r['coverage']:g}, ν = {r['nu']:g}" for r in fitted.to_dict("records")
    )
    gone = sweep[sweep["diverged epoch"].notna()]
    out = (
        f"**What the AU heads fitted.** The AU (MSP) head classifies {au.train_accuracy:.3f} of its own "
        f"training images correctly (κ = {au.coverage:g}, ν = {au.nu:g}); the cross-entropy head "
        f"{xe.train_accuracy:.3f}. The loss's gradient flows through G(s_i) for the samples below the "
        "batch's coverage threshold (eq. 36), and their weight grows with their confidence, so every "
        "step also pushes their confidence down, against their cross-entropy: a head over fixed "
        "features can leave them unlearnt. "
    )
    if points:
        out += f"Training accuracy over the sweep: {points}."
    if len(gone):
        where = ", ".join(
            f"κ = {r['coverage']:g}, ν = {r['nu']:g} (epoch {r['diverged epoch']:.0f})" for r in gone.to_dict("records")
        )
        out += f" Diverged (non-finite outputs; left blank above): {where}."
    return out


def paper_comparison(metrics: Mapping[str, Mapping[str, float]], paper_row: str) -> pd.DataFrame:
    """The paper's row (``rw.PAPER_CIFAR10[paper_row]``) beside ours, x100: every metric of Tables 1,
    2 and 4 for ResNet-50, accuracy and ECE (Table 2) for the other rows."""
    if paper_row not in rw.PAPER_CIFAR10:
        raise ValueError(f"paper_row: {paper_row!r} is not one of {list(rw.PAPER_CIFAR10)}")
    if paper_row == "resnet50":
        return rx.paper_comparison({k: metrics[k] for k in rx.TABLE_LOSSES})
    row = rw.PAPER_CIFAR10[paper_row]
    return pd.DataFrame(
        [
            {
                "loss": rx.LABELS[k],
                "paper accuracy": row["accuracy"][k],
                "ours accuracy": 100 * metrics[k]["accuracy"],
                "paper ECE": row["ece"][k],
                "ours ECE": 100 * metrics[k]["ece"],
            }
            for k in rx.TABLE_LOSSES
        ]
    ).set_index("loss")


def gradient_claim(threshold: float) -> dict[str, Any]:
    """The analytic claim: the gamma above which the inverse focal gradient turns positive
    (:func:`lib.rr.weights.inverse_focal_gamma_threshold`) is about 3.5
    (within :data:`GRADIENT_THRESHOLD_RANGE`)."""
    lo, hi = GRADIENT_THRESHOLD_RANGE
    return {
        "claim": GRADIENT_CLAIM,
        "paper": "gamma > 3.5 (App. C.2, E.1)",
        "ours": f"threshold {threshold:.2f} (analytic)",
        "verdict": "held" if lo <= threshold <= hi else "did not hold",
    }


def page_claims(
    metrics: Mapping[str, Mapping[str, float]], threshold: float, tol: float, paper_row: str, test_labels: Any
) -> tuple[list[dict[str, Any]], str]:
    """The page's claims (:func:`lib.rr.claims.reweighted_claims` against ``paper_row``
    and :func:`gradient_claim`), gated by the book's accuracy floor on XE's accuracy against the
    paper's XE accuracy in the same row (:func:`lib.report.gate_claims`), chance the majority-class
    rate of ``test_labels`` (:func:`lib.report.chance_accuracy`: 1/10 on the whole test set, a little
    more on a random part of it). Returns the rows and the sentence saying which case of the floor
    applied."""
    if paper_row not in rw.PAPER_CIFAR10:
        raise ValueError(f"paper_row: {paper_row!r} is not one of {list(rw.PAPER_CIFAR10)}")
    rows = reweighted_claims(metrics, tol=tol, row=paper_row)
    rows.append(gradient_claim(threshold))
    paper_acc = rw.PAPER_CIFAR10[paper_row]["accuracy"]["xe"] / 100
    return report.gate_claims(
        rows,
        accuracy=metrics["xe"]["accuracy"],
        paper_accuracy=paper_acc,
        chance=report.chance_accuracy(test_labels),
        exempt=[GRADIENT_CLAIM],
    )


def paper_scale_table(items: Sequence[Any], got: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame | None:
    """Paper 4's Table 1/2 layout (:func:`lib.rr.experiment.loss_table`, x100) from the published
    records ``got`` (plan id -> record) of the compared losses among ``items``, with a ``runs``
    column: how many of the page's planned runs (losses, confidence scores, the AU sweep) are in;
    ``None`` when no compared loss is published."""
    from lib.rr.record import LossRecord

    metrics = {
        it.method: LossRecord.from_record(got[it.id]).metrics
        for it in items
        if it.method in rx.TABLE_LOSSES and it.id in got
    }
    if not metrics:
        return None
    table = rx.loss_table(metrics)
    table["runs"] = f"{len(got)} of {len(items)} runs of the page"
    return table
