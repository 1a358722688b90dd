"""How the book judges a claim: the verdicts, the small-sample rule, the claims table and the accuracy
floor, and :func:`show` for a page's tables. Publishing what a page shows is the machinery's
(:mod:`calibook.page`)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lib.validation import check_int, check_number


VERDICTS: tuple[str, ...] = ("held", "did not hold", "inconclusive at this scale", "not run: data unavailable")

NOT_TESTABLE = "not testable from the paper's table"
"""The ``paper_own`` verdict of a claim whose paper reports no seeds or errors to judge it by."""

KINDS: tuple[str, ...] = ("claim", "numerical check", "expectation", "timing")
"""Whose a row of a claims table is: "claim", one of the paper's empirical claims (its ``paper`` cell
quotes or cites it); "numerical check", one that holds by theorem or construction; "expectation", the
book's own, in no paper's words; "timing", a cost measured once on the machine that built the book.
Only "claim" rows count with the papers' claims; the ledger (:mod:`calibook.ledger`) counts the others
apart."""


def verdict(held: bool | None) -> str:
    """The verdict for a claim whose test came out ``held`` (``None``: the data cannot tell)."""
    return VERDICTS[2] if held is None else VERDICTS[0] if held else VERDICTS[1]


RULE: str = (
    'A claim\'s effect counts for it ("held") or against it ("did not hold") only beyond max(t x SE, margin): '
    "t is the two-sided 95% Student-t critical value at the claim's degrees of freedom (n - 1 for n paired "
    "seeds, Welch's for two independent groups, infinite for a closed-form or binomial SE on many examples) "
    "and the margin is the smallest effect the claim is about. With one seed (no SE) the margin alone "
    "decides (`lib.report.t_verdict`)."
)
"""The book's verdict rule in two sentences, as the claims ledger states it."""


