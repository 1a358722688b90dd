"""What a page's cells ask of the machinery: :func:`start` and :func:`finish`, its first and last
code cells, and publishing its numbers so the book, the landing page and the tests read the same
values.

``publish(name, value)`` glues ``value`` into the executed notebook with ``myst_nb.glue`` (the book
can paste it with ``{glue:text}``); :func:`read_published` gives the tests, the ledger and the book
build every value an executed notebook published.

However a page is run, its first code cell calls :func:`start` (the parameters checked with the rules
of ``python -m calibook run``, names papermill injected but the page does not declare included) and its last
:func:`finish`, which removes the "did not finish" notice :func:`start` showed (``update_display_data``
on the first cell's output): a failed or interrupted run says so at the top.
"""

from __future__ import annotations

import ast
import json
import shlex
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import pandas as pd

from lib.report import show

NOTICE = (
    "**This page did not finish running.** Its run failed or was interrupted before the last cell; "
    "the numbers below, if any, are incomplete. Run it again (`python -m calibook run {name}{options}`)."
)

__all__ = [
    "NOTICE",
    "finish",
    "injected_names",
    "publish",
    "publish_claims",
    "publish_scale",
    "publish_values",
    "read_published",
    "start",
]


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
    """Check page ``name``'s parameters as found in ``namespace`` (the notebook's ``globals()``) and
    put back their checked values (``papermill -r`` injects strings), then show the "did not finish"
    notice that :func:`finish` removes. Returns nothing, so the cell shows only the notice."""
    from calibook.notebooks import check_notebook, check_parameters, notebook_parameters
    from lib.config import SCALES
    from lib.validation import check_choice

    if not isinstance(namespace, Mapping):
        raise ValueError(f"namespace: expected the notebook's globals(), got {type(namespace).__name__}")
    check_notebook(name)
    check_choice(namespace.get("scale"), SCALES, "scale")
    declared, injected = notebook_parameters(name), injected_names(namespace)
    wanted = [k for k in dict.fromkeys([*declared, *injected]) if k != "scale"]
    missing = [k for k in wanted if k in declared and k not in namespace]
    if missing:
        raise ValueError(f"{missing[0]}: the parameters cell of {name!r} was not run before this cell")
    values = {k: namespace.get(k) for k in wanted}
    checked = check_parameters(name, namespace["scale"], values)
    if isinstance(namespace, MutableMapping):  # papermill -r injects strings: the page gets the checked values
        namespace.update(checked)
    given = "".join(f" -p {k} {shlex.quote(str(v))}" for k, v in values.items() if k in injected)
    _show(name, NOTICE.format(name=name, options=f" --scale {namespace['scale']}{given}"))


def finish(name: str) -> None:
    """Remove the notice of :func:`start`: the page ran to its last cell."""
    _show(name, "", update=True)


def _show(name: str, text: str, update: bool = False) -> None:
    from IPython.display import display

    data = {"text/markdown": text, "text/plain": text.replace("**", "")}
    display(data, raw=True, display_id=f"calibook-unfinished-{name}", update=update)


def publish(name: str, value: Any, display: bool = False) -> Any:
    """Glue a JSON-serialisable ``value`` under ``name`` (hidden unless ``display``)."""
    from myst_nb import glue

    json.dumps(value)  # fail early with a clear TypeError on values the tests could not read
    glue(name, value, display=display)
    return value


def publish_values(**values: Any) -> None:
    """Glue several hidden values at once, each under its keyword (:func:`publish`)."""
    for name, value in values.items():
        publish(name, value)


def publish_claims(claims: pd.DataFrame) -> None:
    """Publish a page's claims table (:func:`lib.report.claims_table`) under ``claims``, as its rows, and show it
    (``paper_own`` headed "the paper's own")."""
    if not isinstance(claims, pd.DataFrame):
        raise ValueError(f"claims: expected the DataFrame of claims_table, got {type(claims).__name__}")
    publish("claims", claims.to_dict("records"))
    show(claims.rename(columns={"paper_own": "the paper's own"}))


def read_published(notebook: str | Path) -> dict[str, Any]:
    """Every value glued in an executed notebook, by name (plain-text representation parsed)."""
    import nbformat  # a notebook tool: not needed (nor installed) where only runs are trained

    found: dict[str, Any] = {}
    for cell in nbformat.read(str(notebook), as_version=4).cells:
        for output in cell.get("outputs", []):
            meta, data = output.get("metadata", {}).get("scrapbook"), output.get("data", {})
            text = data.get(meta.get("mime_prefix", "") + "text/plain", data.get("text/plain")) if meta else None
            if text is None:
                continue
            text = "".join(text) if isinstance(text, list) else text
            try:
                found[meta["name"]] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                found[meta["name"]] = text
    return found


def publish_scale(scale: str, summary: str) -> str:
    """Publish what produced this page's numbers (scale, data, model, seeds) for the landing page."""
    return publish("scale_summary", f"{scale}: {summary}")
