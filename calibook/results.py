"""What ``results/`` holds: the paper-scale plan of the book's pages and the records published for it.

The paper-scale runs are trained on a GPU (:mod:`calibook.gpu`, which no notebook imports) and published
to ``results/<page>/<group>/<key>.json``. This module only reads: pages (:mod:`calibook.paper_scale`),
the queue and the import all ask it which runs a page plans at a scale and which of them are in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from calibook.artifacts import results_dir
from lib.engine.plan import Item, matches
from calibook.runs import read_record
from calibook.versions import made_by_current_code
from calibook.pages import get as get_page
from calibook.pages import queued_names

#: Priority order -- paper 1's CIFAR-10H and its sensitivity sweeps first, PACS last: the pages'
#: ``rank`` (:func:`calibook.pages.queued`).
PAGES: tuple[str, ...] = queued_names()

__all__ = ["PAGES", "Item", "plan", "published", "read_record", "select"]


def published(page: str) -> dict[str, dict[str, Any]]:
    """Verified records under ``results/<page>/`` by their plan id (records of older code versions
    are left out: their runs are planned again)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((results_dir() / page).glob("*/*.json")):
        rec = read_record(path)
        if rec is not None and "queue" in rec and made_by_current_code(rec):
            out[rec["queue"]["id"]] = rec
    return out


def plan(pages: Sequence[str] = PAGES, scale: str = "paper", unplanned: dict[str, str] | None = None) -> list[Item]:
    """Every run of ``pages`` at ``scale`` in priority order (page order, then seed by seed), each holding
    its published record when ``results/`` has it. A page whose plan needs what this machine lacks
    raises, or with ``unplanned`` (a dict) is left out, ``unplanned[page]`` saying why."""
    for p in pages:
        if p not in PAGES:
            raise ValueError(f"pages: unknown page {p!r}; the queue knows {', '.join(PAGES)}")
    items: list[Item] = []
    for p in [p for p in PAGES if p in pages]:
        try:
            page_items = get_page(p).plan(scale)
        except (ImportError, RuntimeError) as err:
            if unplanned is None:
                raise
            unplanned[p] = str(err).splitlines()[0] if str(err) else type(err).__name__
            continue
        got = published(p)
        for it in page_items:
            rec = got.get(it.id)
            it.record = rec if rec is not None and matches(it, rec) else None
        items += sorted(page_items, key=lambda it: it.seed)  # stable: seed 0 of everything first
    return items


def select(items: Sequence[Item], runs: Iterable[str] | None = None, target: str | None = None) -> list[Item]:
    """The planned ``items`` of the run ids ``runs`` (``None``: all) and of ``target`` (``None``: all;
    one of the pages' targets, e.g. PACS's held-out domain). An id that is not planned, or a target no
    planned page has, is refused in one line naming it."""
    pages = list(dict.fromkeys(it.page for it in items))
    if target is not None:
        targets = sorted({t for p in pages for t in get_page(p).targets if t is not None})
        if target not in targets:
            raise ValueError(
                f"target: {target!r} is not a target of {', '.join(pages) or 'the plan'}; valid: {targets}"
            )
    want = None if runs is None else set(runs)
    if want is not None and (unknown := sorted(want - {it.id for it in items})):
        raise ValueError(f"runs: {unknown[0]!r} is not a run of the plan of {', '.join(pages) or 'no page'}")
    return [it for it in items if (want is None or it.id in want) and target in (None, it.target)]
