"""The registry of the book's pages: one :class:`~lib.page.Page` per notebook, by name.

Each paper's package keeps its pages in ``lib/<paper>/pages.py``; this module gathers them (and the
book's own performance page) so that the queue (:mod:`lib.gpu.queue`) and the paper-scale tables
(:mod:`lib.paper_scale`) are loops over pages, never a list of page names of their own.

* :func:`get` -- a page by name (``ValueError`` naming the known pages otherwise).
* :func:`all_pages` -- every page, paper by paper.
* :func:`queued` -- the pages with paper-scale runs, in the queue's priority order.
"""

from __future__ import annotations

from lib.page import Page

__all__ = ["all_pages", "get", "queued", "queued_names"]

PERFORMANCE = Page("performance", "book", "What things cost: the engine's epoch times and the loss-scaling benchmark")


def all_pages() -> tuple[Page, ...]:
    """Every page of the book, paper by paper (then the book's own)."""
    from lib.ccc import pages as ccc
    from lib.cross_paper import pages as cross
    from lib.l2d import pages as l2d
    from lib.moe import pages as moe
    from lib.rr import pages as rr

    return (*moe.PAGES, *l2d.PAGES, *ccc.PAGES, *rr.PAGES, *cross.PAGES, PERFORMANCE)


def get(name: str) -> Page:
    """The page called ``name`` (its notebook's name)."""
    pages = {p.name: p for p in all_pages()}
    if name not in pages:
        raise ValueError(f"page: unknown page {name!r}; the book has {', '.join(pages)}")
    return pages[name]


def queued() -> tuple[Page, ...]:
    """The pages with paper-scale runs, in the queue's priority order (``rank``)."""
    return tuple(sorted((p for p in all_pages() if p.rank is not None), key=lambda p: p.rank))


def queued_names() -> tuple[str, ...]:
    """The names of :func:`queued`."""
    return tuple(p.name for p in queued())
