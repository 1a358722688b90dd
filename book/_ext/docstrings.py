"""Sphinx extension: render ``lib``'s plain-text docstrings safely on the API page.

The docstrings write absolute values as ``|a - b|``; reStructuredText reads ``|...|`` as a
substitution reference, so this escapes bars before autodoc parses a docstring.
"""

from __future__ import annotations

import re
from typing import Any

_BAR = re.compile(r"(?<!\\)\|")


def _escape_bars(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    for i, line in enumerate(lines):
        # Leave reST tables (lines starting with '+' or made of '|' columns) alone.
        if line.lstrip().startswith(("+", "|")):
            continue
        lines[i] = _BAR.sub(r"\\|", line)


def setup(app: Any) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", _escape_bars)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
