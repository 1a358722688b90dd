"""Paper-scale results on the pages: what the queue has published, how much of the plan it covers,
and whether a page reads results or trains.

The runs are read from ``results/<page>/`` through :mod:`calibook.results`. A page at ``scale="paper"``
reads them and trains nothing unless its ``train`` parameter says so (:func:`should_train`); a page
at a smaller scale shows the published table beside its own, with "k of n seeds" (:func:`coverage`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from lib.config import SCALES
from lib.engine.plan import coverage as count
from lib.engine.plan import coverage_text
from lib.report import show
from calibook.notebooks import CHOICES
from calibook.pages import get as get_page
from calibook.page import publish
from calibook.results import PAGES, plan
from lib.validation import check_choice

TRAIN_CHOICES: tuple[str, ...] = CHOICES["train"]  # the values of a page's ``train`` parameter

__all__ = [
    "TRAIN_CHOICES",
    "coverage",
    "coverage_cell",
    "none_yet",
    "paper_section",
    "records",
    "require",
    "require_complete",
    "should_train",
    "table",
]


def should_train(train: str, scale: str) -> bool:
    """A page's ``train`` parameter: ``"auto"`` trains below paper scale and only reads published
    results at paper scale (a GPU's work); ``"yes"`` trains what is missing; ``"no"`` never trains."""
    check_choice(train, TRAIN_CHOICES, "train")
    check_choice(scale, SCALES, "scale")
    return train == "yes" or (train == "auto" and scale != "paper")


def _plan(page: str, scale: str, target: str | None) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """The planned runs of ``page`` (and ``target``) at ``scale`` and the published records that
    are those runs (same plan id and config), by plan id."""
    check_choice(page, PAGES, "page")
    items = [it for it in plan([page], scale) if target is None or it.target == target]
    return items, {it.id: it.record for it in items if it.record is not None}


def records(page: str, target: str | None = None, scale: str = "paper") -> list[dict[str, Any]]:
    """The verified records the queue published for ``page`` (and PACS ``target``) at ``scale``,
    in plan order; records of older code versions are left out."""
    items, got = _plan(page, scale, target)
    return [got[it.id] for it in items if it.id in got]


def coverage(page: str, target: str | None = None, scale: str = "paper") -> pd.DataFrame:
    """One row per method of the plan: runs published of runs planned, as ``"k of n seeds"``
    (``"k of n runs"`` for pages whose runs are not seeds of one method: the page's ``unit``)."""
    counts = count(*_plan(page, scale, target))
    text = coverage_text(counts, get_page(page).unit)
    return pd.DataFrame(
        [{"method": m, "published": k, "planned": n, "coverage": text[m]} for m, (k, n) in counts.items()],
        columns=["method", "published", "planned", "coverage"],
    )


def coverage_cell(page: str, reading: bool, scale: str, target: str | None = None) -> pd.DataFrame | str:
    """A page's "how much of the plan" cell: when it reads published runs (``reading``), the
    :func:`coverage` table at its ``scale``, published as ``coverage`` (method -> "k of n");
    otherwise (it trained) a sentence, and ``coverage`` is published empty."""
    if not reading:
        publish("coverage", {})
        return "Every run above was trained (or loaded from the local cache) at this scale."
    cov = coverage(page, target, scale)
    publish("coverage", dict(zip(cov["method"], cov["coverage"])))
    return cov


def show_coverage(found: Sequence[Any], page: str, reading: bool, scale: str, target: str | None = None) -> None:
    """After a page's run: stop it when it found no record (:func:`require`), then show its
    :func:`coverage_cell` (published as ``coverage``)."""
    require(found, page)
    show(coverage_cell(page, reading, scale, target))


def show_paper_section(page: str, page_scale: str, target: str | None = None) -> None:
    """Show a page's :func:`paper_section` (published as ``paper_scale_runs``)."""
    show(paper_section(page, page_scale, target))


def _how(page: str) -> str:
    return (
        f"They are trained on a GPU by `python -m calibook paper {page}` and published a run at a time "
        "(see results/README.md); nothing on this page is extrapolated to paper scale."
    )


def none_yet(page: str) -> str:
    """What a page says when no paper-scale result of it is published yet."""
    return f"No paper-scale results for this page are in results/{page}/ yet. {_how(page)}"


def require(found: Sequence[Any], page: str) -> None:
    """Stop a page that read results (``train`` off) and found none: ``ValueError`` with
    :func:`none_yet`'s sentence and how to train the runs instead."""
    if not found:
        raise ValueError(f"train: {none_yet(page)} To train them here instead, pass -p train yes.")


def require_complete(page: str, scale: str = "paper") -> None:
    """Stop a page that reads results (``train`` off) unless every planned run of it is published
    (pages whose figures need the whole sweep): ``ValueError`` with the runs published per method."""
    cov = coverage(page, scale=scale)
    if (cov["published"] < cov["planned"]).any():
        have = "; ".join(f"{m}: {c}" for m, c in zip(cov["method"], cov["coverage"]))
        raise ValueError(
            f"train: this page needs every planned run and results/{page}/ holds {have}. "
            f"{_how(page)} To train the missing runs here, pass -p train yes."
        )


def table(page: str, target: str | None = None, scale: str = "paper") -> pd.DataFrame | str:
    """The page's paper-scale table (its :class:`~lib.page.Page`'s ``table``: paper 1's tables, the
    sensitivity sweeps, paper 2's sweeps or paper 4's loss table) from the runs the queue published
    for ``page`` (and ``target``) at ``scale``, with how many of the planned runs are in; or
    :func:`none_yet`'s sentence when nothing is published."""
    return _table(page, *_plan(page, scale, target))


def _table(page: str, items: Sequence[Any], got: Mapping[str, Any]) -> pd.DataFrame | str:
    out = get_page(page).table(items, got)
    return none_yet(page) if out is None else out


def paper_section(page: str, page_scale: str, target: str | None = None) -> pd.DataFrame | str:
    """A page's "Paper scale" section: below paper scale, the table of its published paper-scale runs
    (:func:`table`: the page's own layout);
    at paper scale, a sentence (the page's own tables are those). Publishes ``paper_scale_runs``."""
    items, got = _plan(page, "paper", target)
    publish("paper_scale_runs", len(got))
    if page_scale == "paper":
        return "This page ran at paper scale: the tables above are the paper-scale ones."
    return _table(page, items, got)
