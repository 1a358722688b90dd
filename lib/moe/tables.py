"""Paper 1's results as tables (section 6, Tables 1-3; App. D.1 for MoCaE): one row per run and
subset, mean +- standard error over seeds in the paper's layout and style (:func:`fmt`), ours beside
the paper's (PACS's Table 2), MoCaE's two temperature fits and where every number came from, from the
records of :func:`lib.moe.train.train_run`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from lib import report
from lib.engine.cache import is_committed
from lib.engine.plan import coverage, coverage_text
from lib.moe.experiment import METHOD_LABELS, METHODS, METRICS, SUBSETS
from lib.moe.record import run_fields, subset_metrics
from lib.validation import check_choice

COLUMN_LABELS: dict[tuple[str, str], str] = {
    ("all", "accuracy"): "Accuracy",
    ("hard", "accuracy"): "Hard Accuracy",
    ("all", "ece"): "ECE",
    ("all", "ece_ts"): "ECE+TS",
    ("hard", "ece"): "Hard ECE",
    ("hard", "ece_ts"): "Hard ECE+TS",
}


T_AT_BOUND: float = 1e-5
"""A fitted temperature below this sits at :class:`~lib.calibration.posthoc.TemperatureScaler`'s lower bound (1e-6)."""

_RUN_FIELDS = ("lam", "warmup_epochs", "epochs", "backbone", "pretrained", "device", "date", "key", "train_seconds")


def results_frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (method, seed, subset) with accuracy, ece, ece_ts, nll and n, plus the run's
    routing entropy, backbone, pretrained flag, device, provenance date and training seconds."""
    rows = [
        {
            "method": f["method"],
            "label": METHOD_LABELS.get(f["method"], f["method"]),
            "seed": f["seed"],
            "subset": subset,
            **subset_metrics(r, subset),  # n, then METRICS, then nll
            "routing_entropy": (r["metrics"].get("routing_entropy") or {}).get(subset),
            **{k: f[k] for k in _RUN_FIELDS},
        }
        for r, f in zip(records, map(run_fields, records))
        for subset in SUBSETS
        if r["metrics"].get(subset)
    ]
    return pd.DataFrame(rows)


def _se(values: pd.Series) -> float:
    se = report.standard_error(values.dropna().to_numpy(dtype=float))
    return float("nan") if se is None else se


def summarize(frame: pd.DataFrame, by: Sequence[str] = ("method",), metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """Mean and standard error of the mean over seeds (SE = std / sqrt(n), NaN with one seed), one
    row per ``by`` values and subset: columns ``<metric>`` and ``<metric>_se``, ``seeds``."""
    if not isinstance(frame, pd.DataFrame) or frame.empty:
        raise ValueError("frame: expected a non-empty DataFrame from results_frame")
    keys = [*by, "subset"]
    for k in keys:
        if k not in frame.columns:
            raise ValueError(f"by: column {k!r} not in frame")
    return (
        frame.groupby(keys, sort=False)
        .agg(**{m: (m, "mean") for m in metrics}, **{f"{m}_se": (m, _se) for m in metrics}, seeds=("seed", "nunique"))
        .reset_index()
    )


def fmt(mean: float | None, se: float | None = None, digits: int = 3) -> str:
    """'.943 ± .004' in the paper's style (leading zero dropped); '—' for a missing value."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"

    def f(v: float) -> str:
        s = f"{v:.{digits}f}"
        return s.replace("0.", ".", 1) if s.startswith("0.") else s.replace("-0.", "-.", 1)

    if se is None or (isinstance(se, float) and math.isnan(se)):
        return f(mean)
    return f"{f(mean)} ± {f(se)}"


