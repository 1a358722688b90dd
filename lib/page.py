"""A page of the book: its definition (:class:`Page`), and its first and last code cells.

Every notebook has one :class:`Page`, kept in its paper's package (``lib/<paper>/pages.py``) and
found by name in the registry :mod:`lib.pages`. The page's notebook, the paper-scale queue
(:mod:`lib.gpu.queue`) and the paper-scale tables (:mod:`lib.paper_scale`) all read it: which runs it
trains at a scale (its plan), on which data, how one run or the whole grid trains, the paper-scale
table, the claims and the paper's numbers.

However a page is run -- ``python -m lib run``, the README's ``papermill`` command, or a notebook
opened in Jupyter -- its first code cell calls :func:`start` and its last code cell :func:`finish`:

* :func:`start` checks the page's parameters with the rules of ``python -m lib run``
  (:func:`lib.book.check_parameters`: known names, types, finite non-negative numbers, fractions,
  choices) and ``scale``. Names papermill injected that the page does not declare (``-p sede 3``:
  papermill only logs them and runs with the defaults) are read from the injected cell, which
  papermill starts with ``# Parameters`` and which IPython keeps in its input history (``In``). A bad
  name or value stops the page with one line (``ValueError``, shown alone by
  :mod:`lib.notebook_errors`).
* :func:`start` then shows a notice "this page did not finish running" under a ``display_id``;
  :func:`finish` replaces that display with an empty one (``update_display_data``, which nbclient
  applies to the saved output of the first cell). A run that fails or is interrupted therefore
  leaves an ``out.ipynb`` that says, at the top, that it is not a finished page.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lib.engine.plan import Item

NOTICE = (
    "**This page did not finish running.** Its run failed or was interrupted before the last cell; "
    "the numbers below, if any, are incomplete. Run it again (`python -m lib run {name}`)."
)

__all__ = ["NOTICE", "OnDone", "Page", "finish", "image_data", "injected_names", "start"]

OnDone = Callable[[Item, dict[str, Any]], None]
"""Called with each planned run and its record as soon as the run is finished."""


@dataclass(frozen=True)
class Page:
    """One notebook of the book, as its notebook, the queue and the paper-scale tables read it.

    ``name`` is the notebook (``notebooks/<name>.py``) and its settings (``[<name>.*]`` in
    ``lib/scales.toml``); ``paper`` the package it belongs to; ``title`` what it reproduces.
    Pages with paper-scale runs also have:

    * ``runs(cfg, target)`` -- the run plan of a scale's settings ``cfg`` (and PACS ``target``):
      every :class:`~lib.engine.plan.Item` the page shows, post-hoc ones (MoCaE) included;
    * ``data(cfg, target)`` -- the data those runs train on (``FileNotFoundError`` when missing);
    * ``run_one(item, cfg, data)`` -- train (or load from the cache) one run and return its record;
    * ``run_grid(items, data, stack, on_done, log)`` -- optional: train a whole grid at once
      (paper 1's stacked engine); without it :meth:`train` runs them one by one;
    * ``table(items, got)`` -- the paper-scale table (``None`` when nothing is in) from the published records ``got``
      (plan id -> record) of the planned ``items``;
    * ``rank`` -- its place in the paper-scale queue (lower first), ``unit`` -- what coverage counts
      ("seeds" or "runs"), ``needs`` -- modules the training machine must have beyond the engine's,
      ``bench`` -- the benchmark data set its epochs are projected from.

    ``claims`` (the function judging the page's claims) and ``paper_numbers`` (the paper's numbers it
    quotes beside ours) are there for every page that has them.
    """

    name: str
    paper: str
    title: str
    runs: Callable[[Mapping[str, Any], str | None], list[Item]] | None = None
    data: Callable[[Mapping[str, Any], str | None], Any] | None = None
    run_one: Callable[[Item, Mapping[str, Any], Any], dict[str, Any]] | None = None
    run_grid: Callable[[Sequence[Item], Any, int | None, OnDone, Callable[[str], None]], None] | None = None
    table: Callable[[Sequence[Item], Mapping[str, dict[str, Any]]], Any] | None = None
    claims: Callable[..., Any] | None = None
    paper_numbers: Any = None
    targets: tuple[str | None, ...] = (None,)
    unit: str = "runs"
    rank: int | None = None
    needs: tuple[str, ...] = ()
    bench: str | None = None

    def settings(self, scale: str, **overrides: Any) -> dict[str, Any]:
        """The page's settings at ``scale`` (:func:`lib.config.settings`)."""
        from lib.config import settings

        return settings(self.name, scale, **overrides)

    def plan(self, scale: str = "paper", target: str | None = None) -> list[Item]:
        """The runs the queue trains for this page at ``scale`` (every target, or ``target``), in
        plan order; post-hoc runs are left out (they come with the record they are made from)."""
        if self.runs is None:
            return []
        if target is not None and target not in self.targets:
            raise ValueError(f"target: {self.name} has no target {target!r}; it has {self.targets}")
        cfg = self.settings(scale)
        return [it for t in self.targets if target in (None, t) for it in self.runs(cfg, t) if not it.post_hoc]

    def configs(self, cfg: Mapping[str, Any], target: str | None = None) -> list[Any]:
        """The configs of every run the page shows at the settings ``cfg`` (its notebook's grid)."""
        if self.runs is None:
            raise ValueError(f"page: {self.name} has no runs")
        return [it.config for it in self.runs(cfg, target)]

    def train(
        self,
        items: Sequence[Item],
        cfg: Mapping[str, Any],
        data: Any,
        stack: int | None = None,
        on_done: OnDone = lambda it, rec: None,
        log: Callable[[str], None] = print,
    ) -> None:
        """Train (or load) ``items`` of this page on ``data``: the whole grid at once through
        ``run_grid`` where the page has one, else one run at a time (no run starts past the
        deadline of :mod:`lib.engine.deadline`); ``on_done`` gets each finished run's record."""
        from lib.engine import deadline

        if self.run_grid is not None:
            self.run_grid(items, data, stack, on_done, log)
            return
        if self.run_one is None:
            raise ValueError(f"page: {self.name} has no runs to train")
        for it in items:
            deadline.check(0.0, f"the runs of {self.name}")
            on_done(it, self.run_one(it, cfg, data))


def image_data(cfg: Mapping[str, Any], target: str | None = None) -> Any:
    """``Page.data`` of the pages that train image networks on CIFAR-10 (papers 2 and 4):
    :func:`lib.nets.image_training.image_data` of the settings ``cfg``, imported on call so that the
    page registry stays free of torch. These pages have no targets (``target`` must be None)."""
    if target is not None:
        raise ValueError(f"target: the CIFAR-10 image pages have no targets, got {target!r}")
    from lib.nets.image_training import image_data as load

    return load(cfg)


def _display_id(name: str) -> str:
    return f"calibook-unfinished-{name}"


def injected_names(namespace: Mapping[str, Any]) -> list[str]:
    """Names assigned by papermill's injected cell(s) (source starting ``# Parameters``) in the
    kernel's input history ``In``; empty outside a papermill run."""
    history = namespace.get("In")
    names: list[str] = []
    if not isinstance(history, list):
        return names
    for source in history:
        if not isinstance(source, str) or not source.lstrip().startswith("# Parameters"):
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            names += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in names]
    return names


