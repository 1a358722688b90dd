"""The claims ledger ("What held"): every claim of the four papers on one page, built from the claims
each page published when it ran (never typed in).

Per row (the ``claims`` table each page publishes, read from the executed copies of a build): whose it
is (its ``kind``, :data:`lib.report.KINDS`: the paper's claim, the book's own expectation, a numerical
check or a timing), the paper's own table under the same rule (``paper_own``), ours at this build's
scale, ours at paper scale (with how much of the plan ``results/`` covers) and why they differ
(:func:`why`, computed from those verdicts, the seeds and the page's declared differences, or empty).
:func:`ledger_markdown` lays it out per paper: the counts first (the papers' claims apart from the
rest; rows of pages not executed and claims not run counted in no denominator), then one line per
row with the three verdicts as marks (:data:`MARKS`) and the paper's sentence, our numbers and the
reasons one click away. :func:`calibook.book.stage` writes it into the book; it states the rule behind
every verdict (:data:`lib.report.RULE`).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from lib import config
from lib.report import KINDS, NOT_TESTABLE, RULE, VERDICTS

__all__ = [
    "GROUPS",
    "LEDGER_TABLE",
    "MARKS",
    "NOT_EXECUTED",
    "ON_CPU",
    "counts",
    "ledger_markdown",
    "ledger_rows",
    "why",
]

LEDGER_TABLE = Path("book") / "_ledger_table.md"
"""The generated table, included by ``book/ledger.md``."""

HELD, NOT_HELD, INCONCLUSIVE, NOT_RUN = VERDICTS
CLAIM, CHECK, EXPECTATION, TIMING = KINDS
ON_CPU = "on a CPU"
"""The coverage of a page whose paper scale needs no GPU (``Page.paper_on_cpu``)."""
NOT_EXECUTED = "(page not executed in this build)"
"""The claim cell of the one row a page not executed in this build gets (counted nowhere)."""
_NO_TABLE = "(the page publishes no claims table)"
_BELOW_FLOOR = "accuracy below the floor"
_PAPER_INCONCLUSIVE = INCONCLUSIVE.replace("this scale", "paper scale")
_JUDGED = (HELD, NOT_HELD, INCONCLUSIVE)

MARKS: dict[str, tuple[str, str]] = {
    HELD: ("✔", "held"),
    NOT_HELD: ("✘", "failed"),
    INCONCLUSIVE: ("?", "unsure"),
    NOT_TESTABLE: ("n/t", "none"),
    NOT_RUN: ("∅", "none"),
    "": ("—", "none"),
}
"""Each verdict's mark in the ledger and its CSS class; "" is no verdict (none applies, or no build)."""

LEGEND = (
    "✔ held · ✘ did not hold · ? inconclusive (the data cannot tell) · n/t not testable from the "
    "paper's table (it prints no errors or seeds) · ∅ not run: data unavailable · — no verdict (no "
    "paper-scale build yet, or none applies)"
)

GROUPS: dict[str, str] = {
    "moe": "Paper 1: calibrated mixture-of-experts under distribution shift",
    "l2d": "Paper 2: calibration of multi-expert learning to defer",
    "ccc": "Paper 3: calibration, cascading and cleaning",
    "rr": "Paper 4: reweighted risk for calibration",
    "cross_paper": "Across the papers: the book's own expectations",
    "book": "What things cost: the book's timings",
}
"""The ledger's sections, by ``Page.paper``, in the book's order (the titles of ``book/<paper>/overview.md``)."""

KIND_TITLES: dict[str, str] = {
    CLAIM: "the paper's claims",
    EXPECTATION: "the book's own expectations",
    CHECK: "numerical checks (hold by theorem or construction)",
    TIMING: "timings (one measurement each, on the machine that built the book)",
}
"""How each kind of row is named in the ledger's counts, in the order they are listed."""


