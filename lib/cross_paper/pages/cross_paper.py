"""The cross-paper page (``notebooks/cross_paper.py``): the four papers' calibration methods on the
same logits.

Each function fits on a calibration half of logits on disk (MMLU answer letters of four Llama-3.1
models, paper 4's ResNet-50 CIFAR-10 logits) or their synthetic stand-ins and measures the test half,
for the failure modes the papers study: over-confidence (all), shift (papers 1 and 3), a soft mixture
of experts (paper 1), whether another model is right (papers 2 and 3) and the training loss (paper
4). :meth:`CrossPaperPage.run` gathers them in one long table, :func:`cross_paper_claims` judges them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import softmax as scipy_softmax

from lib import report
from lib.calibration.metrics import accuracy, binary_ece, ece
from lib.calibration.posthoc import TemperatureScaler, fit_platt, probs_to_logits
from lib.ccc.cascade import apgr_test_se, cascade_curve, split_halves
from lib.ccc.confidence import fit_confidence, model_outputs
from lib.ccc.pages import ece_se, logits_data
from lib.ccc.pages.cascading import RANDOM_APGR
from lib.moe.claims import MOCAE_ACC_TOL
from lib.moe.mocae import T_MAX, T_MIN, mocae_probs
from lib.page import Page
from lib.validation import check_ndim, check_same_length

#: The post-hoc calibrators the page compares, in its table's order (``none``: raw confidence).
POSTHOC = ("none", "temperature", "platt", "histogram")


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Row-wise softmax of ``logits / temperature`` (scipy's numerically stable softmax)."""
    return scipy_softmax(logits / temperature, axis=1)


def _top1(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return (logits.argmax(axis=1) == labels).astype(np.float64)


def posthoc_ece(logits: np.ndarray, labels: np.ndarray, cal_idx: np.ndarray, test_idx: np.ndarray) -> dict[str, float]:
    """Test-half top-label ECE after each calibrator of :data:`POSTHOC` fitted on the calibration
    half (:func:`lib.ccc.confidence.fit_confidence`: temperature, Platt and histogram, paper 3)."""
    correct = _top1(logits, labels)[test_idx]
    return {
        name: binary_ece(fit_confidence(name, logits[cal_idx], labels[cal_idx])(logits[test_idx]), correct, n_bins=15)
        for name in POSTHOC
    }


def shift_ece(
    logits: np.ndarray, labels: np.ndarray, source: np.ndarray, target_cal: np.ndarray, target_test: np.ndarray
) -> dict[str, float]:
    """ECE on the target's test rows: raw, TS fitted on the ``source`` rows (shifted; paper 3,
    section 3.4) and TS fitted on the target's calibration rows."""
    fit_on = {"other": source, "same": target_cal}
    temps = {
        f"temperature ({k} subjects)": TemperatureScaler().fit(logits[r], labels[r]).temperature
        for k, r in fit_on.items()
    }
    return {k: ece(softmax(logits[target_test], t), labels[target_test]) for k, t in ({"none": 1.0} | temps).items()}


def confidence_routing(expert_logits: np.ndarray, sharpness: float = 10.0) -> np.ndarray:
    """A soft router r_k proportional to exp(sharpness * conf_k(x)): a stand-in for paper 1's learned one."""
    conf = np.stack([softmax(expert_logits[:, k]).max(axis=1) for k in range(expert_logits.shape[1])], 1)
    return softmax(sharpness * conf)


def mixture_ece(
    expert_logits: np.ndarray, labels: np.ndarray, routing: np.ndarray, cal_idx: np.ndarray, test_idx: np.ndarray
) -> dict[str, float]:
    """Test ECE of the soft mixture p = sum_k r_k softmax(z_k / T_k) (paper 1): vanilla (``none``),
    one T_k per expert (MoCaE), one T on log p (ECE+TS), and both; with both accuracies (per-expert
    temperatures can move the argmax, a scalar T cannot)."""
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
    logits_self: np.ndarray, labels: np.ndarray, other_right: np.ndarray, cal_idx: np.ndarray, test_idx: np.ndarray
) -> dict[str, float]:
    """Binary test ECE of three estimates of P(the other model is right | x) made from this model's
    logits alone, as a deferring model must (papers 2 and 3): its raw top-1 confidence and its
    temperature-scaled one (both calibrated, at best, for its *own* correctness), and a Platt fit of
    the other model's correctness ``other_right`` (0/1) on its top-1 log-odds (calibration half)."""
    conf = np.clip(softmax(logits_self).max(axis=1), 1e-12, 1 - 1e-12)
    s = np.log(conf) - np.log1p(-conf)
    a, b = fit_platt(s[cal_idx], other_right[cal_idx])
    ts = fit_confidence("temperature", logits_self[cal_idx], labels[cal_idx])(logits_self[test_idx])
    right = other_right[test_idx]
    return {
        "none": binary_ece(conf[test_idx], right),
        "temperature": binary_ece(ts, right),
        "platt": binary_ece(1.0 / (1.0 + np.exp(-(a * s[test_idx] + b))), right),
    }


