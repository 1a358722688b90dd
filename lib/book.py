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
        shutil.copy2(executed if executed.exists() else root / "notebooks" / f"{name}.ipynb",
                     site / "notebooks" / f"{name}.ipynb")
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
