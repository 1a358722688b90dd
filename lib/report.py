"""Publishing a notebook's numbers so the book, the landing page and the tests read the same values.

``publish(name, value)`` glues ``value`` into the executed notebook with ``myst_nb.glue`` (the
book can paste it with ``{glue:text}``); ``read_published(path)`` gives the tests every published value of an executed notebook.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd

def publish(name: str, value: Any, display: bool = False) -> Any:
    """Glue a JSON-serialisable ``value`` under ``name`` (hidden unless ``display``).

    Used in: every notebook page (the skeleton in book/start_here).
    """
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
            data = output.get("data", {})
            text = data.get(meta.get("mime_prefix", "") + "text/plain", data.get("text/plain"))
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
    """Publish what produced this page's numbers (scale, data, model, seeds) for the landing page.

    Used in: every notebook page (the skeleton in book/start_here).
    """
    return publish("scale_summary", f"{scale}: {summary}")


VERDICTS: tuple[str, ...] = ("held", "did not hold", "inconclusive at this scale", "not run: data unavailable")


def verdict(held: bool | None) -> str:
    """The verdict for a claim whose test came out ``held`` (``None``: the data cannot tell).

    Used in: notebooks/calibration, notebooks/cascading, notebooks/cleaning, notebooks/cross_paper, notebooks/same_size.
    """
    if held is None:
        return VERDICTS[2]
    return VERDICTS[0] if held else VERDICTS[1]


def claims_table(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """A page's claims table: one row per claim with ``claim``, ``paper`` (what the paper reports,
    quoted), ``ours`` (this run's numbers, as text) and ``verdict`` (one of ``VERDICTS``,
    computed by the caller from the numbers, never typed in).

    Used in: notebooks/calibration, notebooks/cascading, notebooks/cleaning, notebooks/cross_paper, notebooks/l2d_cifar10, notebooks/l2d_gaussians, notebooks/losses_cifar10, notebooks/losses_released_logits, notebooks/same_size.
    """
    out = []
    for r in rows:
        for key in ("claim", "ours", "verdict"):
            if key not in r:
                raise ValueError(f"rows: every row needs {key!r}")
        if r["verdict"] not in VERDICTS:
            raise ValueError(f"rows: verdict {r['verdict']!r} is not one of {VERDICTS}")
        out.append({"claim": r["claim"], "paper": r.get("paper", ""), "ours": r["ours"], "verdict": r["verdict"]})
    return pd.DataFrame(out, columns=["claim", "paper", "ours", "verdict"])
