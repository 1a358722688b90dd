"""The first and last code cells of every page: its parameters are checked, an unfinished run says so.

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
from collections.abc import Mapping
from typing import Any

NOTICE = ("**This page did not finish running.** Its run failed or was interrupted before the last cell; "
          "the numbers below, if any, are incomplete. Run it again (`python -m lib run {name}`).")

__all__ = ["NOTICE", "finish", "injected_names", "start"]


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

    display({"text/markdown": text, "text/plain": text.replace("**", "")}, raw=True,
            display_id=_display_id(name), update=update)
