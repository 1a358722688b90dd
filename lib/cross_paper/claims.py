"""The cross-paper page's expectations judged from its numbers, and the numbers it publishes.

The page (notebooks/cross_paper.py) measures five failure modes with the tools of papers 1-4 on
offline logits (:mod:`lib.cross_paper.study`) and gathers every number in one long table
(``failure, data, method, metric, value``, :func:`lib.cross_paper.study.long_table`). Here
:func:`cross_paper_claims` states what the papers lead one to expect on those data and computes a
verdict for each, and :func:`overconfidence_published` picks the over-confidence ECEs the page
publishes.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from lib import report
from lib.cross_paper.study import long_table
from lib.moe.claims import MOCAE_ACC_TOL

RANDOM_ROUTING_APGR: float = 0.5
"""The APGR of routing at random between the two models of a cascade (paper 3); a cascade routed on
calibrated confidence is expected to exceed it."""

MIXTURE: str = "mixture of ResNet-50s"
"""The ``data`` name of the routing rows (a soft mixture of the ResNet-50s trained with each loss)."""

_TABLE_COLUMNS = ("failure", "data", "method", "value")


def table_value(table: pd.DataFrame, failure: str, data: str, method: str) -> float:
    """The one value of ``table`` at (failure, data, method)."""
    sel = table[(table.failure == failure) & (table.data == data) & (table.method == method)]
    if sel.empty:
        raise ValueError(f"table: no row for {(failure, data, method)!r}")
    return float(sel["value"].iloc[0])


def _numbers(**numbers: float) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in numbers.items())


def training_loss_rows(losses: pd.DataFrame) -> list[pd.DataFrame]:
    """The long-table rows of :func:`lib.cross_paper.study.training_loss_ece`, each loss's ECE
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
    return {
        "ece_overconfidence_raw": float(over[over.method == "none"]["value"].iloc[0]),
        "ece_overconfidence_ts": float(over[over.method == "temperature"]["value"].iloc[0]),
    }


def cross_paper_claims(
    table: pd.DataFrame, mix: Mapping[str, float], losses: pd.DataFrame, small: str, large: str
) -> pd.DataFrame:
    """The page's seven expectations, each judged from the numbers (:func:`lib.report.claims_table`).

    ``table`` is the page's long table; ``mix`` the mixture's numbers
    (:func:`lib.cross_paper.study.mixture_ece`, with both accuracies); ``losses`` the table of
    :func:`lib.cross_paper.study.training_loss_ece`; ``small`` and ``large`` the two MMLU models.
    """
    missing = set(_TABLE_COLUMNS) - set(table.columns)
    if missing:
        raise ValueError(f"table: missing columns {sorted(missing)}")
    for key in ("accuracy (vanilla)", "accuracy (per-expert temperature)"):
        if key not in mix:
            raise ValueError(f"mix: needs {key!r}")

    def value(failure: str, data: str, method: str) -> float:
        return table_value(table, failure, data, method)

    over = {
        d: (value("over-confidence", d, "none"), value("over-confidence", d, "temperature"))
        for d in table.query("failure == 'over-confidence'")["data"].unique()
    }
    shift = {
        m: (
            value("shift", m, "temperature (other subjects)"),
            value("shift", m, "temperature (same subjects)"),
            value("shift", m, "none"),
        )
        for m in (small, large)
    }
    per_expert = value("routing", MIXTURE, "per-expert temperature")
    mixture_ts = value("routing", MIXTURE, "temperature on the mixture")
    defer, casc = f"P({large} is right)", f"cascade {small} -> {large}"
    acc_vanilla, acc_expert = mix["accuracy (vanilla)"], mix["accuracy (per-expert temperature)"]
    spread_before = float(losses["ECE"].max() - losses["ECE"].min())
    spread_after = float(losses["ECE after TS"].max() - losses["ECE after TS"].min())
    return report.claims_table(
        [
            {
                "claim": "Temperature scaling fitted on one half lowers ECE on the other half (over-confidence)",
                "paper": "paper 3: MMLU ECE 0.19 -> 0.09",
                "ours": "; ".join(f"{d}: {_numbers(raw=a, TS=b)}" for d, (a, b) in over.items()),
                "verdict": report.verdict(all(b < a for a, b in over.values())),
            },
            {
                "claim": "Under a subject shift, a temperature from other subjects still helps, but less than one from the same subjects",
                "paper": "papers 1 and 3: calibration degrades under shift",
                "ours": "; ".join(f"{m}: {_numbers(raw=r, other=o, same=s_)}" for m, (o, s_, r) in shift.items()),
                "verdict": report.verdict(all(s_ <= o < r for o, s_, r in shift.values())),
            },
            {
                "claim": "Per-expert temperatures (MoCaE) calibrate a soft mixture less well than a temperature on the mixture",
                "paper": "paper 1: per-expert calibration is not enough",
                "ours": _numbers(per_expert=per_expert, mixture_TS=mixture_ts),
                "verdict": report.verdict(mixture_ts < per_expert),
            },
            {
                "claim": "Per-expert temperatures leave the mixture's accuracy unchanged (to the paper's three decimals)",
                "paper": 'paper 1: MoCaE\'s accuracy "is identical to Vanilla MoE in every cell of every table" (a finding '
                "printed to 3 decimals, not a consequence of the method: per-expert temperatures can move the mixture's argmax)",
                "ours": _numbers(vanilla=acc_vanilla, per_expert=acc_expert),
                "verdict": report.verdict(abs(acc_vanilla - acc_expert) < MOCAE_ACC_TOL),
            },
            {
                "claim": "A model-specific fit (Platt) estimates when another model is right better than its raw confidence",
                "paper": "paper 2: OvA-style estimates stay calibrated; paper 3: calibrated confidence is comparable",
                "ours": _numbers(raw=value("deferral", defer, "none"), platt=value("deferral", defer, "platt")),
                "verdict": report.verdict(value("deferral", defer, "platt") < value("deferral", defer, "none")),
            },
            {
                "claim": "A cascade routed on calibrated confidence beats random routing (APGR > 0.5)",
                "paper": "paper 3: MMLU APGR 0.70",
                "ours": _numbers(
                    APGR_uncalibrated=value("deferral", casc, "none"),
                    APGR_calibrated=value("deferral", casc, "temperature"),
                ),
                "verdict": report.verdict(value("deferral", casc, "temperature") > RANDOM_ROUTING_APGR),
            },
            {
                "claim": "After temperature scaling, the spread of ECE across training losses shrinks",
                "paper": "paper 4, Tables 1 and 4 report ECE before and after TS (Table 2 reports ECE before TS only)",
                "ours": _numbers(spread_before=spread_before, spread_after=spread_after),
                "verdict": report.verdict(spread_after < spread_before),
            },
        ]
    )
