"""The book's notebooks: their names (in table-of-contents order) and their parameters cells, and
the checks every way of running a page applies to its parameters (``python -m calibook run`` through
:mod:`calibook.book`, :func:`calibook.page.start` inside a notebook).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import yaml

from lib.config import SCALES, repo_root
from lib.validation import check_choice, close_matches

__all__ = [
    "CHOICES",
    "FRACTIONS",
    "MINIMA",
    "check_notebook",
    "check_parameters",
    "notebook_names",
    "notebook_parameters",
    "toc_entries",
]


def toc_entries(toc: Any) -> dict[str, dict[str, Any]]:
    """The entries of a parsed ``_toc.yml`` that name a notebook (``file: notebooks/<name>``), by
    name, in table-of-contents order."""
    found: dict[str, dict[str, Any]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            file = node.get("file")
            if isinstance(file, str) and file.startswith("notebooks/"):
                found[file.split("/", 1)[1]] = node
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return found


def notebook_names() -> list[str]:
    """Notebook names in table-of-contents order (entries of ``_toc.yml`` under ``notebooks/``)."""
    return list(toc_entries(yaml.safe_load((repo_root() / "_toc.yml").read_text())))


def check_notebook(name: str) -> Path:
    """Path of ``notebooks/<name>.ipynb``; unknown names raise ``ValueError`` listing valid ones."""
    check_choice(name, notebook_names(), "notebook")
    return repo_root() / "notebooks" / f"{name}.ipynb"


def notebook_parameters(name: str) -> dict[str, dict[str, str]]:
    """The parameters cell of ``notebooks/<name>.ipynb``, ``{name: {inferred_type_name, default, help}}``, as
    ``papermill.inspect_notebook`` reads it."""
    import papermill as pm

    return dict(pm.inspect_notebook(str(check_notebook(name))))


def parameter_default(name: str, key: str) -> Any:
    """The default value of parameter ``key`` in ``notebooks/<name>.ipynb``'s parameters cell
    (``ValueError`` naming ``key`` when the cell has no such parameter)."""
    import ast

    declared = notebook_parameters(name).get(key)
    if declared is None:
        raise ValueError(f"key: notebook {name!r} has no parameter {key!r}")
    return ast.literal_eval(declared["default"])


def _convert(name: str, raw: Any, type_name: str) -> Any:
    """A parameter as a value of the parameters cell's type: a ``-p`` string converted (``str`` stays a
    string), any other value checked where the cell's type is a number or a bool (an int is a float)."""
    import ast

    value = raw
    if isinstance(raw, str) and type_name != "str":
        with contextlib.suppress(ValueError, SyntaxError):
            value = ast.literal_eval(raw)
        if type_name == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if (
        type_name in ("int", "float", "bool")
        and type(value).__name__ != type_name
        and not (type_name == "float" and is_int)
    ):
        raise ValueError(f"{name}: expected {type_name} (the notebook's parameters cell), got {value!r}")
    return value


def check_parameters(name: str, scale: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """Check notebook parameters before anything runs; returns them converted to their types.

    Names must be in the parameters cell (``scale`` has its own option); strings are converted to the
    cell's type. Numbers must be finite and >= 0, > 0 where the cell's default is, <= 1 for
    :data:`FRACTIONS`, at least :data:`MINIMA` unless 0; :data:`CHOICES` hold, and ``target`` is a
    PACS domain, returned by its name (``"art"`` as ``"art_painting"``, so the run writes that
    target's copy, :func:`calibook.pages.copy_for`). ``ValueError`` names the parameter.
    """
    from lib.config import notebooks_with_settings, settings

    check_choice(scale, SCALES, "scale")
    declared = notebook_parameters(name)
    scaled = settings(name, scale) if name in notebooks_with_settings() else {}
    out: dict[str, Any] = {}
    for key, value in parameters.items():
        if key == "scale":
            raise ValueError("scale: set it with --scale (or the scale argument), not as a parameter")
        if key not in declared:
            valid = ", ".join(declared) or "none"
            raise ValueError(
                f"{key}: not a parameter of notebook {name!r} (its parameters: {valid}){close_matches(key, declared)}"
            )
        value = _convert(key, value, declared[key]["inferred_type_name"])
        if key == "target":  # PACS's held-out domain, by its name (the alias "art": "art_painting")
            from lib.data.image_files import resolve_pacs_domain

            value = resolve_pacs_domain(value)
        _check_value(key, value, declared[key], scaled.get(key))
        out[key] = value
    return out


#: Parameters that are fractions in [0, 1].
FRACTIONS = ("coverage", "noise_rate")
#: Parameters with a fixed set of values, by name.
CHOICES = {"train": ("auto", "yes", "no")}
#: Parameters with a smallest value other than 0 (0 keeps the scale's): a standard error over
#: splits needs two, a binning two bins.
MINIMA = {"n_splits": 2, "n_bins": 2}


def _check_value(key: str, value: Any, declared: dict[str, str], scaled: Any) -> None:
    """The value rules of :func:`check_parameters` for one parameter."""
    import ast
    import math

    if key in CHOICES:
        check_choice(value, CHOICES[key], key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        return
    if not math.isfinite(value):
        raise ValueError(f"{key}: must be a finite number, got {value!r}")
    where = f"lib/scales.toml sets it to {scaled!r}" if scaled is not None else "0 keeps the scale's value"
    if value < 0:
        raise ValueError(f"{key}: must be >= 0 ({where}), got {value!r}")
    default = 0
    with contextlib.suppress(ValueError, SyntaxError):
        default = ast.literal_eval(declared.get("default", "0"))
    if isinstance(default, int | float) and default > 0 and value == 0:
        raise ValueError(f"{key}: must be > 0 (the notebook's default is {default!r}), got {value!r}")
    if 0 < value < MINIMA.get(key, 0):
        raise ValueError(f"{key}: must be at least {MINIMA[key]} ({where}), got {value!r}")
    if key in FRACTIONS and value > 1:
        raise ValueError(f"{key}: must be a fraction in [0, 1], got {value!r}")