def why(
    paper_own: str,
    ours: str,
    ours_text: str = "",
    differs: str | None = None,
    *,
    paper_scale: str = "",
    seeds: int | None = None,
    paper_own_at_paper: str | None = None,
) -> str:
    """Why the verdicts of one row differ, computed from what is known, or "" when nothing is: the
    paper's own verdict (``paper_own``: a verdict, :data:`lib.report.NOT_TESTABLE` or ""), ours at
    this build's scale (``ours``, with the text of its ``ours`` cell), ours at paper scale
    (``paper_scale``, "" without a paper-scale build), the seeds behind ours (``seeds``, None where
    the page has none) and the page's own account of how its setting differs from the paper's
    (``differs``, ``Page.differs``). ``paper_own_at_paper``: the paper's own verdict on the row of its
    tables the paper-scale column is set beside, where that is another row than this scale's (paper
    4 quotes ResNet-50 at cpu scale and WRN-28-10 at paper scale; "" where that row has no verdict of
    the paper's); ``None``: the same row. Never typed per claim; the scale is named as the cause only where
    the paper-scale verdict agrees with the paper's, and noise only where the seeds say so."""
    if ours == NOT_RUN:
        return "the data this page needs was not available in this build"
    if _BELOW_FLOOR in ours_text:
        return "our model is below the book's accuracy floor at this scale, so the claim is not judged"
    own = paper_own if paper_own in _JUDGED else ""
    at_paper = paper_scale if paper_scale in _JUDGED else ""
    if paper_own_at_paper is not None and paper_own_at_paper != paper_own and at_paper:
        # the paper-scale column answers to another row of the paper's: judge the two scales apart
        other = paper_own_at_paper if paper_own_at_paper in _JUDGED else ""
        here = why(paper_own, ours, ours_text, differs, seeds=seeds)
        there = "agree" if other and at_paper == other else f"ours {at_paper}, the paper's {other or 'none'}"
        return f"{here or 'nothing to explain'} at this scale; at paper scale, against the paper's other row: {there}"
    decisive = (HELD, NOT_HELD)
    one_seed = " (one seed at this scale: only the claim's margin decides)" if seeds == 1 else ""
    setting = f"; the page's setting differs from the paper's: {differs}" if differs else ""
    if own in decisive:
        if ours == own:
            if at_paper in ("", own):
                return "agree"
            return f"ours agree at this scale; at paper scale ours: {at_paper}"
        if ours == INCONCLUSIVE:
            head = "the paper's numbers decide; ours at this scale do not" + one_seed
            if at_paper == own:
                return head + "; at paper scale ours agree"
            if at_paper in decisive:
                return head + "; at paper scale ours are opposite" + setting
            return head + ("; nor at paper scale" if at_paper else "")
        # opposite verdicts at this scale
        if at_paper == own:
            return "opposite at this scale, agree at paper scale: the scale explains it"
        if at_paper == ours:
            return "opposite at both our scales, so not our scale" + setting
        if at_paper == INCONCLUSIVE:
            return "opposite at this scale; paper scale cannot tell" + setting
        return "opposite verdicts; no paper-scale verdict yet to tell whether the scale explains it" + setting
    if own == INCONCLUSIVE:
        if ours in decisive:
            return "the paper's own numbers do not decide under the rule; ours do"
        return "neither the paper's numbers nor ours decide" + one_seed
    # no verdict of the paper's to set ours against: only our two scales
    if ours in decisive and at_paper in decisive and ours != at_paper:
        return "our two scales disagree" + setting
    if ours == INCONCLUSIVE and at_paper in decisive:
        return "paper scale decides; this scale does not" + one_seed
    return ""