def paper_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Tables 1/3 layout: one row per method (paper order), columns Accuracy, Hard Accuracy, ECE,
    ECE+TS, Hard ECE, Hard ECE+TS as 'mean ± se' strings, and the number of seeds."""
    rows = []
    for m in [m for m in METHODS if m in set(summary["method"])]:
        sub = summary[summary["method"] == m].set_index("subset")
        row: dict[str, Any] = {"Method": METHOD_LABELS[m]}
        for (subset, metric), label in COLUMN_LABELS.items():
            row[label] = fmt(sub.loc[subset, metric], sub.loc[subset, f"{metric}_se"]) if subset in sub.index else "—"
        row["seeds"] = int(sub["seeds"].max())
        rows.append(row)
    return pd.DataFrame(rows)


def beside_paper(summary: pd.DataFrame, paper: Mapping[str, Sequence[float]], subset: str = "hard") -> pd.DataFrame:
    """Our accuracy / ECE / ECE+TS (mean ± se on ``subset``) beside the paper's, one row per method:
    ``paper`` maps a method to (accuracy, SE, ECE, SE, ECE+TS, SE) as a table prints them (PACS's
    Table 2 for one target, ``lib.moe.pages.pacs.PAPER_TABLE2``)."""
    check_choice(subset, SUBSETS, "subset")
    rows = []
    for m in METHODS:
        ours = summary[(summary["method"] == m) & (summary["subset"] == subset)]
        if ours.empty and m not in paper:
            continue
        row: dict[str, Any] = {"Method": METHOD_LABELS[m]}
        for i, metric in enumerate(METRICS):
            label = {"accuracy": "Acc", "ece": "ECE", "ece_ts": "ECE+TS"}[metric]
            row[f"{label} (ours)"] = fmt(ours[metric].iloc[0], ours[f"{metric}_se"].iloc[0]) if not ours.empty else "—"
            row[f"{label} (paper)"] = fmt(paper[m][2 * i], paper[m][2 * i + 1]) if m in paper else "—"
        rows.append(row)
    return pd.DataFrame(rows)


def mocae_fit_table(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Vanilla MoE beside MoCaE with the paper's partial temperature fit and with converged ones (the
    book's earlier definition), from each Vanilla record: one row per (seed, variant, subset) with
    accuracy, ECE, ECE+TS and the range of the expert temperatures; empty without converged variants."""
    rows: list[dict[str, Any]] = []
    for r in records:
        seed, m = run_fields(r)["seed"], r["metrics"]
        if r["method"] != "vanilla" or "mocae_converged" not in m:
            continue
        for variant, block in (
            ("Vanilla MoE", m),
            ("MoCaE, paper's fit (LBFGS lr 0.01 x 50)", m["mocae"]),
            ("MoCaE, converged fit", m["mocae_converged"]),
        ):
            temps = block.get("expert_temperatures")
            for sub in SUBSETS:
                b = block.get(sub) or {}
                rows.append(
                    {
                        "seed": seed,
                        "variant": variant,
                        "subset": sub,
                        **{COLUMN_LABELS["all", k]: b.get(k) for k in METRICS},
                        "expert T": "—" if temps is None else f"{min(temps):.2f}-{max(temps):.2f}",
                    }
                )
    return pd.DataFrame(rows)


def temperature_fits(records: Sequence[Mapping[str, Any]]) -> str:
    """What the paper's partial temperature fit (ECE+TS) did on these runs beside the converged fit, in
    one sentence: how many models were underconfident on the validation split (converged T < 1), and
    the runs whose partial fit is no partial move, ending outside the interval between 1 and the
    converged T (past it, or at T's lower bound: one-hot predictions, ECE+TS = 1 - accuracy)."""
    fits = [(run_fields(r), r["metrics"]) for r in records if "temperature_converged" in r["metrics"]]
    if not fits:
        return "Temperature fits: no run here has both fits."
    under = sum(m["temperature_converged"] < 1 for _, m in fits)
    head = f"Temperature fits: {under} of {len(fits)} runs' models were underconfident on the validation split (converged T < 1)"
    out = [
        (f, m)
        for f, m in fits
        if not min(1, m["temperature_converged"]) <= m["temperature"] <= max(1, m["temperature_converged"])
    ]
    if not out:
        return f"{head}; the paper's partial fit ended between 1 and the converged T in every run."
    runs = ", ".join(
        f"{METHOD_LABELS.get(f['method'], f['method'])} s{f['seed']} (T {m['temperature']:.2g} vs "
        f"{m['temperature_converged']:.2f}{', at the bound' if m['temperature'] < T_AT_BOUND else ''})"
        for f, m in out
    )
    return (
        f"{head}. The paper's partial LBFGS fit is no partial move in {len(out)} runs: it ended past the "
        f"converged T, {sum(m['temperature'] < T_AT_BOUND for _, m in out)} of them at T's lower bound, where "
        f"every prediction is one-hot and ECE+TS is 1 - accuracy: {runs}."
    )


