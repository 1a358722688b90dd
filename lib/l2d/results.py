"""What paper 2's two pages share ("Calibration of multi-expert learning to defer", Sec. 5.2-5.4,
Figures 1-2): one table row per run, means and standard errors over seeds, and the claims (gated by
the accuracy floor: :func:`gated_claims`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lib import report
from lib.validation import check_record

POINT_KEYS: tuple[str, ...] = ("experiment", "value", "surrogate", "seed")  # a run's grid point (its config)
RESULT_COLUMNS = ("ece", "system_accuracy", "classifier_accuracy", "defer_rate", "frac_estimate_above_1")
RESULT_COLUMNS += ("ece_random_expert",)  # the last: computed from the record (:func:`result_row`)

ECE_MARGIN: float = 0.02
"""The smallest ECE effect the claims are about (two points; the paper's effects are 0.1-0.4, Fig. 1):
within it a difference is "inconclusive", and with one seed it alone decides."""

FLAT_TOL: float = 0.03
"""'OvA expert ECE stays flat': its rise within +-FLAT_TOL (our bar; Fig. 1a/d show it flat to the
eye), beyond the noise of the per-seed rises (:func:`lib.report.t_verdict`) and FLAT_TOL / 3."""

RANDOM_EXPERT_ECE_MIN: float = 0.4
"""The paper's 'rises to above 0.4' (Fig. 1c/f) -- the random expert's softmax ECE at the others' best quality."""

OVA_ACCURACY_MARGIN: float = 0.0025
"""'OvA system accuracy is higher than softmax's' (the paper: 'slightly-to-moderately superior in all
cases', Sec. 5.2; 'a slight edge', Sec. 5.4): the smallest edge the claim is about (a quarter point),
below which, or within the noise of the per-seed differences, it is inconclusive."""

ACCURACY_EXPERIMENTS: tuple[str, ...] = ("experts", "specialized")
"""The sweeps whose system accuracy the paper reports (Fig. 1b/e, Fig. 2b); the dependence sweep's
(Fig. 1c/f) shows ECE only."""


def result_row(point: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    """The grid ``point`` and the ``RESULT_COLUMNS`` of its run ``record`` (a plain dict of
    :func:`lib.l2d.experiment.train_and_score`'s metrics; ``ece_random_expert`` is expert 0's ECE in
    the dependence sweep, whose expert 0 is the random one (Fig. 1c/f), and NaN in the others, whose
    expert 0 is an oracle on its region); ``ValueError`` naming the run if the record is malformed or
    another point's."""
    check_record(record, "a paper-2 run record", POINT_KEYS, RESULT_COLUMNS[:-1])
    want = {k: point[k] for k in POINT_KEYS}
    got = {k: record["config"][k] for k in POINT_KEYS}
    if got != want:
        raise ValueError(f"record: run {record.get('key', '?')} is the point {got}, not {want}")
    metrics = {**record, "ece_random_expert": (record.get("ece_per_expert") or [None])[0]}
    check_record(metrics, "a paper-2 run record", (), RESULT_COLUMNS[-1:])
    if want["experiment"] != "dependence":  # no random expert in this sweep
        metrics["ece_random_expert"] = np.nan
    return {**want, **{col: float(metrics[col]) for col in RESULT_COLUMNS}}


def summarize(df: pd.DataFrame, metrics: Sequence[str] = RESULT_COLUMNS) -> pd.DataFrame:
    """Mean, ``_sd`` and ``_se`` over seeds of each metric per (experiment, value, surrogate), and ``seeds``."""
    if df.empty:
        raise ValueError("df: no runs to summarize")
    g = df.groupby(["experiment", "value", "surrogate"], sort=True)
    out = g[list(metrics)].mean()
    sd = g[list(metrics)].std(ddof=1).fillna(0.0)
    n = g.size()
    for m in metrics:
        out[f"{m}_sd"] = sd[m]
        out[f"{m}_se"] = sd[m] / np.sqrt(n)
    out["seeds"] = n
    return out.reset_index()


METRIC_LABELS: dict[str, str] = {
    "ece": "expert ECE",
    "system_accuracy": "system accuracy",
    "classifier_accuracy": "classifier accuracy",
    "defer_rate": "deferral rate",
    "frac_estimate_above_1": "estimates above 1 (share; ECE clips them to 1)",
    "ece_random_expert": "random expert's ECE",
}
"""The names the pages' tables give the ``RESULT_COLUMNS`` (the paper's, Figs. 1-2)."""


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """:func:`summarize`'s means as a page shows them: one row per sweep point and surrogate, each
    metric as "mean ± standard error" over seeds (the mean alone with one seed; blank where the
    sweep has no such value: the random expert outside the dependence sweep), and the seeds."""
    out = summary[["experiment", "value", "surrogate"]].copy()
    one = summary["seeds"] < 2
    for m, label in METRIC_LABELS.items():
        out[label] = [
            "" if np.isnan(a) else f"{a:.4f}" if o else f"{a:.4f} ± {b:.4f}"
            for a, b, o in zip(summary[m], summary[f"{m}_se"], one)
        ]
    return out.assign(seeds=summary["seeds"])


def pick(summary: pd.DataFrame, experiment: str, value: float, surrogate: str, metric: str) -> float:
    """One mean of :func:`summarize` at (experiment, value, surrogate)."""
    row = summary[(summary.experiment == experiment) & (summary.value == value) & (summary.surrogate == surrogate)]
    if row.empty:
        raise ValueError(f"experiment, value, surrogate: no summary row for {(experiment, value, surrogate)!r}")
    return float(row[metric].iloc[0])


def _per_seed(df: pd.DataFrame, experiment: str, surrogate: str, metric: str) -> pd.DataFrame:
    sub = df[(df.experiment == experiment) & (df.surrogate == surrogate)]
    return sub.pivot_table(index="seed", columns="value", values=metric)


def _rise(df: pd.DataFrame, experiment: str, surrogate: str, metric: str) -> pd.Series:
    """Per seed (the index): metric at the largest value of the sweep minus metric at the smallest."""
    t = _per_seed(df, experiment, surrogate, metric)
    return (t[t.columns.max()] - t[t.columns.min()]).dropna()


def seed_paired_verdict(a: pd.Series, b: pd.Series, margin: float) -> tuple[str, str]:
    """ "a - b > 0" for two per-seed series (indexed by seed): :func:`lib.report.paired_verdict` on
    the differences of the seeds both have, so that seed s of one side meets seed s of the other
    whatever the seed counts; with no seed in common, :func:`lib.report.welch_verdict` on the two
    as independent samples. Also the text of the comparison (mean difference, seeds used)."""
    a, b = a.dropna(), b.dropna()
    if a.empty or b.empty:
        return report.VERDICTS[2], "no runs"
    seeds = a.index.intersection(b.index)
    if len(seeds):
        d = (a[seeds] - b[seeds]).to_numpy()
        return report.paired_verdict(d, margin), f"{d.mean():+.4f} (paired over {_seeds(d)})"
    diff = float(a.mean() - b.mean())
    return report.welch_verdict(a, b, margin), f"{diff:+.4f} (unpaired: {len(a)} and {len(b)} seeds, Welch)"


def _seeds(x: np.ndarray) -> str:
    return f"{len(x)} seed{'s' if len(x) != 1 else ''}"


def l2d_claims(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The paper's claims (Sec. 5.2-5.4) from the runs in ``df``, each by
    :func:`lib.report.paired_verdict` on per-seed differences (both surrogates share each seed; the
    Student-t critical value at n - 1 degrees of freedom for n seeds, :func:`lib.report.t_verdict`):

    * softmax ECE grows with the number of experts (margin :data:`ECE_MARGIN`), OvA's stays within
      +-:data:`FLAT_TOL`; again for specialized experts (Fig. 2) when run;
    * the random expert's softmax ECE rises with the others' quality, more than OvA's, and exceeds
      :data:`RANDOM_EXPERT_ECE_MIN` at the highest;
    * OvA's system accuracy is higher than softmax's (beyond :data:`OVA_ACCURACY_MARGIN`) in every
      sweep of :data:`ACCURACY_EXPERIMENTS` run (per seed, the mean over the sweep's points of OvA -
      softmax at that seed and point).

    Two surrogates' runs are compared seed by seed (:func:`seed_paired_verdict`), never by position.

    The paper gives plots only, so ``paper_own`` is not testable."""
    rows: list[dict[str, Any]] = []
    for exp, label in (("experts", "experts (oracles)"), ("specialized", "specialized experts")):
        if not (df.experiment == exp).any():
            continue
        sm, ova = _rise(df, exp, "softmax", "ece").to_numpy(), _rise(df, exp, "ova", "ece").to_numpy()
        vals = sorted(df[df.experiment == exp].value.unique())
        m_ova = float(np.mean(ova))
        rows += [
            report.claim_row(
                f"softmax expert ECE grows with the number of {label} ({vals[0]:g} to {vals[-1]:g})",
                "grows (Fig. 1a/d, Fig. 2a)",
                f"rise {np.mean(sm):+.3f} ({_seeds(sm)}: {', '.join(f'{v:+.3f}' for v in sm)})",
                report.paired_verdict(sm, ECE_MARGIN),
            ),
            report.claim_row(
                f"OvA expert ECE stays flat with the number of {label} (rise within +-{FLAT_TOL})",
                "flat",
                f"rise {m_ova:+.3f} ({_seeds(ova)}; softmax {np.mean(sm):+.3f})",
                report.t_verdict(
                    FLAT_TOL - abs(m_ova), report.standard_error(ova), FLAT_TOL / 3, df=max(len(ova) - 1, 0)
                ),
            ),
        ]
    if (df.experiment == "dependence").any():
        sm_s, ova_s = (_rise(df, "dependence", s, "ece_random_expert") for s in ("softmax", "ova"))
        sm, ova = sm_s.to_numpy(), ova_s.to_numpy()
        parts = (report.paired_verdict(sm, ECE_MARGIN), seed_paired_verdict(sm_s, ova_s, ECE_MARGIN)[0])
        top = _per_seed(df, "dependence", "softmax", "ece_random_expert")
        top = top[top.columns.max()].to_numpy()
        rows += [
            report.claim_row(
                "the random expert's softmax ECE rises with the other experts' quality; OvA's rises less",
                "rises to above 0.4 (softmax); nearly flat (OvA) (Fig. 1c/f): the book tests OvA's rise against "
                "softmax's, a weaker reading of 'nearly flat'",
                f"rise softmax {np.mean(sm):+.3f}, OvA {np.mean(ova):+.3f} ({_seeds(sm)})",
                report.every(parts),
            ),
            report.claim_row(
                f"the random expert's softmax ECE exceeds {RANDOM_EXPERT_ECE_MIN} when the others are best",
                f"> {RANDOM_EXPERT_ECE_MIN}",
                f"{np.mean(top):.3f} ({_seeds(top)})",
                report.paired_verdict(top - RANDOM_EXPERT_ECE_MIN, ECE_MARGIN),
            ),
        ]
    sweeps = [e for e in ACCURACY_EXPERIMENTS if (df.experiment == e).any()]
    if sweeps:

        def per_seed(exp: str, surrogate: str) -> pd.Series:
            """Per seed, the surrogate's accuracy averaged over the sweep's points."""
            return df[(df.experiment == exp) & (df.surrogate == surrogate)].groupby("seed")["system_accuracy"].mean()

        got = {e: seed_paired_verdict(per_seed(e, "ova"), per_seed(e, "softmax"), OVA_ACCURACY_MARGIN) for e in sweeps}
        rows.append(
            report.claim_row(
                "OvA system accuracy is higher than softmax's (every sweep)",
                "'the OvA parameterization is slightly-to-moderately superior in all cases' (Sec. 5.2, Fig. 1b/e); "
                "'both methods are competitive, with OvA (orange) having a slight edge' (Sec. 5.4, Fig. 2b); the "
                "book tests each sweep's mean over its points, not every point",
                "OvA - softmax, mean over each sweep's points: " + "; ".join(f"{e}: {t}" for e, (_, t) in got.items()),
                report.every(v for v, _ in got.values()),
            )
        )
    return rows


def gated_claims(runs: pd.DataFrame, reference: float, labels: Any) -> tuple[pd.DataFrame, str]:
    """A page's claims table: :func:`l2d_claims` of ``runs`` gated by the book's accuracy floor
    (:func:`lib.report.gate_claims`) on the classifier part's mean accuracy against the ``reference``
    accuracy, chance being the majority-class rate of the test ``labels``; as
    :func:`lib.report.claims_table`, with the floor's rule and this run's case in two sentences."""
    if not isinstance(runs, pd.DataFrame) or "classifier_accuracy" not in runs.columns or runs.empty:
        raise ValueError("runs: expected the non-empty DataFrame of a page's runs, with classifier_accuracy")
    accuracy = float(runs["classifier_accuracy"].mean())
    chance = report.chance_accuracy(labels)
    return report.gate_claims(l2d_claims(runs), accuracy, reference, chance, reference="reference")[:2]