def _real(value: Any, name: str) -> float:
    """``value`` as a float, or a ValueError naming ``name`` unless it is a real number (not a bool)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: must be a number, got {value!r}")
    return float(value)


def critical_value(df: float) -> float:
    """The two-sided 95% Student-t critical value t_{0.975, df} (``df`` > 0; ``math.inf`` gives the
    normal's 1.96): 12.706 at df 1, 4.303 at df 2, 2.776 at df 4."""
    df = _real(df, "df")
    if not df > 0:  # NaN fails too
        raise ValueError(f"df: must be > 0 (or math.inf), got {df!r}")
    from scipy.special import stdtrit  # scipy.stats.t.ppf's kernel, without importing scipy.stats

    return float(stdtrit(df, 0.975))


def t_verdict(diff: float, se: float | None = None, margin: float = 0.0, *, df: float | None = None) -> str:
    """The book's one symmetric rule for "``diff`` > 0" (the claim's effect, signed so that positive
    supports it): "held" when ``diff`` exceeds the noise, "did not hold" when ``-diff`` does, else
    "inconclusive at this scale". The noise is ``max(critical_value(df) * se, margin)``: the two-sided
    95% Student-t critical value at ``df`` degrees of freedom times the standard error of the
    difference (``se``), and at least ``margin``, the smallest effect the claim is about. ``df`` is
    required with a finite ``se`` and says how it was formed: n - 1 for the SE of n paired per-seed
    differences (:func:`paired_verdict`), Welch's for two independent groups (:func:`welch_df`,
    :func:`welch_verdict`), ``math.inf`` for a closed-form or binomial SE on many examples. With one
    seed (``se`` None or NaN, or ``df`` < 1) only ``margin`` decides. The same evidence that counts
    for a claim counts against it.
    """
    diff, margin = _real(diff, "diff"), _real(margin, "margin")
    if not math.isfinite(margin) or margin < 0:
        raise ValueError(f"margin: must be a finite number >= 0, got {margin!r}")
    if se is not None and (isinstance(se, bool | np.bool_) or not isinstance(se, numbers.Real) or se < 0):
        raise ValueError(f"se: must be a number >= 0 (or None), got {se!r}")
    has_se = se is not None and math.isfinite(se)
    if df is None:
        if has_se:
            raise ValueError("df: required with a finite se (n - 1 for paired seeds, welch_df, or math.inf)")
    elif not _real(df, "df") >= 0:  # NaN fails too
        raise ValueError(f"df: must be >= 0 (or math.inf), got {df!r}")
    if not math.isfinite(diff):
        return VERDICTS[2]
    noise = max(critical_value(df) * float(se), margin) if has_se and df >= 1 else margin  # type: ignore[arg-type,operator]
    return verdict(diff > 0 if abs(diff) > noise else None)  # beyond the noise, the sign decides


def standard_error(values: Any) -> float | None:
    """The standard error of the mean of the array ``values``: std (ddof 1) / sqrt(n); ``None`` with
    fewer than two values (one seed gives none)."""
    arr = np.asarray(values)
    return float(arr.std(ddof=1) / np.sqrt(arr.size)) if arr.size >= 2 else None


def every(verdicts: Iterable[str]) -> str:
    """A claim "for every X" from each X's verdict: "did not hold" if any part did not hold, "held"
    if every part held, else "inconclusive at this scale" (symmetric: one clear failure is as
    decisive against the claim as all clear successes are for it)."""
    got = list(verdicts)
    if not got:
        raise ValueError("verdicts: need at least one")
    return VERDICTS[1] if VERDICTS[1] in got else VERDICTS[0] if set(got) == {VERDICTS[0]} else VERDICTS[2]


def paired_verdict(diffs: Sequence[float], margin: float = 0.0) -> str:
    """:func:`t_verdict` of per-seed differences ``diffs`` (paired: the same seeds on both sides):
    their mean against the Student-t critical value at n - 1 degrees of freedom times the standard
    error of the mean, and at least ``margin`` (with a single seed, the margin alone)."""
    arr = np.asarray(list(diffs), dtype=float)
    if arr.size == 0:
        raise ValueError("diffs: must not be empty")
    return t_verdict(float(arr.mean()), standard_error(arr), margin, df=arr.size - 1)


def welch_df(se_a: float, n_a: int, se_b: float, n_b: int) -> float:
    """The Welch-Satterthwaite degrees of freedom of the difference of two independent means with
    standard errors ``se_a``, ``se_b`` over ``n_a``, ``n_b`` >= 2 values: (se_a^2 + se_b^2)^2 /
    (se_a^4 / (n_a - 1) + se_b^4 / (n_b - 1)), between min(n_a, n_b) - 1 and n_a + n_b - 2 (equal
    SEs and sizes reach the latter); n_a + n_b - 2 when both SEs are 0 (then any df gives no noise)."""
    for value, name in ((se_a, "se_a"), (se_b, "se_b")):
        if not _real(value, name) >= 0 or not math.isfinite(value):
            raise ValueError(f"{name}: must be a finite number >= 0, got {value!r}")
    n_a, n_b = check_int(n_a, "n_a", minimum=2), check_int(n_b, "n_b", minimum=2)
    va, vb = float(se_a) ** 2, float(se_b) ** 2
    if va + vb == 0:
        return float(n_a + n_b - 2)
    return (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))


def welch_means_verdict(
    mean_a: float, se_a: float | None, n_a: int, mean_b: float, se_b: float | None, n_b: int, margin: float = 0.0
) -> str:
    """:func:`t_verdict` of "``mean_a`` - ``mean_b`` > 0" for two independent groups given as means,
    standard errors and sizes (e.g. a paper's table of mean +- SE over its seeds): the SE of the
    difference sqrt(se_a^2 + se_b^2) at Welch's degrees of freedom (:func:`welch_df`). With one value
    on either side (``n`` 1, or its ``se`` None or NaN) only ``margin`` decides."""
    n_a, n_b = check_int(n_a, "n_a"), check_int(n_b, "n_b")
    diff = _real(mean_a, "mean_a") - _real(mean_b, "mean_b")
    ses = (se_a, se_b)
    for value, name in zip(ses, ("se_a", "se_b"), strict=True):
        if value is not None and not _real(value, name) >= 0 and not math.isnan(value):
            raise ValueError(f"{name}: must be a number >= 0 (or None), got {value!r}")
    if min(n_a, n_b) < 2 or any(v is None or not math.isfinite(v) for v in ses):
        return t_verdict(diff, None, margin)
    se = math.hypot(float(se_a), float(se_b))  # type: ignore[arg-type]
    return t_verdict(diff, se, margin, df=welch_df(se_a, n_a, se_b, n_b))  # type: ignore[arg-type]