def provenance_table(records: Sequence[Mapping[str, Any]]) -> tuple[str, pd.DataFrame]:
    """Where every number came from, compactly: one sentence naming the backbone(s) once, and one row
    per method (seeds, epochs, device, date, code version, training minutes summed over its seeds,
    and whether the records were committed GPU results in ``results/`` or computed here)."""
    rows = [
        {
            "method": METHOD_LABELS.get(f["method"], f["method"]),
            "seed": f["seed"],
            "backbone": f"{f['backbone']} ({'ImageNet-pretrained' if f['pretrained'] else 'random init'})",
            "epochs": f["epochs"],
            "device": f["device"],
            "date": str(f["date"])[:10],
            "code": f"v{f['version']}",
            "train_min": (f["train_seconds"] or 0) / 60,
            "source": "results/ (GPU)" if is_committed(r) else "computed here",
        }
        for r, f in zip(records, map(run_fields, records))
    ]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return "No runs.", frame
    line = "Backbone: " + "; ".join(dict.fromkeys(frame["backbone"])) + "."
    join = lambda v: ", ".join(dict.fromkeys(map(str, v)))  # noqa: E731
    cols = {"seeds": "seed", **{c: c for c in ("epochs", "device", "date", "code", "train_min", "source")}}
    table = frame.groupby("method", sort=False).agg(
        **{k: (c, (lambda v: round(float(v.sum()), 2)) if c == "train_min" else join) for k, c in cols.items()}
    )
    return line, table.reset_index().rename(columns={"train_min": "training minutes"})


def paper_values(statements: Sequence[tuple[Any, ...]], method: str) -> str:
    """The paper's values for ``method`` among ``statements`` (:data:`lib.moe.paper.PAPER_STATEMENTS`
    of a page): "ECE .013" where the digits survived, else that they were lost (Tables 1 and 3 lost
    all others)."""
    kept = [
        f"{COLUMN_LABELS[s, metric]} {fmt(v)}" for _, m, s, metric, v, _ in statements if m == method and v is not None
    ]
    return "; ".join(kept) or "digits lost in the text extraction"


def paper_scale_table(
    items: Sequence[Any],
    got: Mapping[str, Mapping[str, Any]],
    paper: Mapping[str, Sequence[float]] | None = None,
    statements: Sequence[tuple[Any, ...]] = (),
) -> pd.DataFrame | None:
    """The paper's table from the published records ``got`` (plan id -> record) of the planned
    ``items`` with the paper's numbers beside ours and a ``coverage`` column ("k of n seeds"; MoCaE
    counts its Vanilla runs); ``None`` when nothing is published. With ``paper`` (PACS's Table 2 rows
    of one target) the layout of :func:`beside_paper` on all images; otherwise :func:`paper_table`
    (mean ± SE over the published seeds) with a ``paper`` column of what ``statements`` (the page's
    :data:`lib.moe.paper.PAPER_STATEMENTS`) kept of the paper's values (:func:`paper_values`)."""
    from lib.moe.train import mocae_view

    recs = [got[it.id] for it in items if it.id in got]
    if not recs:
        return None
    # MoCaE recalibrates the Vanilla network post hoc: the queue publishes it inside the Vanilla record
    mocae = [{**r, **mocae_view(r)} for r in recs if r.get("method") == "vanilla" and r.get("metrics", {}).get("mocae")]
    summary = summarize(results_frame([*map(dict, recs), *mocae]))
    labels = {METHOD_LABELS[m]: m for m in METHOD_LABELS}
    if paper is not None:
        table = beside_paper(summary, paper, subset="all")
    else:
        table = paper_table(summary).drop(columns=["seeds"])
        table["paper"] = [paper_values(statements, labels[lbl]) for lbl in table["Method"]]
    cov = coverage_text(coverage(items, got), "seeds")
    table["coverage"] = [cov.get(labels.get(lbl, ""), cov.get("vanilla", "")) for lbl in table["Method"]]
    return table
