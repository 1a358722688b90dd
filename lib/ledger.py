"""The claims ledger ("What held"): every claim of the four papers on one page, built from the claims
each page published when it ran (never typed in).

Per claim (the ``claims`` table each page publishes, read from the executed copies of a build): the
paper's own table under the same rule (``paper_own``), ours at this build's scale, ours at paper scale
(with how much of the plan ``results/`` covers) and why they differ (:func:`why`). Numerical checks
are listed apart. :func:`lib.book.stage` writes :func:`ledger_markdown`'s output into the book; it
states the rule behind every verdict (:data:`lib.report.RULE`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from lib.report import NOT_TESTABLE, RULE, VERDICTS

__all__ = ["LEDGER_TABLE", "ON_CPU", "ledger_markdown", "ledger_rows", "why"]

LEDGER_TABLE = Path("book") / "_ledger_table.md"
"""The generated table, included by ``book/ledger.md``."""

HELD, NOT_HELD, INCONCLUSIVE, NOT_RUN = VERDICTS
ON_CPU = "on a CPU"
"""The coverage of a page whose paper scale needs no GPU (``Page.paper_on_cpu``)."""
_BELOW_FLOOR = "accuracy below the floor"
_PAPER_INCONCLUSIVE = INCONCLUSIVE.replace("this scale", "paper scale")


def why(paper_own: str, ours: str, ours_text: str, differs: str | None = None) -> str:
    """One line on why the paper's own verdict and ours differ (or that they agree), derived from
    the verdicts and what the page wrote in its ``ours`` cell; never typed per claim. Opposite
    verdicts are put down to the page's scale, or to ``differs``, the page's own account of how its
    setting differs from the paper's (``Page.differs``)."""
    if ours == NOT_RUN:
        return "the data this page needs was not available in this build"
    if _BELOW_FLOOR in ours_text:
        return "our model is below the book's accuracy floor at this scale, so the claim is not judged"
    if not paper_own:
        return "the page does not weigh the paper's own numbers for this claim"
    if paper_own == NOT_TESTABLE:
        if ours == INCONCLUSIVE:
            return "the paper reports no errors to judge by, and our runs are within noise"
        return "the paper reports no errors to judge by; ours is the only test"
    if paper_own == ours:
        return "agree"
    if ours == INCONCLUSIVE:
        return "our runs at this scale are within noise where the paper's numbers decide"
    if paper_own == INCONCLUSIVE:
        return "the paper's own numbers are within noise; ours decide at this scale"
    return "opposite verdicts: " + (differs or "our scale (data, network, epochs) differs from the paper's")


def ledger_rows(
    names: Sequence[str],
    published: Callable[[str], Mapping[str, Any] | None],
    paper_published: Callable[[str], Mapping[str, Any] | None] = lambda name: None,
    coverage: Callable[[str], str] = lambda name: "",
    differs: Callable[[str], str | None] = lambda name: None,
) -> list[dict[str, str]]:
    """One row per published claim of the pages ``names`` (in order): ``page``, ``kind``, ``claim``,
    ``paper_own``, ``ours``, ``paper_scale`` (the cell), ``paper_verdict`` (the paper-scale build's
    verdict, "" without one), ``why``. ``published(name)`` gives a page's published
    values at this build's scale (``None``: not executed), ``paper_published(name)`` those of a
    paper-scale build, ``coverage(name)`` the GPU runs in ``results/`` (:data:`ON_CPU` for pages
    whose paper scale runs on a CPU, "" for the others), ``differs(name)`` the page's account of how
    its setting differs from the paper's (:func:`why`)."""
    rows: list[dict[str, str]] = []
    for name in names:
        got = published(name)
        claims = None if got is None else got.get("claims")
        if not isinstance(claims, list):
            missing = "(page not executed in this build)" if got is None else "(the page publishes no claims table)"
            blank = dict.fromkeys(("paper_own", "ours", "paper_scale", "paper_verdict", "why"), "")
            rows.append({"page": name, "kind": "claim", "claim": missing, **blank})
            continue
        at_paper = {str(r.get("claim")): r for r in ((paper_published(name) or {}).get("claims") or [])}
        cov = coverage(name)
        for r in claims:
            if not isinstance(r, Mapping) or "claim" not in r or "verdict" not in r:
                raise ValueError(f"published: page {name!r} has a claims row without claim/verdict: {r!r}")
            text = str(r["claim"])
            paper_row = at_paper.get(text)
            if paper_row is not None:
                verdict = str(paper_row["verdict"]).replace(INCONCLUSIVE, _PAPER_INCONCLUSIVE)
                scale_cell = f"{verdict} ({cov})" if cov else verdict
            elif cov == ON_CPU:
                scale_cell = "not in this build (a cpu-scale build runs it: no GPU needed)"
            else:
                scale_cell = f"no paper-scale build yet ({cov} published)" if cov else "—"
            own = str(r.get("paper_own") or "")
            rows.append(
                {
                    "page": name,
                    "kind": str(r.get("kind") or "claim"),
                    "claim": text,
                    "paper_own": own or "—",
                    "ours": str(r["verdict"]),
                    "paper_scale": scale_cell,
                    "paper_verdict": "" if paper_row is None else str(paper_row["verdict"]),
                    "why": why(own, str(r["verdict"]), str(r.get("ours", "")), differs(name)),
                }
            )
    return rows


