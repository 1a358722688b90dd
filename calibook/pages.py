"""The registry of the book's pages: one :class:`~lib.page.Page` per notebook, by name.

Each page lives in its own module, ``lib/<paper>/pages/<notebook>.py`` (its instance ``PAGE``), the
book's own page on costs in :mod:`calibook.performance`; this module lists those modules once, so
that the queue (:mod:`calibook.gpu.queue`) and the paper-scale tables (:mod:`calibook.paper_scale`)
are loops over pages, never a list of page names of their own.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from typing import Any

from lib.page import Page

__all__ = ["PAGE_MODULES", "all_pages", "copies", "copy_for", "copy_named", "get", "page_of", "queued", "queued_names"]

#: The page modules, paper by paper, then the book's own, in the book's order (the notebook is the
#: module's last name).
PAGE_MODULES: tuple[str, ...] = (
    "lib.moe.pages.routing_theory",
    "lib.moe.pages.cifar10h",
    "lib.moe.pages.sensitivity",
    "lib.moe.pages.civilcomments",
    "lib.moe.pages.pacs",
    "lib.l2d.pages.l2d_gaussians",
    "lib.l2d.pages.l2d_cifar10",
    "lib.ccc.pages.calibration",
    "lib.ccc.pages.cascading",
    "lib.ccc.pages.same_size",
    "lib.ccc.pages.cleaning",
    "lib.rr.pages.losses_released_logits",
    "lib.rr.pages.losses_cifar10",
    "lib.cross_paper.pages.cross_paper",
    "calibook.performance",
)


@cache
def all_pages() -> tuple[Page, ...]:
    """Every page of the book, paper by paper (then the book's own)."""
    return tuple(importlib.import_module(m).PAGE for m in PAGE_MODULES)


def get(name: str) -> Page:
    """The page called ``name`` (its notebook's name)."""
    pages = {p.name: p for p in all_pages()}
    if name not in pages:
        raise ValueError(f"page: unknown page {name!r}; the book has {', '.join(pages)}")
    return pages[name]


def queued() -> tuple[Page, ...]:
    """The pages with paper-scale runs, in the queue's priority order (``rank``)."""
    return tuple(sorted((p for p in all_pages() if p.rank is not None), key=lambda p: p.rank or 0))


def queued_names() -> tuple[str, ...]:
    """The names of :func:`queued`."""
    return tuple(p.name for p in queued())


def copies(name: str) -> list[tuple[str, dict[str, str]]]:
    """The executed copies a book build makes of notebook ``name``, as (copy name, parameters): the
    notebook at its defaults, then, for a page with targets (PACS's held-out domains), one copy per
    other target, ``<name>-<target>`` (``pacs-sketch``), so the book shows every target."""
    from calibook.notebooks import parameter_default

    targets = get(name).targets
    if targets == (None,):
        return [(name, {})]
    default = parameter_default(name, "target")
    return [(name, {})] + [(f"{name}-{t}", {"target": t}) for t in targets if t != default]


def page_of(copy: str) -> str:
    """The notebook an executed copy of :func:`copies` was made from (``pacs-sketch`` -> ``pacs``)."""
    return copy.split("-", 1)[0]


def copy_for(name: str, parameters: Mapping[str, Any]) -> str:
    """The copy of :func:`copies` a run of notebook ``name`` with ``parameters`` makes (``pacs-sketch``
    for ``target="sketch"``, whatever else it sets), else ``name``: where its executed copy goes."""
    return next((copy for copy, p in copies(name)[1:] if p.items() <= parameters.items()), name)


def copy_named(name: str) -> tuple[str, str, dict[str, str]] | None:
    """The copy of :func:`copies` called ``name`` (``pacs-sketch``) as (notebook, copy, parameters), or
    ``None`` when ``name`` is no copy of a notebook (a notebook's own name included)."""
    from calibook.notebooks import notebook_names

    base = page_of(name)
    if base == name or base not in notebook_names():
        return None
    params = dict(copies(base)).get(name)
    return None if params is None else (base, name, params)