def ledger_rows(
    names: Sequence[str],
    published: Callable[[str], Mapping[str, Any] | None],
    paper_published: Callable[[str], Mapping[str, Any] | None] = lambda name: None,
    coverage: Callable[[str], str] = lambda name: "",
    differs: Callable[[str], str | None] = lambda name: None,
    seeds: Callable[[str], int | None] = lambda name: None,
    group: Callable[[str], str] = lambda name: "",
) -> list[dict[str, str]]:
    """One row per published claims row of the pages ``names`` (in order): ``group`` (the page's
    paper, ``group(name)``), ``page``, ``kind``, ``claim``, ``paper`` (what the paper says, or whose
    the row is), ``paper_own``, ``ours`` (the verdict), ``ours_text`` (the numbers), ``paper_scale``
    (the cell), ``paper_verdict`` (the paper-scale build's verdict, "" without one), ``why``.
    ``published(name)`` gives a page's published values at this build's scale (``None``: not
    executed: one row with claim :data:`NOT_EXECUTED` and no verdict), ``paper_published(name)``
    those of a paper-scale build, ``coverage(name)`` the GPU runs in ``results/`` (:data:`ON_CPU`
    for pages whose paper scale runs on a CPU, "" for the others), ``differs(name)`` the page's
    account of how its setting differs from the paper's and ``seeds(name)`` its seeds at this
    build's scale (both for :func:`why`)."""
    rows: list[dict[str, str]] = []
    for name in names:
        got = published(name)
        claims = None if got is None else got.get("claims")
        if not isinstance(claims, list):
            keys = ("paper", "paper_own", "ours", "ours_text", "paper_scale", "paper_verdict", "why")
            blank = dict.fromkeys(keys, "")
            missing = NOT_EXECUTED if got is None else _NO_TABLE
            rows.append({"group": group(name), "page": name, "kind": CLAIM, "claim": missing, **blank})
            continue
        at_paper = {str(r.get("claim")): r for r in ((paper_published(name) or {}).get("claims") or [])}
        cov = coverage(name)
        for r in claims:
            if not isinstance(r, Mapping) or "claim" not in r or "verdict" not in r:
                raise ValueError(f"published: page {name!r} has a claims row without claim/verdict: {r!r}")
            text = str(r["claim"])
            paper_row = at_paper.get(text)
            paper_verdict = "" if paper_row is None else str(paper_row["verdict"])
            own_at_paper = None if paper_row is None else str(paper_row.get("paper_own") or "")
            if paper_row is not None:
                verdict = paper_verdict.replace(INCONCLUSIVE, _PAPER_INCONCLUSIVE)
                scale_cell = f"{verdict} ({cov})" if cov else verdict
            elif cov == ON_CPU:
                scale_cell = "not in this build (a cpu-scale build runs it: no GPU needed)"
            else:
                scale_cell = f"no paper-scale build yet ({cov} published)" if cov else "no paper scale"
            own = str(r.get("paper_own") or "")
            ours, ours_text = str(r["verdict"]), str(r.get("ours", ""))
            rows.append(
                {
                    "group": group(name),
                    "page": name,
                    "kind": str(r.get("kind") or CLAIM),
                    "claim": text,
                    "paper": str(r.get("paper") or ""),
                    "paper_own": own,
                    "ours": ours,
                    "ours_text": ours_text,
                    "paper_scale": scale_cell,
                    "paper_verdict": paper_verdict,
                    "why": why(
                        own,
                        ours,
                        ours_text,
                        differs(name),
                        paper_scale=paper_verdict,
                        seeds=seeds(name),
                        paper_own_at_paper=own_at_paper,
                    ),
                }
            )
    return rows


def counts(rows: Sequence[Mapping[str, str]], kind: str) -> dict[str, int]:
    """The counts of ``kind``'s rows: ``judged`` (a verdict at this scale: held, did not hold or
    inconclusive; the denominator of "N of M held"), each verdict, ``not_run`` (data unavailable:
    in no denominator), and at paper scale ``paper_judged`` and ``paper_held``. Rows of pages not
    executed have no verdict and are counted nowhere."""
    chosen = [r for r in rows if r["kind"] == kind and r["ours"]]
    ours = [r["ours"] for r in chosen]
    at_paper = [r["paper_verdict"] for r in chosen if r["paper_verdict"] in _JUDGED]
    return {
        "judged": sum(v in _JUDGED for v in ours),
        "held": ours.count(HELD),
        "not_held": ours.count(NOT_HELD),
        "inconclusive": ours.count(INCONCLUSIVE),
        "not_run": ours.count(NOT_RUN),
        "paper_judged": len(at_paper),
        "paper_held": at_paper.count(HELD),
    }


def _count_line(rows: Sequence[Mapping[str, str]], kind: str) -> str:
    """One sentence of :func:`counts` for ``kind`` ("" when the section has no such row)."""
    c = counts(rows, kind)
    if not c["judged"] and not c["not_run"]:
        return ""
    line = f"**{KIND_TITLES[kind][0].upper() + KIND_TITLES[kind][1:]}: {c['held']} of {c['judged']} held**"
    if c["judged"]:
        line += f" at this scale ({c['not_held']} did not hold, {c['inconclusive']} inconclusive)"
    if c["not_run"]:
        line += f"; {c['not_run']} not run (data unavailable), counted in no total"
    if c["paper_judged"]:
        line += f"; at paper scale {c['paper_held']} of the {c['paper_judged']} with a paper-scale verdict held"
    return line + "."