def cascade_apgr(
    logits_small: np.ndarray, logits_large: np.ndarray, labels: np.ndarray, cal_idx: np.ndarray, test_idx: np.ndarray
) -> tuple[dict[str, float], float]:
    """APGR of the small -> large cascade routed on uncalibrated vs calibrated confidence (paper 3),
    and the standard error of the calibrated one over the test half (:func:`lib.ccc.cascade.apgr_test_se`,
    as the cascading page's)."""
    curves = {
        calibrator: cascade_curve(
            *(model_outputs(z, labels, cal_idx, test_idx, calibrator) for z in (logits_small, logits_large)), n_bins=15
        )
        for calibrator in ("none", "temperature")
    }
    return {c: curve.apgr() for c, curve in curves.items()}, apgr_test_se(curves["temperature"])


def training_loss_ece(
    logits_by_loss: dict[str, np.ndarray], labels: np.ndarray, cal_idx: np.ndarray, test_idx: np.ndarray
) -> pd.DataFrame:
    """Test ECE of models trained with different losses (paper 4), before and after TS."""
    rows = []
    for loss, z in logits_by_loss.items():
        t = TemperatureScaler().fit(z[cal_idx], labels[cal_idx]).temperature
        y, p = labels[test_idx], softmax(z[test_idx])
        rows.append({"loss": loss, "accuracy": accuracy(p, y), "ECE": ece(p, y),
                     "ECE after TS": ece(softmax(z[test_idx], t), y), "T": t})  # fmt: skip
    return pd.DataFrame(rows)


def long_table(failure: str, data: str, values: dict[str, float], metric: str = "ECE") -> pd.DataFrame:
    """One failure mode's numbers as rows ``failure, data, method, metric, value``."""
    return pd.DataFrame([{"failure": failure, "data": data, "method": m, "metric": metric, "value": float(v)}
                         for m, v in values.items()])  # fmt: skip


HIGHER_IS_BETTER = ("APGR", "accuracy")


def best_fix(table: pd.DataFrame) -> pd.DataFrame:
    """Per failure mode: the uncorrected value and the best method (lowest, or highest for
    ``HIGHER_IS_BETTER``) with its value."""
    rows = []
    for (failure, data, metric), grp in table.groupby(["failure", "data", "metric"], sort=False):
        raw = grp.loc[grp["method"] == "none", "value"]
        best = grp.loc[grp["value"].idxmax() if metric in HIGHER_IS_BETTER else grp["value"].idxmin()]
        uncorrected = float(raw.iloc[0]) if len(raw) else float("nan")
        rows.append({"failure": failure, "data": data, "metric": metric, "uncorrected": uncorrected,
                     "best method": best["method"], "best value": float(best["value"])})  # fmt: skip
    return pd.DataFrame(rows)


