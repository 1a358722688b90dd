"""The cross-paper chapter: the four papers' calibration methods on the same logits.

Every function takes logits already on disk (MMLU answer-letter logits of four Llama-3.1 models,
the reweighted-risk authors' ResNet-50 CIFAR-10 logits) or their synthetic stand-ins, splits them
into a calibration half and a test half, and returns a tidy table of test-half numbers. The failure
modes compared are those the papers study: over-confidence (all papers), a shift between the
calibration and test data (papers 1 and 3), a soft mixture of experts (paper 1), estimating whether
another model/expert is right (papers 2 and 3) and the training loss (paper 4).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import softmax as scipy_softmax

from lib.calibration.posthoc import TemperatureScaler, fit_platt, probs_to_logits
from lib.ccc.cascade import cascade_curve
from lib.ccc.confidence import fit_confidence, model_outputs
from lib.calibration.metrics import accuracy, binary_ece, ece
from lib.moe.mocae import T_MAX, T_MIN, mocae_probs
from lib.validation import check_ndim, check_same_length

POSTHOC = ("none", "temperature", "platt", "histogram")


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Row-wise softmax of ``logits / temperature`` (scipy's numerically stable softmax)."""
    return scipy_softmax(logits / temperature, axis=1)


def _top1(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return (logits.argmax(axis=1) == labels).astype(np.float64)


def posthoc_ece(
    logits: np.ndarray, labels: np.ndarray, cal_idx: np.ndarray, test_idx: np.ndarray, n_bins: int = 15
) -> dict[str, float]:
    """Test-half top-label ECE after each post-hoc calibrator fitted on the calibration half.

    ``temperature`` (Guo et al. 2017; all four papers), ``platt`` and ``histogram`` (paper 3's
    ablation) via :func:`lib.ccc.confidence.fit_confidence`; ``none`` is the raw max softmax.
    """
    correct = _top1(logits, labels)[test_idx]
    out = {}
    for name in POSTHOC:
        conf = fit_confidence(name, logits[cal_idx], labels[cal_idx])(logits[test_idx])
        out[name] = binary_ece(conf, correct, n_bins=n_bins)
    return out


def shift_ece(
    logits: np.ndarray,
    labels: np.ndarray,
    source: np.ndarray,
    target: np.ndarray,
    target_cal: np.ndarray,
    target_test: np.ndarray,
) -> dict[str, float]:
    """ECE on the target's test rows: raw, TS fitted on the source (shifted), TS fitted in-domain.

    Paper 3 section 3.4 calibrates on one distribution and cascades on another; paper 1 asks the
    same of MoE calibration under shift. ``source`` and the two target index sets are disjoint.
    """
    y = labels[target_test]
    t_shift = TemperatureScaler().fit(logits[source], labels[source]).temperature
    t_in = TemperatureScaler().fit(logits[target_cal], labels[target_cal]).temperature
    z = logits[target_test]
    return {
        "none": ece(softmax(z), y),
        "temperature (other subjects)": ece(softmax(z, t_shift), y),
        "temperature (same subjects)": ece(softmax(z, t_in), y),
    }


def confidence_routing(expert_logits: np.ndarray, sharpness: float = 10.0) -> np.ndarray:
    """An input-dependent soft router: r_k proportional to exp(sharpness * conf_k(x)).

    A stand-in for a learned router (paper 1's router is an MLP on the backbone's feature): the
    more confident expert gets more weight, and experts overlap wherever confidences are close.
    """
    conf = np.stack([softmax(expert_logits[:, k]).max(axis=1) for k in range(expert_logits.shape[1])], 1)
    return softmax(sharpness * conf)


def mixture_ece(
    expert_logits: np.ndarray, labels: np.ndarray, routing: np.ndarray, cal_idx: np.ndarray, test_idx: np.ndarray
) -> dict[str, float]:
    """Soft mixture p = sum_k r_k softmax(z_k / T_k): test ECE of four ways to calibrate it.

    ``none``: vanilla mixture. ``per-expert temperature``: MoCaE (one T_k per expert, paper 1's
    diagnostic baseline). ``temperature on the mixture``: one scalar T on log p (paper 1's ECE+TS).
    ``both``: MoCaE followed by a scalar T. A scalar T on log p keeps the vanilla mixture's argmax
    (so its accuracy); per-expert temperatures reweight the experts and can move it.
    """
    check_ndim(expert_logits, 3, "expert_logits", "N x K experts x C classes")
    check_same_length(expert_logits, labels, "expert_logits", "labels")
    k = expert_logits.shape[1]
    zc, zt, yc, yt = expert_logits[cal_idx], expert_logits[test_idx], labels[cal_idx], labels[test_idx]
    rc, rt = routing[cal_idx], routing[test_idx]
    temps = TemperatureScaler(bounds=(T_MIN, T_MAX)).fit(zc, yc).temperature
    vanilla_c, vanilla_t = mocae_probs(zc, rc, np.ones(k)), mocae_probs(zt, rt, np.ones(k))
    mocae_c, mocae_t = mocae_probs(zc, rc, temps), mocae_probs(zt, rt, temps)
    t_mix = TemperatureScaler().fit(probs_to_logits(vanilla_c), yc).temperature
    t_both = TemperatureScaler().fit(probs_to_logits(mocae_c), yc).temperature
    return {
        "none": ece(vanilla_t, yt),
        "per-expert temperature": ece(mocae_t, yt),
        "temperature on the mixture": ece(softmax(probs_to_logits(vanilla_t), t_mix), yt),
        "both": ece(softmax(probs_to_logits(mocae_t), t_both), yt),
        "accuracy (vanilla)": accuracy(vanilla_t, yt),
        "accuracy (per-expert temperature)": accuracy(mocae_t, yt),
    }


def other_model_correctness_ece(
    logits_other: np.ndarray, labels: np.ndarray, cal_idx: np.ndarray, test_idx: np.ndarray
) -> dict[str, float]:
    """How well P(the other model/expert is right | x) is estimated, as binary ECE on the test half.

    The deferral question of paper 2 and the routing signal of paper 3: ``none`` uses the other
    model's raw confidence, ``platt`` a logistic fit of its correctness on the calibration half
    (a one-vs-all style estimate that depends on that model alone), ``temperature`` its TS
    confidence.
    """
    correct = _top1(logits_other, labels)
    p = softmax(logits_other)
    conf = np.clip(p.max(axis=1), 1e-12, 1 - 1e-12)
    logodds = np.log(conf) - np.log1p(-conf)
    a, b = fit_platt(logodds[cal_idx], correct[cal_idx])
    t = TemperatureScaler().fit(logits_other[cal_idx], labels[cal_idx]).temperature
    return {
        "none": binary_ece(conf[test_idx], correct[test_idx]),
        "temperature": binary_ece(softmax(logits_other[test_idx], t).max(axis=1), correct[test_idx]),
        "platt": binary_ece(1 / (1 + np.exp(-(a * logodds[test_idx] + b))), correct[test_idx]),
    }


def cascade_apgr(
    logits_small: np.ndarray,
    logits_large: np.ndarray,
    labels: np.ndarray,
    cal_idx: np.ndarray,
    test_idx: np.ndarray,
    n_bins: int = 15,
) -> dict[str, float]:
    """APGR of the small -> large cascade routed on uncalibrated vs calibrated confidence (paper 3)."""
    out = {}
    for label, calibrator in (("none", "none"), ("temperature", "temperature")):
        small = model_outputs(logits_small, labels, cal_idx, test_idx, calibrator)
        large = model_outputs(logits_large, labels, cal_idx, test_idx, calibrator)
        out[label] = cascade_curve(small, large, n_bins=n_bins).apgr()
    return out


def training_loss_ece(
    logits_by_loss: dict[str, np.ndarray], labels: np.ndarray, cal_idx: np.ndarray, test_idx: np.ndarray
) -> pd.DataFrame:
    """Test ECE of models trained with different losses (paper 4), before and after TS."""
    rows = []
    for loss, z in logits_by_loss.items():
        t = TemperatureScaler().fit(z[cal_idx], labels[cal_idx]).temperature
        y = labels[test_idx]
        rows.append(
            {
                "loss": loss,
                "accuracy": accuracy(softmax(z[test_idx]), y),
                "ECE": ece(softmax(z[test_idx]), y),
                "ECE after TS": ece(softmax(z[test_idx], t), y),
                "T": t,
            }
        )
    return pd.DataFrame(rows)


def long_table(failure: str, data: str, values: dict[str, float], metric: str = "ECE") -> pd.DataFrame:
    """One failure mode's numbers as rows ``failure, data, method, metric, value``."""
    return pd.DataFrame(
        [
            {"failure": failure, "data": data, "method": m, "metric": metric, "value": float(v)}
            for m, v in values.items()
        ]
    )


HIGHER_IS_BETTER = ("APGR", "accuracy")


def best_fix(table: pd.DataFrame) -> pd.DataFrame:
    """Per failure mode: the uncorrected value, the best method and its value, from ``table``.

    Lower is better except for the metrics in ``HIGHER_IS_BETTER``.
    """
    rows = []
    for (failure, data, metric), grp in table.groupby(["failure", "data", "metric"], sort=False):
        raw = grp.loc[grp["method"] == "none", "value"]
        best = grp.loc[grp["value"].idxmax() if metric in HIGHER_IS_BETTER else grp["value"].idxmin()]
        rows.append(
            {
                "failure": failure,
                "data": data,
                "metric": metric,
                "uncorrected": float(raw.iloc[0]) if len(raw) else float("nan"),
                "best method": best["method"],
                "best value": float(best["value"]),
            }
        )
    return pd.DataFrame(rows)