def _mark(verdict: str, title: str = "") -> str:
    symbol, css = MARKS.get(verdict, MARKS[""])
    return f'<td class="mark {css}" title="{html.escape(title or verdict or "no verdict")}">{symbol}</td>'


KIND_NAMES: dict[str, str] = {EXPECTATION: "the book's own expectation", CHECK: "a numerical check", TIMING: "a timing"}
"""What a ledger line's source says a row is, when the row is not one of the papers' claims."""


def _row_html(r: Mapping[str, str], scale: str) -> str:
    """One ledger line: the three marks, and the claim with its details one click away."""
    e = partial(html.escape, quote=False)
    link = f'<a href="../notebooks/{e(r["page"])}.html">{e(r["page"])}</a>'
    source, whose = r["paper"] or "—", KIND_NAMES.get(r["kind"])
    if whose and whose not in source.lower() and not source.startswith("the book's"):
        source = f"{whose}: {source}"
    details = [
        ("the paper" if r["kind"] == CLAIM else "source", source),
        ("the paper's own table, same rule", r["paper_own"] or "—"),
        (f"ours, {scale}", f"{r['ours']}: {r['ours_text']}" if r["ours_text"] else r["ours"]),
        ("ours, paper scale", r["paper_scale"]),
    ]
    if r["why"]:
        details.append(("why they differ", r["why"]))
    body = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in details)
    own_title = r["paper_own"] or "no verdict of the paper's for this row"
    paper_mark = r["paper_verdict"] or ""
    return (
        "<tr>"
        + _mark(r["paper_own"], own_title)
        + _mark(r["ours"])
        + _mark(paper_mark, r["paper_scale"])
        + f'<td><details><summary>{e(r["claim"])} <span class="page">({link})</span></summary>'
        + f"<dl>{body}</dl></details></td></tr>"
    )


_STYLE = """<style>
table.ledger { width: 100%; table-layout: fixed; border-collapse: collapse; margin: 0.5em 0 1.5em 0; }
table.ledger col.mark { width: 4.5em; }
table.ledger th, table.ledger td { padding: 0.2em 0.35em; vertical-align: top; overflow-wrap: anywhere;
  border-bottom: 1px solid rgba(128, 128, 128, 0.25); }
table.ledger th { font-size: 0.8em; font-weight: 600; text-align: center; }
table.ledger th.claim, table.ledger th.kind { text-align: left; }
table.ledger td.mark { text-align: center; font-weight: bold; white-space: nowrap; }
table.ledger .held { color: #1a7f37; } table.ledger .failed { color: #cf222e; }
table.ledger .unsure { color: #9a6700; } table.ledger .none { color: #6e7781; font-weight: normal; }
table.ledger summary { cursor: pointer; } table.ledger span.page { font-size: 0.85em; }
table.ledger dl { font-size: 0.9em; margin: 0.3em 0 0.5em 0; }
table.ledger dt { font-weight: 600; } table.ledger dd { margin: 0 0 0.25em 1em; }
</style>"""


def _table(rows: Sequence[Mapping[str, str]], scale: str) -> list[str]:
    """The raw-HTML table of one section: its rows by kind (the papers' claims first)."""
    out = [
        '<table class="ledger">',
        '<colgroup><col class="mark"><col class="mark"><col class="mark"><col></colgroup>',
        "<thead><tr><th>paper's own</th><th>ours, "
        + html.escape(scale)
        + '</th><th>ours, paper scale</th><th class="claim">claim (click for the paper\'s sentence, our numbers '
        "and why they differ)</th></tr></thead><tbody>",
    ]
    for kind in KIND_TITLES:
        chosen = [r for r in rows if r["kind"] == kind and r["ours"]]
        if not chosen:
            continue
        if kind != CLAIM or len({r["kind"] for r in rows if r["ours"]}) > 1:
            out.append(f'<tr><th class="kind" colspan="4">{html.escape(KIND_TITLES[kind].capitalize())}</th></tr>')
        out += [_row_html(r, scale) for r in chosen]
    out.append("</tbody></table>")
    return out