def welch_verdict(a: Sequence[float], b: Sequence[float], margin: float = 0.0) -> str:
    """:func:`t_verdict` of "mean(``a``) - mean(``b``) > 0" for two independent samples (seeds not
    shared between the sides): the SE of the difference of the means at Welch's degrees of freedom
    (:func:`welch_means_verdict`); with one value on either side, the margin alone."""
    xa, xb = np.asarray(list(a), dtype=float), np.asarray(list(b), dtype=float)
    if xa.size == 0 or xb.size == 0:
        raise ValueError(f"{'a' if xa.size == 0 else 'b'}: must not be empty")
    return welch_means_verdict(
        float(xa.mean()), standard_error(xa), xa.size, float(xb.mean()), standard_error(xb), xb.size, margin
    )


def claim_row(
    claim: str, paper: str, ours: str, verdict: str, paper_own: str = NOT_TESTABLE, **extra: str
) -> dict[str, Any]:
    """One row of a claims table (:func:`claims_table`); the paper's own verdict (``paper_own``) is
    "not testable" unless given, and ``extra`` adds e.g. the row's ``kind``."""
    return {"claim": claim, "paper": paper, "ours": ours, "verdict": verdict, "paper_own": paper_own, **extra}


def claims_table(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """A page's claims table: one row per claim with ``claim``, ``paper`` (what the paper reports,
    quoted), ``ours`` (this run's numbers, as text) and ``verdict`` (one of ``VERDICTS``,
    computed by the caller from the numbers, never typed in); optionally ``paper_own`` (the same
    rule applied to the paper's own table: a verdict, or :data:`NOT_TESTABLE`) and ``kind`` (one of
    :data:`KINDS`, default "claim").
    """
    out = []
    for r in rows:
        for key in ("claim", "ours", "verdict"):
            if key not in r:
                raise ValueError(f"rows: every row needs {key!r}")
        if r["verdict"] not in VERDICTS:
            raise ValueError(f"rows: verdict {r['verdict']!r} is not one of {VERDICTS}")
        own = r.get("paper_own", "")
        if own and own not in (*VERDICTS[:3], NOT_TESTABLE):
            raise ValueError(f"rows: paper_own {own!r} is not a verdict nor {NOT_TESTABLE!r}")
        kind = r.get("kind", KINDS[0])
        if kind not in KINDS:
            raise ValueError(f"rows: kind {kind!r} is not one of {KINDS}")
        out.append({k: r.get(k, "") for k in ("claim", "paper", "ours", "verdict")} | {"paper_own": own, "kind": kind})
    table = pd.DataFrame(out, columns=["claim", "paper", "ours", "verdict", "paper_own", "kind"])
    optional = [c for c, default in (("paper_own", ""), ("kind", KINDS[0])) if (table[c] == default).all()]
    return table.drop(columns=optional)  # the optional columns show only where a row uses them


ACCURACY_FLOOR: float = 0.8
"""A claim about a trained model is judged only if the model recovered at least this fraction of
the paper's accuracy above chance: accuracy >= chance + ACCURACY_FLOOR * (paper_accuracy - chance),
chance being the accuracy of always predicting the most frequent test class (``chance_accuracy``).
For CIFAR-10 (chance 10%) at the paper's 94.5% that is 77.6%; for the PACS sketch target (chance
20.8%) at the paper's best 67.0%, 57.8%."""


def floor_rule(floor: float = ACCURACY_FLOOR) -> str:
    """The one sentence every page quotes for the rule of :func:`gate_claims` (threshold included)."""
    return (
        f"One rule for every page that can be undertrained (`lib.report.gate_claims`, "
        f"`ACCURACY_FLOOR` = {floor:g}): claims about a trained model are judged only if its accuracy "
        f"reaches chance + {floor:g} x (the paper's accuracy, or the page's stated reference, - chance), "
        "where chance is the accuracy of "
        "always predicting the most frequent test class (1/C on a balanced task, the majority rate on "
        'an imbalanced one); below that they are "inconclusive at this scale".'
    )


def chance_accuracy(labels: Any) -> float:
    """The accuracy of always predicting the most frequent class of ``labels`` (integer class ids):
    1/C on a balanced test set, the majority-class rate on an imbalanced one."""
    arr = np.asarray(labels.detach().cpu() if hasattr(labels, "detach") else labels).reshape(-1)
    if arr.size == 0:
        raise ValueError("labels: must not be empty")
    if not np.issubdtype(arr.dtype, np.integer) and not np.all(np.equal(np.mod(arr, 1), 0)):
        raise ValueError("labels: must be integer class ids")
    _, counts = np.unique(arr, return_counts=True)
    return float(counts.max() / arr.size)


def accuracy_floor(paper_accuracy: float, chance: float, floor: float = ACCURACY_FLOOR) -> float:
    """The accuracy below which a page calls its claims "inconclusive at this scale":
    chance + floor * (paper_accuracy - chance) (see ``ACCURACY_FLOOR``)."""
    for value, name in ((paper_accuracy, "paper_accuracy"), (chance, "chance"), (floor, "floor")):
        check_number(value, name, 0.0, 1.0)  # a fraction
    if paper_accuracy <= chance:
        raise ValueError(f"paper_accuracy: must exceed chance ({chance}), got {paper_accuracy}")
    return float(chance + floor * (paper_accuracy - chance))


def gate_claims(
    rows: Sequence[Mapping[str, Any]],
    accuracy: float,
    paper_accuracy: float,
    chance: float,
    exempt: Sequence[str] = (),
    reference: str = "paper",
) -> tuple[pd.DataFrame, str, bool]:
    """Apply the book's one rule for models that did not learn to a page's claim rows.

    If ``accuracy`` (this run's, as a fraction) is below ``accuracy_floor(paper_accuracy, chance)``,
    every row whose claim is not in ``exempt`` (claims that do not depend on the trained
    model, e.g. an analytic threshold) gets the verdict "inconclusive at this scale", and its
    ``ours`` keeps the number with the verdict it would have had. Returns the claims table of the
    new rows (:func:`claims_table`), the rule (:func:`floor_rule`) followed by one sentence saying
    which case applied, for the page to print, and whether the floor was met. ``reference`` names
    ``paper_accuracy`` in that sentence: "paper", or what it is where the paper's is not used.
    """
    bar = accuracy_floor(paper_accuracy, chance)
    accuracy = check_number(accuracy, "accuracy", 0.0, 1.0)  # a fraction
    unknown = set(exempt) - {r.get("claim") for r in rows}
    if unknown:
        raise ValueError(f"exempt: not claims of these rows: {sorted(unknown)}")
    learned, out = accuracy >= bar, [dict(r) for r in rows]
    for row in out:
        if not learned and row["claim"] not in exempt and row["verdict"] != VERDICTS[3]:
            row["ours"] = f"{row['ours']} [computed verdict '{row['verdict']}' not used: accuracy below the floor]"
            row["verdict"] = VERDICTS[2]
    detail = (
        f"accuracy {accuracy:.3f} against the floor {bar:.3f} = chance {chance:.3f} + "
        f"{ACCURACY_FLOOR:g} x ({reference} {paper_accuracy:.3f} - chance)"
    )
    case = (
        f"The model is judged: {detail}."
        if learned
        else f"The model did not learn enough at this scale to test the paper's claims ({detail}); "
        "claims that depend on it are inconclusive at this scale, whatever the numbers say."
    )
    return claims_table(out), floor_rule() + " " + case, learned


def show(obj: Any) -> Any:
    """Display ``obj`` as text on the page (a ``str`` as Markdown, a DataFrame with wrapped cells);
    returns ``None``, so a cell ending in ``show(x)`` prints nothing twice."""
    from IPython.display import Markdown, display

    if isinstance(obj, str):
        obj = Markdown(obj)
    elif isinstance(obj, pd.DataFrame) and len(obj) and obj.select_dtypes(include="object").shape[1]:
        styled = obj.style.set_properties(**{"white-space": "pre-wrap", "text-align": "left"})
        # a default index says nothing: leave it out
        obj = styled.hide(axis="index") if isinstance(obj.index, pd.RangeIndex) else styled
    display(obj)