MIXTURE: str = "mixture of ResNet-50s"
"""The ``data`` name of the routing rows (a soft mixture of the ResNet-50s trained with each loss)."""


def table_value(table: pd.DataFrame, failure: str, data: str, method: str) -> float:
    """The one value of ``table`` at (failure, data, method)."""
    sel = table[(table.failure == failure) & (table.data == data) & (table.method == method)]
    if sel.empty:
        raise ValueError(f"table: no row for {(failure, data, method)!r}")
    return float(sel["value"].iloc[0])


def _numbers(digits: int = 3, **numbers: float) -> str:
    return ", ".join(f"{k} {v:.{digits}f}" for k, v in numbers.items())


def training_loss_rows(losses: pd.DataFrame) -> list[pd.DataFrame]:
    """The long-table rows of :func:`training_loss_ece`, each loss's ECE
    before temperature scaling (cross-entropy's as "none") and after it."""
    return [
        long_table(
            "training loss",
            "ResNet-50 CIFAR-10",
            {"none" if r["loss"] == "ce" else r["loss"]: r["ECE"], f"{r['loss']} + temperature": r["ECE after TS"]},
        )
        for _, r in losses.iterrows()
    ]


def overconfidence_published(table: pd.DataFrame) -> dict[str, float]:
    """The page's published over-confidence ECEs (the first data set's raw ECE and its ECE after temperature scaling)."""
    over = table.query("failure == 'over-confidence'")
    return {f"ece_overconfidence_{k}": float(over[over.method == m]["value"].iloc[0])
            for k, m in (("raw", "none"), ("ts", "temperature"))}  # fmt: skip


