"""Paper 1's claims (i)-(iv) (section 6), shared by the CIFAR-10H, PACS and CivilComments pages, judged
from the runs' per-seed numbers, and the numbers those pages publish.

Every claim is judged by the book's symmetric rule (:func:`lib.report.paired_verdict`): the mean of
the per-seed differences of the two sides (every method runs the same seeds; MoCaE is Vanilla MoE's
own network recalibrated) against the Student-t critical value at n - 1 degrees of freedom times its
standard error, and at least :data:`MARGIN`. A paper's own table of means and SEs (PACS, Table 2) is
weighed by the same rule with the two methods as independent groups of :data:`PAPER_SEEDS` seeds at
Welch's degrees of freedom (:func:`lib.report.welch_means_verdict`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lib import report
from lib.moe.experiment import METHOD_LABELS, METHODS, METRICS
from lib.moe import paper as paper_text
from lib.moe.methods import ROBUST_METHODS as ROBUST
from lib.moe.record import SUBSETS, run_fields
from lib.moe.tables import fmt, summarize

NON_ROBUST: tuple[str, ...] = tuple(m for m in METHODS if m not in ROBUST)
#: The smallest difference (of ECE or accuracy) the claims are about: the noise bar is max(t x SE, MARGIN)
#: (:func:`lib.report.t_verdict`).
MARGIN: float = 0.01
#: The seeds behind each mean ± SE of the paper's tables (five per method, §6.3).
PAPER_SEEDS: int = paper_text.PAPER["claims"]["seeds"]
#: The paper prints accuracies to three decimals and says MoCaE's equal Vanilla's "in every cell": the
#: claim holds when the two differ by less than half that last digit, 5e-4 (tempered experts can move
#: the argmax of the mixture).
MOCAE_ACC_TOL = 5e-4
#: What the paper reports for claims (i)-(iv): the "paper" column of every page's claims table.
PAPER_SAYS: tuple[str, ...] = tuple(paper_text.PAPER["claims"]["says"])

CLAIMS: tuple[str, ...] = (
    "(i) robust objectives lower ECE on {subset} data",
    "(ii) MoCaE's ECE gain over Vanilla MoE is small next to Robust MoE's (under half of it)",
    "(iii) Robust Filtered trades less accuracy than Robust MoE",
    "(iv) the gains survive temperature scaling",
)

#: Claim (ii)'s reading of "small relative to" (the paper gives no ratio): MoCaE's ECE gain over Vanilla
#: MoE below this share of Robust MoE's.
SMALL_SHARE: float = 0.5

#: A method's row of a paper table: accuracy, its SE, ECE, its SE, ECE+TS, its SE.
PaperRow = tuple[float, float, float, float, float, float]


def seed_diff(a: pd.Series, b: pd.Series) -> np.ndarray:
    """``a - b`` over the seeds (index) both have."""
    seeds = a.index.intersection(b.index)
    return (a[seeds] - b[seeds]).to_numpy()


def _per_seed(frame: pd.DataFrame, method: str, subset: str, metric: str) -> pd.Series:
    rows = frame[(frame["method"] == method) & (frame["subset"] == subset)]
    return rows.set_index("seed")[metric].dropna().astype(float)


def paired(frame: pd.DataFrame, a: str, b: str, subset: str, metric: str) -> np.ndarray:
    """Per-seed differences ``metric(a) - metric(b)`` on ``subset`` over the seeds both ran."""
    return seed_diff(_per_seed(frame, a, subset, metric), _per_seed(frame, b, subset, metric))


def diff_text(diffs: np.ndarray) -> str:
    """'.043 ± .006 (3 seeds)': the mean paired difference and its SE (none with one seed); '—' for none."""
    if not len(diffs):
        return "—"
    return f"{fmt(float(diffs.mean()), report.standard_error(diffs))} ({len(diffs)} seed{'s' * (len(diffs) != 1)})"


def small_gain_effect(frame: pd.DataFrame, subset: str) -> np.ndarray:
    """Claim (ii)'s per-seed effect, positive when MoCaE's ECE gain over Vanilla MoE is below
    :data:`SMALL_SHARE` of Robust MoE's: SMALL_SHARE x gain(Robust MoE) - gain(MoCaE), each gain
    Vanilla's ECE minus the method's, over the seeds all three ran (paired)."""
    va, vm, vr = (_per_seed(frame, m, subset, "ece") for m in ("vanilla", "mocae", "robust"))
    seeds = va.index.intersection(vm.index).intersection(vr.index)
    va, vm, vr = va[seeds], vm[seeds], vr[seeds]
    return (SMALL_SHARE * (va - vr) - (va - vm)).to_numpy()


def verdict_of(diffs: np.ndarray, margin: float = MARGIN) -> str:
    """:func:`lib.report.paired_verdict` of ``diffs``; inconclusive when no seed has both sides."""
    return report.paired_verdict(diffs, margin) if len(diffs) else report.VERDICTS[2]


def best(summary: pd.DataFrame, methods: Sequence[str], subset: str, metric: str) -> str:
    """The method of ``methods`` with the lowest mean ``metric`` on ``subset``; "" if none."""
    sub = summary[(summary["subset"] == subset) & summary["method"].isin(methods)].dropna(subset=[metric])
    return "" if sub.empty else str(sub.loc[sub[metric].idxmin()]["method"])


def best_accuracy(summary: pd.DataFrame) -> float:
    """The best mean accuracy on all points over the methods of ``summary`` (the accuracy a page
    hands to :func:`lib.report.gate_claims`); NaN when there is none."""
    acc = summary.loc[summary["subset"] == "all", "accuracy"].dropna()
    return float(acc.max()) if len(acc) else float("nan")


def paper_verdict(paper: Mapping[str, PaperRow] | None, a: str, b: str, metric: str, seeds: int = PAPER_SEEDS) -> str:
    """The same rule on a paper's table of means and SEs over ``seeds`` seeds per method: "m(a) - m(b)
    > 0" for ``metric`` m, the two printed SEs combined at Welch's degrees of freedom (and
    :data:`MARGIN`; :func:`lib.report.welch_means_verdict`); :data:`lib.report.NOT_TESTABLE` without
    a table."""
    if not paper or a not in paper or b not in paper:
        return report.NOT_TESTABLE
    col = 2 * METRICS.index(metric)
    (ma, sa), (mb, sb) = paper[a][col : col + 2], paper[b][col : col + 2]
    return report.welch_means_verdict(ma, sa, seeds, mb, sb, seeds, MARGIN)


def paper_small_gain_verdict(paper: Mapping[str, PaperRow] | None, seeds: int = PAPER_SEEDS) -> str:
    """Claim (ii) on a paper's table of ECE means and SEs over ``seeds`` seeds per method: SMALL_SHARE x
    (Vanilla - Robust MoE) - (Vanilla - MoCaE) = MoCaE - (1 - SMALL_SHARE) Vanilla - SMALL_SHARE Robust MoE,
    the three printed means as independent groups (the pairs are not printed): the SE of that
    combination from the printed SEs, at its Welch-Satterthwaite degrees of freedom, and
    :data:`MARGIN` (:func:`lib.report.t_verdict`); :data:`lib.report.NOT_TESTABLE` without the table."""
    if not paper or not {"vanilla", "mocae", "robust"} <= set(paper):
        return report.NOT_TESTABLE
    col = 2 * METRICS.index("ece")
    weights = {"mocae": 1.0, "vanilla": -(1.0 - SMALL_SHARE), "robust": -SMALL_SHARE}
    effect = sum(w * paper[m][col] for m, w in weights.items())
    terms = [(w * paper[m][col + 1]) ** 2 for m, w in weights.items()]  # each method's share of the variance
    if seeds < 2 or sum(terms) == 0:
        return report.t_verdict(effect, None, MARGIN)
    df = sum(terms) ** 2 / sum(v**2 / (seeds - 1) for v in terms)
    return report.t_verdict(effect, float(np.sqrt(sum(terms))), MARGIN, df=df)


def _paper_best(paper: Mapping[str, PaperRow] | None, methods: Sequence[str], metric: str) -> str:
    col = 2 * METRICS.index(metric)
    got = [m for m in methods if paper and m in paper]
    return min(got, key=lambda m: paper[m][col]) if got else ""  # type: ignore[index]


def moe_claims(
    frame: pd.DataFrame,
    records: Sequence[Mapping[str, Any]] = (),
    subset: str = "hard",
    subset_name: str = "hard",
    paper: Mapping[str, PaperRow] | None = None,
) -> pd.DataFrame:
    """The paper's claims (i)-(iv) (book/moe/overview) from the per-seed ``frame``
    (:func:`lib.moe.tables.results_frame`), plus MoCaE's accuracy equalling Vanilla's (on the
    ``records`` themselves). Each row's effect is signed so that positive supports the claim:

    (i) the best non-robust method's ``subset`` ECE minus the best robust method's (best by mean);
    (ii) half of Robust MoE's ECE gain over Vanilla minus MoCaE's (:func:`small_gain_effect`): the
         paper's "small relative to the improvement from the robust methods", not (i) again where
         MoCaE is the best non-robust method;
    (iii) Robust Filtered's accuracy on all points minus Robust MoE's;
    (iv) (i) on ECE+TS, the paper's partial temperature fit (its public code's); the same difference
         with a converged fit is shown beside it, not judged.

    ``paper`` (method -> :data:`PaperRow` on ``subset``: PACS's Table 2) gives each row ``paper_own``,
    the same rule on the paper's numbers; without it the paper's own verdict is "not testable"."""
    summary = summarize(frame)
    L = METHOD_LABELS

    def robust_row(metric: str, claim: str, says: str) -> dict[str, str]:
        rb, nb = best(summary, ROBUST, subset, metric), best(summary, NON_ROBUST, subset, metric)
        d = paired(frame, nb, rb, subset, metric)
        name = "ECE" if metric == "ece" else "ECE+TS (the public code's partial TS fit)"
        ours = f"{subset_name} {name}: best non-robust {L.get(nb, '—')} minus best robust {L.get(rb, '—')}"
        ours += f" = {diff_text(d)}"
        if metric == "ece_ts" and "ece_ts_converged" in frame:  # shown beside, not judged
            ours += f"; with a converged TS fit {diff_text(paired(frame, nb, rb, subset, 'ece_ts_converged'))}"
        own = paper_verdict(paper, _paper_best(paper, NON_ROBUST, metric), _paper_best(paper, ROBUST, metric), metric)
        return report.claim_row(claim, says, ours, verdict_of(d), own)

    gain_mocae = paired(frame, "vanilla", "mocae", subset, "ece")
    gain_robust = paired(frame, "vanilla", "robust", subset, "ece")
    d2 = small_gain_effect(frame, subset)
    d3 = paired(frame, "robust_filtered", "robust", "all", "accuracy")
    rows = [
        robust_row("ece", CLAIMS[0].format(subset=subset_name), PAPER_SAYS[0]),
        report.claim_row(
            CLAIMS[1],
            PAPER_SAYS[1],
            f"{subset_name} ECE gain over Vanilla: MoCaE {diff_text(gain_mocae)}, Robust MoE "
            f"{diff_text(gain_robust)}; {SMALL_SHARE:g} x Robust MoE's minus MoCaE's {diff_text(d2)}",
            verdict_of(d2),
            paper_small_gain_verdict(paper),
        ),
        report.claim_row(
            CLAIMS[2],
            PAPER_SAYS[2],
            f"accuracy, Robust Filtered minus Robust MoE: {diff_text(d3)}",
            verdict_of(d3),
            paper_verdict(paper, "robust_filtered", "robust", "accuracy"),
        ),
        robust_row("ece_ts", CLAIMS[3], PAPER_SAYS[3]),
    ]
    eq = mocae_accuracy_check(records)
    if eq is not None:
        own = report.NOT_TESTABLE
        if paper and {"mocae", "vanilla"} <= set(paper):
            own = report.verdict(abs(paper["mocae"][0] - paper["vanilla"][0]) < MOCAE_ACC_TOL)
        rows.append(
            report.claim_row(
                "MoCaE's accuracy equals Vanilla MoE's",
                "identical in every cell of every table (printed to 3 decimals)",
                f"largest |difference| over runs and subsets: {eq:.4f}",
                report.verdict(eq < MOCAE_ACC_TOL),
                own,
            )
        )
    return report.claims_table(rows)


def gate(
    rows: Sequence[Mapping[str, Any]],
    frame: pd.DataFrame | float,
    paper_accuracy: float,
    test_labels: Any,
    reference: str = "paper",
) -> tuple[pd.DataFrame, str, bool]:
    """A page's claim ``rows`` gated by the book's accuracy floor (:func:`lib.report.gate_claims`) on the
    best mean accuracy of ``frame`` (:func:`best_accuracy`), or on that accuracy itself (none finite:
    not learned), against ``paper_accuracy`` above chance, the majority-class rate of ``test_labels``;
    every paper-1 claim depends on the trained model (``reference`` names ``paper_accuracy``). Returns
    the claims table, the floor rule (:func:`lib.report.floor_rule`) followed by the gate's sentence,
    and whether the floor was met."""
    accuracy = best_accuracy(summarize(frame)) if isinstance(frame, pd.DataFrame) else float(frame)
    accuracy = accuracy if accuracy == accuracy else 0.0
    chance = report.chance_accuracy(test_labels)
    return report.gate_claims(rows, accuracy, paper_accuracy, chance, reference=reference)


def mocae_accuracy_check(records: Sequence[Mapping[str, Any]]) -> float | None:
    """Largest |accuracy(MoCaE) - accuracy(Vanilla)| over MoCaE records (lib.moe.train stores the
    Vanilla accuracy of the same trained model in each MoCaE record); None without MoCaE runs."""
    diffs = []
    for r in records:
        if run_fields(r)["method"] != "mocae":
            continue
        van = r["metrics"].get("vanilla_accuracy") or {}
        for s in SUBSETS:
            if r["metrics"].get(s) and van.get(s) is not None:
                diffs.append(abs(r["metrics"][s]["accuracy"] - van[s]))
    return max(diffs) if diffs else None


def results_values(
    summary: pd.DataFrame, records: Sequence[Mapping[str, Any]], subset: str | None = None
) -> dict[str, Any]:
    """The numbers the paper-1 pages publish for their tests and readers: ``methods`` (those run),
    ``table`` (each method's mean metrics, keyed ``"method/subset"``; with ``subset``, only that
    subset, keyed by method) and ``mocae_accuracy_diff`` (:func:`mocae_accuracy_check`)."""
    rows = summary if subset is None else summary[summary["subset"] == subset]
    return {
        "methods": sorted(set(summary["method"])),
        "table": {
            (r.method if subset is not None else f"{r.method}/{r.subset}"): {m: float(getattr(r, m)) for m in METRICS}
            for r in rows.itertuples()
        },
        "mocae_accuracy_diff": mocae_accuracy_check(records),
    }


def not_run_claims() -> pd.DataFrame:
    """The claims table of a page whose data is missing: every claim marked "not run: data
    unavailable", with what the paper reports for it (``PAPER_SAYS``) all the same."""
    names = [c.format(subset="hard") for c in CLAIMS]
    return report.claims_table(
        [report.claim_row(n, p, "—", report.VERDICTS[3], paper_own="") for n, p in zip(names, PAPER_SAYS)]
    )
