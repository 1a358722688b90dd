"""Paper 4 on the released ResNet-50 logits: which runs to calibrate, what the page publishes, the
dual focal readings' weights, and the page's claims.

Paper: "Reweighted losses and calibration" (paper 4), Tables 1, 2 and 4, App. C.3 and E.1. The
losses_released_logits page loads the logits with :func:`load_logits` (a run below
:data:`FAILED_RUN_ACCURACY` is a failed run, left out of every calibration number), evaluates them
with :func:`lib.rr.experiment.evaluate_logits_both`, and reads its tables and claims here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch

from lib.rr import losses as rw
from lib.data.logits import LOSSES as RELEASED, load_resnet50_logits, synthetic_resnet_logits
from lib.rr import gamma as rg
from lib.rr.claims import RELEASED_NAMES, released_claims, reweighted_claims
from lib.rr.experiment import LABELS, PAPER_RESNET50

FAILED_RUN_ACCURACY: float = 0.5
"""A released run whose test accuracy is below this is a failed run (the released inverse-focal
run is degenerate), not data to calibrate: it is reported, and left out of every calibration number."""

SYNTHETIC_LOSSES: tuple[str, ...] = ("ce", "focal", "dual_focal", "ece_kde", "aurc")
"""The runs the synthetic (smoke) logits stand in for, named as the released files."""

PUBLISHED_METRICS: tuple[str, ...] = (
    "accuracy",
    "ece",
    "ece_a",
    "cwece",
    "ece_ts",
    "cwece_ts",
    "temperature",
    "conf_gap",
    "temperature_nll",
    "ece_ts_nll",
)
"""The metrics published per run as ``released_<run>_<metric>``."""

DUAL_FOCAL_GAMMA: float = 5.0
"""The released dual-focal ResNet-50's own gamma (paper 4, App. Table 2)."""

DUAL_FOCAL_READINGS: tuple[tuple[str, str], ...] = (
    ("eq33", "dual_focal"),
    ("eqs34_35", "dual_focal_eqs34_35"),
    ("released", "dual_focal_released"),
)
"""The three readings of dual focal loss -- (variant of lib.rr.losses.dual_focal_loss, get_loss name)."""


def load_logits(source: str, n_synthetic: int = 2000) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, float]]:
    """The logits to calibrate, named as in ``lib.rr.experiment.LABELS``, their targets,
    and the failed runs' accuracies. ``source`` is "synthetic" (made in code) or "released" (the files)."""
    if source == "synthetic":
        logits, targets = synthetic_resnet_logits(n_synthetic, losses=SYNTHETIC_LOSSES)
        failed: dict[str, float] = {}
    elif source == "released":
        logits, targets, failed = {}, None, {}
        for name in RELEASED:
            z, y = load_resnet50_logits(name, allow_degenerate=True)
            acc = float((z.argmax(1) == y).mean())
            if acc < FAILED_RUN_ACCURACY:
                failed[RELEASED_NAMES[name]] = acc
                continue
            logits[name], targets = z, y
    else:
        raise ValueError(f"source: must be 'synthetic' or 'released', got {source!r}")
    return {RELEASED_NAMES[k]: v for k, v in logits.items()}, targets, failed


def accuracy_table(logits: Mapping[str, np.ndarray], targets: np.ndarray, failed: Mapping[str, float]) -> pd.DataFrame:
    """Each run's test accuracy, the failed runs last and marked as such."""
    return pd.DataFrame(
        {
            "loss": [LABELS[k] for k in logits] + [LABELS[k] + " (failed run)" for k in failed],
            "test accuracy": [float((z.argmax(1) == targets).mean()) for z in logits.values()] + list(failed.values()),
        }
    )


