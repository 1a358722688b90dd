"""Executing the notebooks through papermill and building the Jupyter Book from the executed copies.

The sources in ``notebooks/`` are never executed in place (papermill would leave its injected
parameters cell behind). ``execute_notebook`` writes executed copies to
``build/<scale>/notebooks/``; ``stage`` copies the book sources and those copies into
``build/<scale>/site/``; ``build_book`` runs ``jupyter-book build`` there, strictly by default
(``-W -n --keep-going``), producing ``build/<scale>/site/_build/html``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from lib.config import SCALES, build_dir, repo_root
from lib.validation import check_choice

BOOK_FILES = ("_config.yml", "_toc.yml")
BOOK_DIRS = ("book",)
SCALES_TABLE = Path("book") / "_scales_table.md"  # included by book/intro.md and book/scales.md


def notebook_names() -> list[str]:
    """Notebook names in table-of-contents order (entries of ``_toc.yml`` under ``notebooks/``)."""
    toc = yaml.safe_load((repo_root() / "_toc.yml").read_text())
    names: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            file = node.get("file")
            if isinstance(file, str) and file.startswith("notebooks/"):
                names.append(file.split("/", 1)[1])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return names


def check_notebook(name: str) -> Path:
    """Path of ``notebooks/<name>.ipynb``; unknown names raise ``ValueError`` listing valid ones."""
    check_choice(name, notebook_names(), "notebook")
    return repo_root() / "notebooks" / f"{name}.ipynb"


def executed_path(name: str, scale: str) -> Path:
    """Where the executed copy of notebook ``name`` at ``scale`` is written."""
    return build_dir(scale) / "notebooks" / f"{name}.ipynb"


def execute_notebook(
    name: str, scale: str = "cpu", parameters: dict[str, Any] | None = None,
    output: Path | None = None, progress: bool = True,
) -> Path:
    """Run ``notebooks/<name>.ipynb`` through papermill with ``scale`` and extra ``parameters``.

    Returns the executed notebook's path (``build/<scale>/notebooks/<name>.ipynb`` by default).
    The kernel runs with the repository root as working directory.
    """
    import papermill as pm

    check_choice(scale, SCALES, "scale")
    source = check_notebook(name)
    out = output or executed_path(name, scale)
    out.parent.mkdir(parents=True, exist_ok=True)
    params = {"scale": scale, **(parameters or {})}
    start = time.time()
    pm.execute_notebook(
        str(source), str(out), parameters=params, cwd=str(repo_root()),
        kernel_name="python3", progress_bar=progress, log_output=False,
    )
    print(f"[calibook] {name} ({scale}) ran in {time.time() - start:.0f} s -> {out}", flush=True)
    return out


def lib_references(notebook: Path) -> list[str]:
    """Fully qualified names of the ``lib`` functions and classes a notebook's code uses.

    Found from the code cells' imports (``from lib.x import f``; ``from lib import x`` followed
    by ``x.f``), resolved by importing, so renamed or removed functions are not listed.
    """
    import ast
    import importlib

    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    modules: dict[str, str] = {}  # alias -> module name
    names: set[str] = set()
    trees = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            trees.append(ast.parse(cell.source))
        except SyntaxError:  # cell magics and the like
            continue
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "lib":
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    try:
                        importlib.import_module(full)
                        modules[alias.asname or alias.name] = full
                    except ImportError:
                        names.add(full)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                names.add(f"{modules[node.value.id]}.{node.attr}")
    found = []
    for full in sorted(names):
        module, _, attr = full.rpartition(".")
        try:
            obj = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            continue
        if callable(obj) and getattr(obj, "__module__", "").startswith("lib"):
            found.append(f"{obj.__module__}.{obj.__qualname__}")
    return sorted(set(found))


def _append_references(notebook: Path) -> None:
    """Add a closing cell to a staged notebook linking every ``lib`` function it uses (API page)."""
    import nbformat

    refs = lib_references(notebook)
    if not refs:
        return
    nb = nbformat.read(str(notebook), as_version=4)
    links = "\n".join(f"- {{py:obj}}`{name}`" for name in refs)
    nb.cells.append(nbformat.v4.new_markdown_cell(
        "## `lib` functions used on this page\n\nEach links to its documentation on the "
        f"[API page](../book/api.md):\n\n{links}\n"
    ))
    nbformat.write(nb, str(notebook))


def _scales_table(scale: str, names: list[str]) -> str:
    from lib.report import read_published

    rows = ["| page | what produced its numbers |", "|---|---|"]
    for name in names:
        path = executed_path(name, scale)
        summary = "not executed in this build"
        if path.exists():
            summary = str(read_published(path).get("scale_summary", "no scale summary published"))
        rows.append(f"| [{name}](../notebooks/{name}.ipynb) | {summary.replace('|', '/')} |")
    return "\n".join(rows)


def stage(scale: str) -> Path:
    """Copy the book sources and the executed notebooks into ``build/<scale>/site``."""
    site = build_dir(scale) / "site"
    if site.exists():
        shutil.rmtree(site)
    root = repo_root()
    site.mkdir(parents=True)
    for file in BOOK_FILES:
        shutil.copy2(root / file, site / file)
    for folder in BOOK_DIRS:
        shutil.copytree(root / folder, site / folder)
    names = notebook_names()
    (site / "notebooks").mkdir()
    for name in names:
        executed = executed_path(name, scale)
        staged = site / "notebooks" / f"{name}.ipynb"
        shutil.copy2(executed if executed.exists() else root / "notebooks" / f"{name}.ipynb", staged)
        _append_references(staged)
    (site / SCALES_TABLE).write_text(
        f"This build ran every notebook at the **`{scale}`** scale "
        f"(`python -m lib book --scale {scale}`).\n\n" + _scales_table(scale, names) + "\n"
    )
    return site


def build_book(scale: str, strict: bool = True) -> Path:
    """Run ``jupyter-book build`` on the staged site; returns the HTML folder."""
    site = stage(scale)
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(site), "--all"]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    env = {**os.environ, "PYTHONPATH": str(repo_root())}
    subprocess.run(cmd, check=True, env=env)
    html = site / "_build" / "html"
    print(f"[calibook] book built: {html / 'index.html'}", flush=True)
    return html


def execute_all(scale: str, only: list[str] | None = None) -> list[Path]:
    """Execute every notebook (or those in ``only``) at ``scale``, in book order."""
    names = only or notebook_names()
    for name in names:
        check_notebook(name)
    return [execute_notebook(name, scale) for name in names]