def ledger_markdown(scale: str, names: Sequence[str], build_root: Path) -> str:
    """The ledger of a build at ``scale`` as MyST Markdown: a summary table of the counts, then per
    paper (:data:`GROUPS`) its counts and one line per row (a raw-HTML table, its details in
    ``<details>`` elements), read from the executed notebooks under ``build_root/<scale>/notebooks``
    (and ``build_root/paper``)."""
    from calibook.page import read_published

    from calibook.pages import get, page_of

    def read(at: str, name: str) -> Mapping[str, Any] | None:
        path = build_root / at / "notebooks" / f"{name}.ipynb"
        return read_published(path) if path.exists() else None

    rows = ledger_rows(
        names,
        partial(read, scale),
        partial(read, "paper"),
        _coverage,
        lambda n: get(page_of(n)).differs,
        partial(_seeds, scale=scale),
        lambda n: get(page_of(n)).paper,
    )
    out = [f"Verdicts of this build (scale **`{scale}`**), read from what each page published when it ran.", ""]
    groups = [g for g in GROUPS if any(r["group"] == g for r in rows)]
    groups += sorted({r["group"] for r in rows} - set(groups))
    summary = ["| | " + " | ".join(KIND_TITLES[k].split(" (")[0] for k in KIND_TITLES) + " |", "|---" * 5 + "|"]
    for g in groups:
        cells = []
        for kind in KIND_TITLES:
            c = counts([r for r in rows if r["group"] == g], kind)
            cells.append(f"{c['held']} of {c['judged']} held" if c["judged"] else "—")
        summary.append(f"| {GROUPS.get(g, g).split(':')[0]} | " + " | ".join(cells) + " |")
    out += summary + [
        "",
        "Each count is over the rows with a verdict at this scale (held, did not hold or inconclusive): "
        "claims not run for want of data, and pages this build did not execute, are in no total.",
        "",
        f"**Marks**, in the three columns (the paper's own table under the same rule; ours at `{scale}`; ours "
        f"at paper scale): {LEGEND}. Hover a mark for its verdict in words; click a claim for the paper's "
        "sentence, our numbers and why the verdicts differ.",
        "",
        f"The rule behind every verdict, the paper's own included: {RULE}",
        "",
        "```{raw} html",
        _STYLE,
        "```",
        "",
    ]
    for g in groups:
        mine = [r for r in rows if r["group"] == g]
        out += [f"## {GROUPS.get(g, g)}", ""]
        lines = [line for kind in KIND_TITLES if (line := _count_line(mine, kind))]
        out += [" ".join(lines), ""] if lines else []
        absent = sorted({r["page"] for r in mine if r["claim"] == NOT_EXECUTED})
        if absent:
            out += [f"Not executed in this build (counted nowhere): {', '.join(absent)}.", ""]
        if any(r["ours"] for r in mine):
            out += ["```{raw} html", *_table(mine, scale), "```", ""]
    return "\n".join(out) + "\n"


def _seeds(name: str, scale: str) -> int | None:
    """The seeds of page ``name`` (or its copy, :func:`calibook.pages.copies`) at ``scale`` (a list or
    a count in ``lib/scales.toml``), None where it has none."""
    from calibook.pages import page_of

    try:
        got = config.settings(page_of(name), scale).get("seeds")
    except (ValueError, KeyError):
        return None
    if isinstance(got, bool) or got is None:
        return None
    return len(got) if isinstance(got, list | tuple) else int(got)


def _coverage(name: str) -> str:
    """ "k of n runs" of the page's paper-scale plan published in ``results/``, :data:`ON_CPU` for a
    page whose paper scale needs no GPU, "" for the others. A page with targets (PACS's held-out
    domains) counts the runs of the target its copy shows (:func:`calibook.pages.copies`), named."""
    from calibook.pages import copies, get, page_of

    page = get(page_of(name))
    if page.paper_on_cpu:
        return ON_CPU
    if page.rank is None:  # no paper scale of its own (the performance page times this machine)
        return ""
    from calibook.notebooks import parameter_default
    from calibook.paper_scale import coverage

    target = None
    if page.targets != (None,):
        target = dict(copies(page.name))[name].get("target") or parameter_default(page.name, "target")
    frame = coverage(page.name, target)
    return f"{int(frame['published'].sum())} of {int(frame['planned'].sum())} runs" + (f" ({target})" if target else "")