def start(name: str, namespace: Mapping[str, Any]) -> None:
    """Check page ``name``'s parameters as found in ``namespace`` (the notebook's ``globals()``),
    then show the "did not finish" notice that :func:`finish` removes. Returns nothing, so the
    cell shows only the notice."""
    from lib.book import check_notebook, check_parameters, notebook_parameters
    from lib.config import SCALES
    from lib.validation import check_choice

    if not isinstance(namespace, Mapping):
        raise ValueError(f"namespace: expected the notebook's globals(), got {type(namespace).__name__}")
    check_notebook(name)
    check_choice(namespace.get("scale"), SCALES, "scale")
    declared = notebook_parameters(name)
    wanted = [k for k in dict.fromkeys([*declared, *injected_names(namespace)]) if k != "scale"]
    missing = [k for k in wanted if k in declared and k not in namespace]
    if missing:
        raise ValueError(f"{missing[0]}: the parameters cell of {name!r} was not run before this cell")
    values = {k: namespace.get(k) for k in wanted}
    check_parameters(name, namespace["scale"], values)
    _show(name, NOTICE.format(name=name))


def finish(name: str) -> None:
    """Remove the notice of :func:`start`: the page ran to its last cell."""
    _show(name, "", update=True)


def _show(name: str, text: str, update: bool = False) -> None:
    from IPython.display import display

    display(
        {"text/markdown": text, "text/plain": text.replace("**", "")},
        raw=True,
        display_id=_display_id(name),
        update=update,
    )
