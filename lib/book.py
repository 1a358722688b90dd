"""Executing the notebooks through papermill and building the Jupyter Book from the executed copies.

The sources in ``notebooks/`` are never executed in place (papermill would leave its injected
parameters cell behind). ``execute_notebook`` writes executed copies to
``build/<scale>/notebooks/``; ``stage`` copies the book sources and those copies into
``build/<scale>/site/``; ``build_book`` runs ``jupyter-book build`` there, strictly by default
(``-W -n --keep-going``), producing ``build/<scale>/site/_build/html``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from lib.config import SCALES, build_dir, repo_root
from lib.engine import progress as live
from lib.validation import check_choice, close_matches

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


def notebook_parameters(name: str) -> dict[str, dict[str, str]]:
    """The parameters cell of ``notebooks/<name>.ipynb``: ``{name: {inferred_type_name, default, help}}``.

    Read with ``papermill.inspect_notebook`` (what ``papermill --help-notebook`` prints), so a
    parameter papermill cannot parse is missing here too, and tests/unit/test_book_cli.py fails.
    """
    import papermill as pm

    return dict(pm.inspect_notebook(str(check_notebook(name))))


def _convert(name: str, raw: str, type_name: str) -> Any:
    """A ``-p`` string as a value of the parameters cell's type (``str`` stays a string)."""
    import ast

    if type_name == "str":
        return raw
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    if type_name == "float" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value).__name__ != type_name:
        raise ValueError(f"{name}: expected {type_name} (the notebook's parameters cell), got {raw!r}")
    return value