def published_metrics(metrics: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """``released_<run>_<metric>`` for every run and metric of :data:`PUBLISHED_METRICS`."""
    return {f"released_{name}_{key}": float(m[key]) for name, m in metrics.items() for key in PUBLISHED_METRICS}


def temperature_table(metrics: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """Per run: the temperature fitted by ECE and by NLL, and the ECE after each (rows runs)."""
    return pd.DataFrame(
        {
            name: {
                "T (ECE fit)": m["temperature"],
                "T (NLL fit)": m["temperature_nll"],
                "ECE+TS (ECE fit)": m["ece_ts"],
                "ECE+TS (NLL fit)": m["ece_ts_nll"],
            }
            for name, m in metrics.items()
        }
    ).T


def reliability_diagrams(
    logits: Mapping[str, np.ndarray], targets: np.ndarray, idx: np.ndarray, metrics: Mapping[str, Mapping[str, float]]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per run, on the examples ``idx``: the confidences and correctness before temperature scaling,
    labelled with the run's ECE x100."""
    from lib.calibration.posthoc import apply_temperature

    diagrams = {}
    for name, z in logits.items():
        p = np.asarray(apply_temperature(z[idx], 1.0))
        diagrams[f"{LABELS[name]} (ECE {100 * metrics[name]['ece']:.2f})"] = (p.max(1), p.argmax(1) == targets[idx])
    return diagrams


def dual_focal_weights(logits: np.ndarray, targets: np.ndarray, gamma: float = DUAL_FOCAL_GAMMA) -> pd.DataFrame:
    """Under each reading of dual focal loss: the mean weight (1 - p_t + p_j)^gamma = loss / -log p_t
    of correct and of misclassified examples, and the mean loss (one row per reading)."""
    z = torch.as_tensor(logits, dtype=torch.float64)
    y = torch.as_tensor(targets)
    logpt = torch.log_softmax(z, 1).gather(1, y[:, None]).squeeze(1)
    wrong = (z.argmax(1) != y).numpy()
    rows = []
    for variant, loss_name in DUAL_FOCAL_READINGS:
        per_example = rw.dual_focal_loss(z, y, gamma, variant=variant, reduction="none")
        weight = (per_example / -logpt).numpy()
        rows.append(
            {
                "reading": variant,
                "get_loss name": loss_name,
                "mean weight, correct": float(weight[~wrong].mean()),
                "mean weight, misclassified": float(weight[wrong].mean()),
                "mean loss": float(per_example.mean()),
            }
        )
    return pd.DataFrame(rows).set_index("reading")


def gamma_published(cv: pd.DataFrame, criterion: str) -> dict[str, Any]:
    """The gamma cross-validation's published numbers: the gamma chosen by ``criterion`` and by ECE,
    the validation NLL at gamma = 0 per map/loss, and the fitted temperatures of focal loss."""
    summary = rg.summarize_folds(cv)
    at_zero = summary[summary["gamma"] == 0]
    focal_t = summary[(summary["loss"] == "focal") & (summary["map"] == "temperature")]["temperature"]
    return {
        "released_gamma_chosen": rg.select_gamma(cv, criterion),
        "released_gamma_chosen_ece": rg.select_gamma(cv, "ece"),
        "released_gamma_nll_at_0": {f"{r.map}/{r.loss}": float(r.nll) for r in at_zero.itertuples()},
        "released_gamma_focal_temperature": [float(t) for t in focal_t],
    }


def failed_run_claims(
    failed: Mapping[str, float], paper: Mapping[str, Mapping[str, float]] = PAPER_RESNET50
) -> list[dict[str, Any]]:
    """A failed run can neither confirm nor refute the paper's numbers for its loss: one
    "inconclusive" row per failed run."""
    return [
        {
            "claim": f"{name.replace('_', ' ')} loss: accuracy and ECE as in Table 2",
            "paper": f"{paper[name]['accuracy']:.2f} / {paper[name]['ece']:.2f}",
            "ours": f"released run is degenerate ({100 * acc:.2f}% accuracy): a failed run",
            "verdict": "inconclusive at this scale",
        }
        for name, acc in failed.items()
        if name in paper
    ]


def page_claims(
    metrics: Mapping[str, Mapping[str, float]], cv: pd.DataFrame, failed: Mapping[str, float], tol: float
) -> list[dict[str, Any]]:
    """The page's claims: the released runs against Table 2, the reweighting claims (``tol``: ECE
    differences below it are inconclusive), the gamma cross-validation's, and the failed runs'."""
    return (
        released_claims(metrics) + reweighted_claims(metrics, tol=tol) + rg.gamma_claims(cv) + failed_run_claims(failed)
    )
