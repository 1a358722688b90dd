"""A page of the book: the base class every page module subclasses (:class:`Page`).

Every notebook ``notebooks/<name>.py`` has one page module ``lib/<paper>/pages/<name>.py`` holding
one :class:`Page` subclass and its instance ``PAGE``; the notebook and the book's tooling
(``calibook``: the queue, the paper-scale tables) call the same methods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from lib.engine.plan import Item

__all__ = ["OnDone", "Page"]

OnDone = Callable[[Item, dict[str, Any]], None]
"""Called with each planned run and its record as soon as the run is finished."""


def _ignore(item: Item, record: dict[str, Any]) -> None:
    """The default :data:`OnDone`: nothing."""


class Page:
    """One notebook of the book, as its notebook, the queue and the paper-scale tables read it.

    A subclass sets ``name`` (its notebook and ``lib/scales.toml`` settings), ``paper`` and ``title``; one
    with paper-scale runs overrides :meth:`runs`, :meth:`data`, :meth:`run_one` (or :meth:`train`) and
    :meth:`table` and sets ``rank`` (its place in the queue), ``unit`` ("seeds" or "runs"), ``needs``
    (modules beyond the engine's), ``bench`` and ``targets``.
    ``paper_on_cpu``: the page's paper scale needs no GPU (minutes on a CPU), so a book built at
    ``cpu`` scale runs it at paper scale too (:func:`calibook.book.paper_builds`). ``differs``: how the
    page's setting differs from the paper's where not by scale (the ledger's account of opposite
    verdicts, :func:`calibook.ledger.why`). ``packed``: :meth:`train` takes the packed engine's
    ``stack``, ``log`` and ``compile`` (paper 1's pages).
    """

    name: ClassVar[str]
    paper: ClassVar[str]
    title: ClassVar[str]
    targets: ClassVar[tuple[str | None, ...]] = (None,)
    unit: ClassVar[str] = "runs"
    rank: ClassVar[int | None] = None
    needs: ClassVar[tuple[str, ...]] = ()
    bench: ClassVar[str | None] = None
    paper_on_cpu: ClassVar[bool] = False
    differs: ClassVar[str | None] = None
    packed: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"<page {self.name} ({self.paper}): {self.title}>"

    @property
    def has_runs(self) -> bool:
        """Whether the page plans runs of its own (it overrides :meth:`runs`)."""
        return type(self).runs is not Page.runs

    def runs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Item]:
        """The run plan at the settings ``cfg`` (and PACS ``target``): every
        :class:`~lib.engine.plan.Item` the page shows, post-hoc ones (MoCaE) included."""
        raise ValueError(f"page: {self.name} has no runs")

    def item(self, tail: str, seed: Any, epochs: Any, method: str, **kw: Any) -> Item:
        """One planned run of this page, plan id ``<page>/<tail>`` (``kw``: the rest of the Item)."""
        return Item(self.name, f"{self.name}/{tail}", int(seed), int(epochs), method, **kw)

    def data(self, cfg: Mapping[str, Any], target: str | None = None) -> Any:
        """The data the runs train on (``FileNotFoundError`` when missing)."""
        raise ValueError(f"page: {self.name} has no runs to train")

    def run_one(self, item: Item, cfg: Mapping[str, Any], data: Any) -> dict[str, Any]:
        """Train (or load from the cache) one planned run and return its record."""
        raise ValueError(f"page: {self.name} has no runs to train")

    def table(self, items: Sequence[Item], got: Mapping[str, dict[str, Any]]) -> Any:
        """The paper-scale table of the planned ``items`` from the published records ``got`` (plan id
        -> record); ``None`` when nothing is in (or the page has no paper-scale runs)."""
        return None

    def across_targets(self, published: Sequence[Mapping[str, Any]]) -> str | None:
        """A page with :attr:`targets`: one Markdown page of what its copies, one per target, published
        (``published``: each copy's values, :func:`calibook.page.read_published`); ``None``: no such page."""
        return None

    def check_target(self, target: str | None) -> None:
        """``ValueError`` unless ``target`` is one of the page's :attr:`targets`."""
        if target not in self.targets:
            raise ValueError(f"target: {self.name} has no target {target!r}; it has {self.targets}")

    def plan(self, scale: str = "paper", target: str | None = None) -> list[Item]:
        """The runs the queue trains for this page at ``scale`` (every target, or ``target``), in
        plan order; post-hoc runs are left out (they come with the record they are made from)."""
        if not self.has_runs:
            return []
        if target is not None:
            self.check_target(target)
        from lib.config import settings

        cfg = settings(self.name, scale)
        return [it for t in self.targets if target in (None, t) for it in self.runs(cfg, t) if not it.post_hoc]

    def train(self, items: Sequence[Item], cfg: Mapping[str, Any], data: Any, on_done: OnDone = _ignore) -> None:
        """Train (or load) ``items`` of this page on ``data`` one run at a time through
        :meth:`run_one` (no run starts past the deadline of :mod:`lib.engine.deadline`); ``on_done``
        gets each finished run's record. Paper 1's pages (``packed``) override this to train whole
        grids packed, with the packed engine's options."""
        from lib.engine import deadline

        for it in items:
            deadline.check(0.0, f"the runs of {self.name}")
            on_done(it, self.run_one(it, cfg, data))