def check_parameters(name: str, scale: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """Check notebook parameters before anything runs; returns them converted to their types.

    Each name must be in the notebook's parameters cell (a misspelling gets the closest name,
    difflib); ``scale`` is refused (it has its own option); string values (the command line's)
    are converted to the cell's type and other values must have it. Numbers must be finite and not
    negative (every numeric parameter is a count, a seed, a rate or "0 keeps the scale's value"),
    positive where the cell's default is positive (``n_bins: int = 15``), at most 1 for the
    fractions ``coverage`` and ``noise_rate``; ``train`` is auto, yes or no. Raises ``ValueError``
    naming the parameter. :func:`lib.page.start` applies the same checks inside a notebook.
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
            valid = ", ".join(k for k in declared if k != "scale") or "none"
            raise ValueError(
                f"{key}: not a parameter of notebook {name!r} (its parameters: {valid}){close_matches(key, declared)}"
            )
        type_name = declared[key]["inferred_type_name"]
        value = _convert(key, value, type_name) if isinstance(value, str) else value
        if (
            type_name in ("int", "float", "bool")
            and type(value).__name__ != type_name
            and not (type_name == "float" and isinstance(value, int) and not isinstance(value, bool))
        ):
            raise ValueError(f"{key}: expected {type_name} (the notebook's parameters cell), got {value!r}")
        _check_value(key, value, declared[key], scaled.get(key))
        out[key] = value
    return out


FRACTIONS = ("coverage", "noise_rate")  # parameters that are fractions in [0, 1]
CHOICES = {"train": ("auto", "yes", "no")}


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
    try:
        default = ast.literal_eval(declared.get("default", "0"))
    except (ValueError, SyntaxError):
        default = 0
    if isinstance(default, int | float) and default > 0 and value == 0:
        raise ValueError(f"{key}: must be > 0 (the notebook's default is {default!r}), got {value!r}")
    if key in FRACTIONS and value > 1:
        raise ValueError(f"{key}: must be a fraction in [0, 1], got {value!r}")


def execute_notebook(
    name: str,
    scale: str = "cpu",
    parameters: dict[str, Any] | None = None,
    output: Path | None = None,
    progress: bool = True,
    place: str = "",
) -> Path:
    """Run ``notebooks/<name>.ipynb`` through papermill with ``scale`` and extra ``parameters``.

    Parameters are checked first (:func:`check_parameters`), so a misspelled name or a wrong type
    fails before any work. The notebook runs into a temporary file that replaces the executed copy
    (``build/<scale>/notebooks/<name>.ipynb`` by default) only on success, so a failed run never
    overwrites the last good page; the failed copy is kept beside it as ``<name>.failed.ipynb``
    and papermill's ``PapermillExecutionError`` is raised. The kernel runs with the repository root
    as working directory and with third-party progress bars off (``TQDM_DISABLE``,
    ``HF_HUB_DISABLE_PROGRESS_BARS``): they belong on a terminal, not in a page. With ``progress``
    the terminal shows papermill's bar of cells, labelled with the page and its ``place`` in a list
    ("3/15"), and the page's own progress line (epochs, runs, images, time left:
    :mod:`lib.engine.progress` in ``terminal`` mode, prefixed likewise), which never enters the page.
    """
    import papermill as pm

    check_choice(scale, SCALES, "scale")
    source = check_notebook(name)
    params = {"scale": scale, **check_parameters(name, scale, parameters or {})}
    out = output or executed_path(name, scale)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=".running.ipynb", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    label = f"{place} {name}".strip()
    start = time.monotonic()
    print(f"[calibook] {label} ({scale}): running", flush=True)
    try:
        with _quiet_kernel_env({live.PREFIX: f"[{label}] "} if progress else {live.MODE: "off"}):
            pm.execute_notebook(
                str(source),
                str(tmp),
                parameters=params,
                cwd=str(repo_root()),
                kernel_name="python3",
                progress_bar={"desc": label, "disable": False} if progress else False,
                log_output=False,
            )
    except BaseException:  # a failed or interrupted run: keep it for reading, not as the page
        if tmp.exists():
            os.replace(tmp, out.with_name(f"{out.stem}.failed.ipynb"))
        raise
    os.replace(tmp, out)
    print(f"[calibook] {label} ({scale}) ran in {live.format_eta(time.monotonic() - start)} -> {out}", flush=True)
    return out


QUIET_KERNEL_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", live.MODE: "terminal"}


@contextlib.contextmanager
def _quiet_kernel_env(extra: dict[str, str] | None = None) -> Iterator[None]:
    """Environment of the papermill kernel (inherited from this process), with ``extra`` on top:
    no third-party progress bars in the page, and lib's own progress line on the terminal only.

    tqdm (lib.data.image_files, cleanlab, timm) reads ``TQDM_DISABLE`` as the default of ``disable``;
    the Hugging Face hub reads ``HF_HUB_DISABLE_PROGRESS_BARS``; :mod:`lib.engine.progress` reads
    ``CALIBOOK_PROGRESS`` (and its prefix). Restored afterwards.
    """
    env = {**QUIET_KERNEL_ENV, **(extra or {})}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


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
    nb.cells.append(
        nbformat.v4.new_markdown_cell(
            "## `lib` functions used on this page\n\nEach links to its documentation on the "
            f"[API page](../book/api.md):\n\n{links}\n"
        )
    )
    nbformat.write(nb, str(notebook))


def used_in_index(names: list[str] | None = None) -> str:
    """The API page's "Used in" index, generated (never hand-written, so it cannot drift): a
    Markdown table of every ``lib`` function or class the pages' code uses (:func:`lib_references`)
    with links to those pages, in book order. ``stage`` appends it to ``book/api.md``.
    """
    uses: dict[str, list[str]] = {}
    for name in names or notebook_names():
        for ref in lib_references(check_notebook(name)):
            uses.setdefault(ref, []).append(name)
    rows = ["| `lib` function | pages that use it |", "|---|---|"]
    for ref in sorted(uses):
        pages = ", ".join(f"[{n}](../notebooks/{n}.ipynb)" for n in uses[ref])
        rows.append(f"| {{py:obj}}`{ref}` | {pages} |")
    return "\n".join(rows)


def _scales_table(scale: str, names: list[str]) -> str:
    from lib.report import read_published

    rows = ["| page | what produced its numbers | paper-scale GPU runs published |", "|---|---|---|"]
    for name in names:
        path = executed_path(name, scale)
        summary, gpu = "not executed in this build", ""
        if path.exists():
            published = read_published(path)
            summary = str(published.get("scale_summary", "no scale summary published"))
            gpu = "" if "paper_scale_runs" not in published else str(published["paper_scale_runs"])
        rows.append(f"| [{name}](../notebooks/{name}.ipynb) | {summary.replace('|', '/')} | {gpu} |")
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
    api = site / "book" / "api.md"
    api.write_text(
        api.read_text() + "\n## Where each function is used\n\nGenerated from the pages' code by "
        "{py:obj}`lib.book.used_in_index` when the book is built.\n\n" + used_in_index(names) + "\n"
    )
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
    """Execute every notebook (or those in ``only``) at ``scale``, in book order, each shown with its
    place in the list (:func:`execute_notebook`); at the end, or when a page fails or the build is
    interrupted, a table of the pages with their time (:func:`timing_table`)."""
    names = only or notebook_names()
    for name in names:
        check_notebook(name)
    out, rows = [], []
    try:
        for i, name in enumerate(names, 1):
            start = time.monotonic()
            try:
                out.append(execute_notebook(name, scale, place=f"{i}/{len(names)}"))
            except BaseException:
                rows.append((name, time.monotonic() - start, "failed"))
                raise
            rows.append((name, time.monotonic() - start, "ran"))
    finally:
        print(timing_table(rows, scale, len(names)), flush=True)
    return out


def timing_table(rows: list[tuple[str, float, str]], scale: str, planned: int) -> str:
    """The book build's closing table: one line per page (name, time, "ran" or "failed"), the
    total, and how many of the ``planned`` pages did not run."""
    width = max([len(name) for name, _, _ in rows] + [len("total")])
    lines = [f"[calibook] pages at {scale} scale:"]
    lines += [f"  {name:<{width}}  {live.format_eta(sec):>7}  {status}" for name, sec, status in rows]
    lines.append(f"  {'total':<{width}}  {live.format_eta(sum(sec for _, sec, _ in rows)):>7}")
    if planned > len(rows):
        lines.append(f"  ({planned - len(rows)} of {planned} pages not run)")
    return "\n".join(lines)