def cross_paper_claims(
    table: pd.DataFrame,
    mix: Mapping[str, float],
    losses: pd.DataFrame,
    small: str,
    large: str,
    n_test: Mapping[str, int],
    cascade_se: float,
    accuracy: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """The page's seven expectations (``kind`` "expectation": the book's, not a paper's claim), each by
    :func:`lib.report.t_verdict`, from the long
    ``table``, the ``mix`` numbers, the ``losses`` table, the two MMLU models and the noise bars: of
    an ECE on the test sizes ``n_test`` ("mmlu", "cifar", "shift"; :func:`lib.ccc.pages.ece_se`, at
    the ``accuracy`` given for a set, else its worst case) and the APGR's ``cascade_se``. Every SE is
    a closed form on one test half (no seeds), so each verdict uses infinite degrees of freedom (the
    normal's 1.96). ``paper_own`` is not testable for any."""
    value = partial(table_value, table)
    se = {k: ece_se(v, (accuracy or {}).get(k, 0.5)) for k, v in n_test.items()}
    over_data = list(table.query("failure == 'over-confidence'")["data"].unique())
    over = {d: (value("over-confidence", d, "none"), value("over-confidence", d, "temperature")) for d in over_data}
    over_se = dict(zip(over_data, (se["mmlu"], se["cifar"])))
    shift_methods = ("temperature (other subjects)", "temperature (same subjects)", "none")
    shift = {m: tuple(value("shift", m, k) for k in shift_methods) for m in (small, large)}
    per_expert = value("routing", MIXTURE, "per-expert temperature")
    mixture_ts = value("routing", MIXTURE, "temperature on the mixture")
    defer, casc = f"P({large} is right)", f"cascade {small} -> {large}"
    acc_vanilla, acc_expert = mix["accuracy (vanilla)"], mix["accuracy (per-expert temperature)"]
    spread_before, spread_after = (float(losses[c].max() - losses[c].min()) for c in ("ECE", "ECE after TS"))
    v = partial(report.t_verdict, df=math.inf)  # closed-form SEs on thousands of examples
    # each row puts the papers' methods side by side on logits none of them used: the book's own
    # expectations, counted apart from the papers' claims (lib.report.KINDS)
    expectation = partial(report.claim_row, kind=report.KINDS[2])
    # the deferral row: the small model's own confidence, raw and temperature-scaled, against the fit
    own = {"raw": value("deferral", defer, "none"), "TS": value("deferral", defer, "temperature")}
    platt = value("deferral", defer, "platt")
    return [
        expectation(
            claim="Temperature scaling fitted on one half lowers ECE on the other half (over-confidence)",
            paper="paper 3: MMLU held-out ECE 0.1830 -> 0.0901 (Table 1; Platt scaling for language)",
            ours="; ".join(f"{d}: {_numbers(raw=a, TS=b)}" for d, (a, b) in over.items()),
            verdict=report.every(v(a - b, over_se[d]) for d, (a, b) in over.items()),
        ),
        expectation(
            claim="Under a subject shift, a temperature from other subjects still helps, but less than one "
            "from the same subjects",
            paper="paper 1: soft-MoE calibration breaks under shift; paper 3: cascade APGR degrades as OOD severity grows (App. A.4)",
            ours="; ".join(f"{m}: {_numbers(raw=r, other=o, same=s_)}" for m, (o, s_, r) in shift.items()),
            verdict=report.every(
                report.every([v(r - o, se["shift"]), v(o - s_, se["shift"])]) for o, s_, r in shift.values()
            ),
        ),
        expectation(
            claim="Per-expert temperatures (MoCaE) calibrate a soft mixture less well than a temperature on "
            "the mixture",
            paper="paper 1: per-expert calibration is not enough",
            ours=_numbers(per_expert=per_expert, mixture_TS=mixture_ts),
            verdict=v(per_expert - mixture_ts, se["cifar"]),
        ),
        expectation(
            claim="Per-expert temperatures leave the mixture's accuracy unchanged (within 0.0005, half the "
            "last digit the paper prints)",
            paper='paper 1: MoCaE\'s accuracy "is identical to Vanilla MoE in every cell of every table" (a '
            "finding printed to 3 decimals, not a consequence of the method: per-expert temperatures can move "
            "the mixture's argmax)",
            ours=_numbers(4, vanilla=acc_vanilla, per_expert=acc_expert),
            verdict=v(MOCAE_ACC_TOL - abs(acc_vanilla - acc_expert)),
        ),
        expectation(
            claim="From the small model's outputs, a fit to the large model's correctness (Platt) estimates when "
            "the large model is right better than the small model's own confidence, raw or temperature-scaled",
            paper="paper 2: OvA-style estimates stay calibrated; paper 3: calibrated confidence is comparable",
            ours=_numbers(**own, platt=platt),
            verdict=report.every(v(ece - platt, se["mmlu"]) for ece in own.values()),
        ),
        expectation(
            claim="A cascade routed on calibrated confidence beats random routing (APGR > 0.5)",
            paper="paper 3: MMLU APGR 0.70",
            ours=_numbers(
                APGR_uncalibrated=value("deferral", casc, "none"),
                APGR_calibrated=value("deferral", casc, "temperature"),
                SE=cascade_se,
            ),
            verdict=v(value("deferral", casc, "temperature") - RANDOM_APGR, cascade_se),
        ),
        expectation(
            claim="After temperature scaling, the spread of ECE across training losses shrinks",
            paper="paper 4, Tables 1 and 4 report ECE before and after TS (Table 2 reports ECE before TS only)",
            ours=_numbers(spread_before=spread_before, spread_after=spread_after),
            verdict=v(spread_before - spread_after, 2 * se["cifar"]),
        ),
    ]


class CrossPaperPage(Page):
    """The cross-paper chapter: five failure modes, the four papers' fixes, on the same logits."""

    name = "cross_paper"
    paper = "cross_paper"
    title = "The four papers' calibration methods on the same logits"
    paper_on_cpu = True  # released logits: no training

    def scale_summary(self, cfg: Mapping[str, Any], data: Mapping[str, Any]) -> str:
        """What produced the page's numbers, in one line."""
        source = (
            "synthetic logits (smoke test only)"
            if cfg["synthetic"]
            else "real MMLU Llama-3.1 and ResNet-50 CIFAR-10 logits"
        )
        return f"{source}; {len(data['mmlu'])} MMLU questions, {len(data['cifar_labels'])} CIFAR-10 images; no training"

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> dict[str, Any]:
        """The MMLU data (``mmlu``) and the ResNet-50s' CIFAR-10 logits (``resnets``, ``cifar_labels``)."""
        mmlu, resnets, y = logits_data(not cfg["synthetic"], cfg["losses"], cfg["n_synthetic"], cfg["seed"])
        return {"mmlu": mmlu, "resnets": resnets, "cifar_labels": y}

    def run(self, cfg: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
        """Every failure mode's numbers: the long ``table``, the ``mix`` numbers, the ``losses``
        table, the test sizes ``n_test`` and the cascade's noise bar ``cascade_se``."""
        mmlu, resnets, y = data["mmlu"], data["resnets"], data["cifar_labels"]
        small, large, seed = cfg["small_model"], cfg["large_model"], cfg["seed"]
        m_cal, m_test = split_halves(len(mmlu), seed=seed)
        c_cal, c_test = split_halves(len(y), seed=seed)
        rows = [
            long_table("over-confidence", large, posthoc_ece(mmlu.logits[large], mmlu.labels, m_cal, m_test)),
            long_table("over-confidence", "ResNet-50 (cross-entropy)", posthoc_ece(resnets["ce"], y, c_cal, c_test)),
        ]
        category = mmlu.questions["category"].to_numpy()
        src, tgt = np.flatnonzero(category == "stem"), np.flatnonzero(category == "humanities")
        t_cal, t_test = (tgt[half] for half in split_halves(len(tgt), seed=seed))
        for model in (small, large):
            rows.append(long_table("shift", model, shift_ece(mmlu.logits[model], mmlu.labels, src, t_cal, t_test)))
        experts = np.stack([resnets[k] for k in cfg["losses"]], axis=1)
        mix = mixture_ece(experts, y, confidence_routing(experts), c_cal, c_test)
        rows.append(long_table("routing", MIXTURE, {k: v for k, v in mix.items() if not k.startswith("accuracy")}))
        rows.append(long_table(
            "deferral", f"P({large} is right)",
            other_model_correctness_ece(mmlu.logits[small], mmlu.labels, _top1(mmlu.logits[large], mmlu.labels), m_cal, m_test),
        ))  # fmt: skip
        apgrs, cascade_se = cascade_apgr(mmlu.logits[small], mmlu.logits[large], mmlu.labels, m_cal, m_test)
        rows.append(long_table("deferral", f"cascade {small} -> {large}", apgrs, metric="APGR"))
        losses = training_loss_ece(resnets, y, c_cal, c_test)
        rows.extend(training_loss_rows(losses))
        # the CIFAR-10 networks' accuracy nearest 0.5 (the largest a (1 - a)): their ECEs' noise bar
        accs = [float(_top1(z[c_test], y[c_test]).mean()) for z in resnets.values()]
        worst = max(accs, key=lambda a: a * (1 - a))
        return {
            "table": pd.concat(rows, ignore_index=True), "mix": mix, "losses": losses, "cascade_se": cascade_se,
            "n_test": {"mmlu": len(m_test), "cifar": len(c_test), "shift": len(t_test)},
            "accuracy": {"cifar": worst},
        }  # fmt: skip

    def claims(self, res: Mapping[str, Any], cfg: Mapping[str, Any]) -> pd.DataFrame:
        """The claims table (:func:`cross_paper_claims` on this run's numbers)."""
        return report.claims_table(
            cross_paper_claims(
                res["table"], res["mix"], res["losses"], cfg["small_model"], cfg["large_model"], res["n_test"],
                res["cascade_se"], res["accuracy"],
            )
        )  # fmt: skip


PAGE = CrossPaperPage()
