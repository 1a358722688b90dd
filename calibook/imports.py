"""The import graph of ``lib``, read from the source (no module is imported).

Every ``import lib.x`` and ``from lib.x import y`` counts, at the top of a module or inside a function
(a lazy import runs when its function does), and so do relative imports. ``from lib.p import m`` names
the module ``lib.p.m`` when ``m`` is a module, otherwise the package ``lib.p`` (its ``__init__``).
:func:`closure` adds every package above a module, whose ``__init__`` Python runs on import.

:mod:`calibook.versions` fingerprints a run group by the :func:`closure` of the modules that make
its runs; ``tests/unit/test_layers.py`` checks that the graph has no cycle and no arrow back up.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from pathlib import Path

#: the folder that holds the ``lib`` package of this checkout.
SOURCE_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "lib"

_PARSED: dict[str, ast.Module] = {}  # SHA-256 of a file's bytes -> its syntax tree
_READ: dict[tuple[str, Path | None, int], tuple[dict[str, int], dict[str, tuple[str, str | None]]]] = {}


def module_file(module: str, root: Path | None = None) -> Path:
    """The source file of ``module`` (``lib.x.y``: ``lib/x/y.py`` or ``lib/x/y/__init__.py``) under ``root``."""
    if not isinstance(module, str) or not (module == PACKAGE or module.startswith(PACKAGE + ".")):
        raise ValueError(f"module: expected a module of {PACKAGE!r} (e.g. 'lib.engine.loop'), got {module!r}")
    base = (root or SOURCE_ROOT).joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    raise ValueError(f"module: {module!r} has no source under {root or SOURCE_ROOT}")


def lib_modules(root: Path | None = None) -> list[str]:
    """Every module of ``lib`` under ``root``, packages included, sorted."""
    top = (root or SOURCE_ROOT) / PACKAGE
    out = []
    for path in top.rglob("*.py"):
        parts = path.relative_to(top.parent).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(out)


def parse(module: str, root: Path | None = None) -> ast.Module:
    """The syntax tree of ``module`` as its file is now (cached by the file's content)."""
    source = module_file(module, root).read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    if digest not in _PARSED:
        _PARSED[digest] = ast.parse(source)
    return _PARSED[digest]


def _read(module: str, root: Path | None) -> tuple[dict[str, int], dict[str, tuple[str, str | None]]]:
    tree = parse(module, root)
    key = (module, root, id(tree))  # trees are kept, so an id names one content
    if key in _READ:
        return _READ[key]
    is_package = module_file(module, root).name == "__init__.py"
    named: dict[str, int] = {}
    bound: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                named.setdefault(a.name, node.lineno)
                bound[a.asname or a.name.partition(".")[0]] = (a.name if a.asname else a.name.partition(".")[0], None)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*here, *([base] if base else [])])
            for a in node.names:
                sub = f"{base}.{a.name}"
                try:  # a module of its own, else a name in the package base
                    module_file(sub, root)
                    target: tuple[str, str | None] = (sub, None)
                except ValueError:
                    target = (base, a.name)
                named.setdefault(target[0], node.lineno)
                bound[a.asname or a.name] = target
    named = {m: line for m, line in named.items() if m == PACKAGE or m.startswith(PACKAGE + ".")}
    bound = {n: t for n, t in bound.items() if t[0] == PACKAGE or t[0].startswith(PACKAGE + ".")}
    _READ[key] = (named, bound)
    return _READ[key]


def imported(module: str, root: Path | None = None) -> dict[str, int]:
    """The modules of ``lib`` that ``module``'s import statements name, each with its first line."""
    return _read(module, root)[0]


def bindings(module: str, root: Path | None = None) -> dict[str, tuple[str, str | None]]:
    """The names ``module``'s imports from lib bind (anywhere in it): name -> (module, attribute),
    the attribute ``None`` where the name is the module itself."""
    return _read(module, root)[1]


def _with_packages(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def closure(modules: Iterable[str], root: Path | None = None, skip: Iterable[str] = ()) -> tuple[str, ...]:
    """``modules``, every module of ``lib`` they import directly or through others, and the packages
    above each (whose ``__init__`` runs on import), sorted; a module in ``skip`` is neither counted
    nor followed."""
    todo = [p for m in modules for p in _with_packages(m)]
    seen: set[str] = set()
    while todo:
        m = todo.pop()
        if m in seen or m in skip:
            continue
        seen.add(m)
        todo.extend(p for dep in imported(m, root) for p in _with_packages(dep))
    return tuple(sorted(seen))
