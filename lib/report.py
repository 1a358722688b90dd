"""Publishing a notebook's numbers so the book, the landing page and the tests read the same values.

``publish(name, value)`` glues ``value`` into the executed notebook with ``myst_nb.glue`` (the
book can paste it with ``{glue:text}``); ``read_published(path)`` gives the tests every published value of an executed notebook.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat

def publish(name: str, value: Any, display: bool = False) -> Any:
    """Glue a JSON-serialisable ``value`` under ``name`` (hidden unless ``display``)."""
    from myst_nb import glue

    json.dumps(value)  # fail early with a clear TypeError on values the tests could not read
    glue(name, value, display=display)
    return value


def read_published(notebook: str | Path) -> dict[str, Any]:
    """Every value glued in an executed notebook, by name (plain-text representation parsed)."""
    nb = nbformat.read(str(notebook), as_version=4)
    found: dict[str, Any] = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {}).get("scrapbook")
            if not meta:
                continue
            text = output.get("data", {}).get("text/plain")
            if text is None:
                continue
            text = "".join(text) if isinstance(text, list) else text
            found[meta["name"]] = _parse_repr(text)
    return found


def _parse_repr(text: str) -> Any:
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def publish_scale(scale: str, summary: str) -> str:
    """Publish what produced this page's numbers (scale, data, model, seeds) for the landing page."""
    return publish("scale_summary", f"{scale}: {summary}")