def ledger_markdown(scale: str, names: Sequence[str], build_root: Path) -> str:
    """The ledger of a build at ``scale`` as Markdown tables (claims, then numerical checks), read
    from the executed notebooks under ``build_root/<scale>/notebooks`` (and ``build_root/paper``)."""
    from lib.report import read_published

    from lib.pages import get

    def read(at: str, name: str) -> Mapping[str, Any] | None:
        path = build_root / at / "notebooks" / f"{name}.ipynb"
        return read_published(path) if path.exists() else None

    rows = ledger_rows(names, partial(read, scale), partial(read, "paper"), _coverage, lambda n: get(n).differs)
    out = [
        f"Verdicts of this build (scale **`{scale}`**), read from what each page published when it ran.",
        "",
        f"The rule behind every verdict, the paper's own included: {RULE}",
        "",
    ]
    for kind, title in (("claim", "Claims"), ("numerical check", "Numerical checks (hold by theorem or construction)")):
        chosen = [r for r in rows if r["kind"] == kind]
        if not chosen:
            continue
        out += [f"## {title}", ""]
        out += [
            "| page | claim | the paper's own table, same rule | ours, this scale | ours, paper scale | why they differ |",
            "|---|---|---|---|---|---|",
        ]
        for r in chosen:
            link = f"[{r['page']}](../notebooks/{r['page']}.ipynb)"
            cells = [r["claim"], r["paper_own"], r["ours"], r["paper_scale"], r["why"]]
            out.append(f"| {link} | " + " | ".join(c.replace("|", "/").replace("\n", " ") for c in cells) + " |")
        held = sum(r["ours"] == HELD for r in chosen)
        judged = [r["paper_verdict"] for r in chosen if r["paper_verdict"] in (HELD, NOT_HELD, INCONCLUSIVE)]
        at_paper = f" At paper scale, {judged.count(HELD)} of the {len(judged)} with a paper-scale verdict held."
        out += ["", f"{held} of {len(chosen)} held at this scale." + (at_paper if judged else ""), ""]
    return "\n".join(out) + "\n"


def _coverage(name: str) -> str:
    """ "k of n runs" of the page's paper-scale plan published in ``results/``, :data:`ON_CPU` for a
    page whose paper scale needs no GPU, "" for the others."""
    from lib.pages import get

    page = get(name)
    if page.paper_on_cpu:
        return ON_CPU
    if page.rank is None:  # no paper scale of its own (the performance page times this machine)
        return ""
    from lib.paper_scale import coverage

    frame = coverage(name)
    return f"{int(frame['published'].sum())} of {int(frame['planned'].sum())} runs"
