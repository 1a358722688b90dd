"""A page's first and last code cells: :func:`start` and :func:`finish`.

However a page is run, its first code cell calls :func:`start` (the parameters checked with the rules
of ``python -m calibook run``, names papermill injected but the page does not declare included) and its last
:func:`finish`, which removes the "did not finish" notice :func:`start` showed (``update_display_data``
on the first cell's output): a failed or interrupted run says so at the top.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

NOTICE = (
    "**This page did not finish running.** Its run failed or was interrupted before the last cell; "
    "the numbers below, if any, are incomplete. Run it again (`python -m calibook run {name}`)."
)

__all__ = ["NOTICE", "finish", "injected_names", "start"]


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
    from calibook.notebooks import check_notebook, check_parameters, notebook_parameters
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

    data = {"text/markdown": text, "text/plain": text.replace("**", "")}
    display(data, raw=True, display_id=f"calibook-unfinished-{name}", update=update)
