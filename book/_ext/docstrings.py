"""Sphinx extension: render ``lib``'s plain-text docstrings safely on the API page.

The docstrings write absolute values as ``|a - b|``; reStructuredText reads ``|...|`` as a
substitution reference, so this escapes bars before autodoc parses a docstring. Module data whose
value prints longer than :data:`MAX_VALUE` characters (the papers' tables as dicts, long grids) are
shown by name and docstring, not as a one-line dump of the value. A source page's "[docs]" links
point at the module that defines each name (viewcode took the first module that documented one of its
names, so a re-export, e.g. a page class's ``data = image_training.page_data``, broke every link).
"""

from __future__ import annotations

import re
from typing import Any

_BAR = re.compile(r"(?<!\\)\|")
MAX_VALUE = 120


def _escape_bars(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    for i, line in enumerate(lines):
        # Leave reST tables (lines starting with '+' or made of '|' columns) alone.
        if line.lstrip().startswith(("+", "|")):
            continue
        lines[i] = _BAR.sub(r"\\|", line)


def _short_values(documenter: type) -> type:
    """``documenter`` (autodoc's data or attribute documenter) without long values in its header."""
    from sphinx.util.inspect import object_description

    class Short(documenter):  # type: ignore[misc, valid-type]
        def should_suppress_value_header(self) -> bool:
            try:
                long = len(object_description(self.object)) > MAX_VALUE
            except Exception:  # a value that cannot be described is not shown either
                long = True
            return long or super().should_suppress_value_header()

    return Short


def _own_module_anchors(app: Any) -> list[Any]:
    """Before viewcode writes its source pages: each module's "[docs]" anchors under its own name,
    none for a name documented only where it is re-exported (it has no anchor of its own), and no
    module without source (viewcode's index linked e.g. ``builtins.html``, a page it never writes)."""
    env = app.builder.env
    documented = env.get_domain("py").objects
    modules = getattr(env, "_viewcode_modules", {})
    for name, entry in list(modules.items()):
        if not entry:
            del modules[name]
        else:  # (code, tags, used, refname)
            used = {n: documented[f"{name}.{n}"].docname for n in entry[2] if f"{name}.{n}" in documented}
            modules[name] = (entry[0], entry[1], used, name)
    return []


def setup(app: Any) -> dict[str, Any]:
    from sphinx.ext.autodoc import AttributeDocumenter, DataDocumenter

    app.connect("autodoc-process-docstring", _escape_bars)
    app.connect("html-collect-pages", _own_module_anchors, priority=400)  # viewcode's runs at 500
    for documenter in (DataDocumenter, AttributeDocumenter):
        app.add_autodocumenter(_short_values(documenter), override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
