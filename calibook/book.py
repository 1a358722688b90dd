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
import socket
import subprocess
import sys
import tempfile
import time
from unittest import mock
from pathlib import Path
from typing import Any

from lib.config import SCALES, repo_root
from lib.validation import check_choice
from lib.engine import progress as live
from calibook.notebooks import check_notebook, check_parameters, notebook_names, toc_entries
from calibook.pages import copies, copy_for, copy_named, get, page_of

BOOK_FILES = ("_config.yml", "_toc.yml")
BOOK_DIRS = ("book",)
SCALES_TABLE = Path("book") / "_scales_table.md"  # included by book/intro.md and book/scales.md
CLUSTER_TABLE = Path("book") / "_cluster_table.md"  # included by book/cluster.md
SETTINGS_TABLE = Path("book") / "_settings_table.md"  # included by book/scales.md


def build_dir(scale: str) -> Path:
    """Build folder for one scale: executed notebooks and the staged book go here."""
    check_choice(scale, SCALES, "scale")
    return repo_root() / "build" / scale


def executed_path(name: str, scale: str) -> Path:
    """Where the executed copy of notebook ``name`` at ``scale`` is written."""
    return build_dir(scale) / "notebooks" / f"{name}.ipynb"


def execute_notebook(
    name: str,
    scale: str = "cpu",
    parameters: dict[str, Any] | None = None,
    output: Path | None = None,
    progress: bool = True,
    place: str = "",
) -> Path:
    """Run ``notebooks/<name>.ipynb`` through papermill with ``scale`` and extra ``parameters`` (checked
    first) into ``output`` (default :func:`executed_path` of the page, or of its copy for those
    parameters, :func:`calibook.pages.copy_for`), replaced only on success: a failed run is
    kept as ``<name>.failed.ipynb`` and raises. Third-party progress bars stay out of the page; with
    ``progress`` the terminal shows the cells and the page's progress line, labelled with ``place``."""
    import papermill as pm

    check_choice(scale, SCALES, "scale")
    source = check_notebook(name)
    params = {"scale": scale, **check_parameters(name, scale, parameters or {})}
    copy = copy_for(name, params)  # the page's name, or its copy's (pacs-sketch)
    out = output or executed_path(copy, scale)
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(out)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.stem}.{_owner()}.", suffix=".running.ipynb", dir=out.parent)
    os.close(fd)
    tmp, failed = Path(tmp_name), out.with_name(f"{out.stem}.failed.ipynb")
    label = f"{place} {copy}".strip()
    start = time.monotonic()
    print(f"[calibook] {label} ({scale}): running", flush=True)
    try:
        env = {**QUIET_KERNEL_ENV, **({live.PREFIX: f"[{label}] "} if progress else {live.MODE: "off"})}
        with mock.patch.dict(os.environ, env):  # the papermill kernel's environment, restored afterwards
            pm.execute_notebook(
                str(source),
                str(tmp),
                parameters=params,
                cwd=str(repo_root()),
                kernel_name="python3",
                progress_bar={"desc": label, "disable": False} if progress else False,
                log_output=False,
                shutdown_kernel="immediate",  # every output is in by then; a graceful stop waits ~2 s
                extra_arguments=["--IPKernelApp.log_level=ERROR"],  # not ipykernel's TCP warning per page
            )
    except BaseException:  # a failed or interrupted run: keep it for reading, not as the page
        if tmp.exists():
            os.replace(tmp, failed)
            print(f"[calibook] {label} ({scale}) did not finish; the page as far as it ran: {failed}", flush=True)
        raise
    os.replace(tmp, out)
    failed.unlink(missing_ok=True)  # an earlier failure of this page is over
    print(f"[calibook] {label} ({scale}) ran in {live.format_eta(time.monotonic() - start)} -> {out}", flush=True)
    return out


def _host() -> str:
    """This machine's name as it stands in a hidden running copy's name (no dots)."""
    return socket.gethostname().replace(".", "_")


def _owner(pid: int | None = None) -> str:
    """``<pid>@<host>``: who writes a hidden running copy (a ``build/`` may be shared between machines)."""
    return f"{os.getpid() if pid is None else pid}@{_host()}"


def _remove_orphans(out: Path) -> None:
    """Remove the hidden ``.<page>.<pid>@<host>.*.running.ipynb`` copies of ``out`` that a process of
    this machine no longer alive left behind (killed with SIGKILL: nothing could keep them as a failed
    page); a running process's copy stays, and so does another machine's."""
    for tmp in out.parent.glob(f".{out.stem}.*@{_host()}.*.running.ipynb"):
        pid = tmp.name[len(out.stem) + 2 :].split("@")[0]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


QUIET_KERNEL_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", live.MODE: "terminal"}


def lib_references(notebook: Path) -> list[str]:
    """Fully qualified names of the ``lib`` functions and classes a notebook's code cells import or use
    (``from lib.x import f``; ``from lib import x`` then ``x.f``), resolved by importing."""
    import ast
    import importlib

    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    modules: dict[str, str] = {}  # alias -> module name
    names: set[str] = set()
    nodes = []
    for cell in nb.cells:
        with contextlib.suppress(SyntaxError):  # cell magics and the like
            nodes += list(ast.walk(ast.parse(cell.source))) if cell.cell_type == "code" else []
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "lib":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                try:
                    importlib.import_module(full)
                    modules[alias.asname or alias.name] = full
                except ImportError:
                    names.add(full)
    for node in nodes:
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


def _stage_notebook(notebook: Path) -> None:
    """Prepare a staged notebook for the reader: papermill's injected ``# Parameters`` cell is removed
    from the rendered page (tag ``remove-cell``; the real parameters cell stays) but on a copy of
    :func:`calibook.pages.copies`, whose parameters (``target = "sketch"``) it shows, and a closing cell
    links its page class and every ``lib`` function it uses to the API page (and from there to
    their source)."""
    import nbformat

    refs = lib_references(notebook)
    with contextlib.suppress(ValueError):  # not a page of the book (a copy under another name)
        page = type(get(page_of(notebook.stem)))
        refs = [f"{page.__module__}.{page.__qualname__}", *refs]
    nb = nbformat.read(str(notebook), as_version=4)
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags and notebook.stem == page_of(notebook.stem):
            cell.setdefault("metadata", {})["tags"] = [*tags, "remove-cell"]
    if refs:
        links = "\n".join(f"- {{py:obj}}`{name}`" for name in refs)
        nb.cells.append(
            nbformat.v4.new_markdown_cell(
                "## `lib` code used on this page\n\nEach links to its documentation on the "
                f"[API page](../book/api.md), and from there to its source:\n\n{links}\n"
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


API_SECTIONS: tuple[tuple[str, str], ...] = (
    ("calibration", "Metrics and post-hoc calibration (all papers)"),
    ("moe", "Paper 1: mixture of experts"),
    ("l2d", "Paper 2: learning to defer"),
    ("ccc", "Paper 3: calibration, cascading and cleaning"),
    ("rr", "Paper 4: reweighted risk"),
    ("cross_paper", "Across the papers"),
    ("nets", "Networks"),
    ("data", "Data"),
    ("features", "Features (networks applied to data, cached)"),
    ("engine", "The engine"),
)
"""Each package of ``lib`` with its section title on the API page, in the page's order (modules
directly under ``lib`` come after them, then ``calibook``, the machinery beside ``lib``)."""


def api_sections() -> str:
    """The API page's module sections, generated from the files under ``lib/`` (so the page lists
    every module and never one that is gone): one ``automodule`` per module, packages first."""
    root = repo_root() / "lib"
    known = {pkg for pkg, _ in API_SECTIONS}
    unknown = sorted(p.name for p in root.iterdir() if (p / "__init__.py").exists() and p.name not in known)
    if unknown:
        raise ValueError(f"lib: packages without a section on the API page (calibook.book.API_SECTIONS): {unknown}")

    def modules(folder: Path, prefix: str) -> list[str]:
        out = [prefix] if (folder / "__init__.py").exists() else []
        for path in sorted(folder.iterdir()):
            if path.suffix == ".py" and path.stem not in ("__init__", "__main__"):
                out.append(f"{prefix}.{path.stem}")
            elif path.is_dir() and (path / "__init__.py").exists():
                out += modules(path, f"{prefix}.{path.name}")
        return out

    parts = [(title, modules(root / pkg, f"lib.{pkg}")) for pkg, title in API_SECTIONS if (root / pkg).is_dir()]
    top = [f"lib.{p.stem}" for p in sorted(root.glob("*.py")) if p.stem not in ("__init__", "__main__")]
    parts.append(("lib's own modules", ["lib", *top]))
    parts.append(
        (
            "calibook: the machinery (runs, queue, GPU windows, results, ledger, book build)",
            modules(repo_root() / "calibook", "calibook"),
        )
    )
    text = []
    for title, mods in parts:
        text += [f"## {title}", "", "```{eval-rst}", *(f".. automodule:: {m}" for m in mods), "```", ""]
    return "\n".join(text)


def _scales_table(scale: str, names: list[str]) -> str:
    """One row per page: what produced its numbers in this build, and what produced the verdicts of
    the ledger's paper-scale column (the page's paper-scale copy, with the GPU runs published)."""
    from calibook.page import read_published

    def summary(name: str, at: str) -> tuple[str, str]:
        path = executed_path(name, at)
        if not path.exists():
            return "", ""
        got = read_published(path)
        runs = f"{got['paper_scale_runs']} GPU runs published" if "paper_scale_runs" in got else ""
        return str(got.get("scale_summary", "no scale summary published")), runs

    rows = ["| page | what produced its numbers | at paper scale (the ledger's column) |", "|---|---|---|"]
    for name in names:
        here, runs = summary(name, scale)
        there = summary(name, "paper")[0] if scale != "paper" else ""
        paper = "; ".join(x for x in (there.removeprefix("paper: "), runs) if x)
        cells = (here or "not executed in this build", paper)
        rows.append(f"| [{name}](../notebooks/{name}.ipynb) | " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(rows)


def _setting(value: Any) -> str:
    """A setting of ``lib/scales.toml`` as its table cell: TOML's spelling of booleans, lists unbracketed."""
    if isinstance(value, bool):
        return str(value).lower()
    return ", ".join(map(_setting, value)) if isinstance(value, list) else str(value)


def settings_table(names: list[str]) -> str:
    """Every setting of ``lib/scales.toml`` (:func:`lib.config.settings`) of the pages ``names``: per page,
    the settings that differ between scales as a table (one column per scale), then those alike at all."""
    from lib.config import SCALES, notebooks_with_settings, settings

    out = []
    for name in (n for n in names if n in notebooks_with_settings()):
        at = {s: settings(name, s) for s in SCALES}
        keys = [k for k in dict.fromkeys(k for s in SCALES for k in at[s]) if k != "scale"]
        cells = {k: [_setting(at[s][k]) if k in at[s] else "—" for s in SCALES] for k in keys}
        out += [f"### [{name}](../notebooks/{name}.ipynb)", "", "| setting | " + " | ".join(SCALES) + " |"]
        out += ["|---" * (len(SCALES) + 1) + "|"]
        out += [f"| `{k}` | " + " | ".join(c) + " |" for k, c in cells.items() if len(set(c)) > 1]
        alike = [f"`{k}` = {c[0]}" for k, c in cells.items() if len(set(c)) == 1]
        out += ["", f"At every scale: {'; '.join(alike)}." if alike else "", ""]
    return "\n".join(out)


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
        _stage_notebook(staged)
    shown = _stage_copies(site, scale, names)
    api = site / "book" / "api.md"
    api.write_text(
        api.read_text()
        + "\n"
        + api_sections()
        + "\n## Where each function is used\n\nGenerated from the pages' code by "
        "{py:obj}`calibook.book.used_in_index` when the book is built.\n\n" + used_in_index(names) + "\n"
    )
    from calibook.ledger import LEDGER_TABLE, ledger_markdown

    (site / LEDGER_TABLE).write_text(ledger_markdown(scale, shown, build_dir(scale).parent))
    (site / SCALES_TABLE).write_text(
        f"This build ran every notebook at the **`{scale}`** scale "
        f"(`python -m calibook book --scale {scale}`).\n\n" + _scales_table(scale, shown) + "\n"
    )
    (site / SETTINGS_TABLE).write_text(settings_table(names) + "\n")
    from calibook.gpu.cluster import plan_table

    (site / CLUSTER_TABLE).write_text(plan_table("paper") + "\n")  # the paper scale's jobs, GPU-hours
    return site


def _stage_copies(site: Path, scale: str, names: list[str]) -> list[str]:
    """Stage the executed copies of :func:`calibook.pages.copies` beyond each notebook's own (PACS's
    other held-out domains) that this build made, each a section under its notebook's entry of the
    staged ``_toc.yml`` titled by its parameters ("PACS, target sketch"), then the page's
    :meth:`~lib.page.Page.across_targets` of them all; returns every staged notebook in book order."""
    import yaml

    from calibook.page import read_published

    toc_path = site / "_toc.yml"
    toc, shown = yaml.safe_load(toc_path.read_text()), []
    entries = toc_entries(toc)
    for name in names:
        shown.append(name)
        for copy, params in copies(name)[1:]:
            if executed_path(copy, scale).exists():
                shutil.copy2(executed_path(copy, scale), site / "notebooks" / f"{copy}.ipynb")
                _stage_notebook(site / "notebooks" / f"{copy}.ipynb")
                title = ", ".join([get(name).title.split(":")[0], *(f"{k} {v}" for k, v in params.items())])
                entries[name].setdefault("sections", []).append({"file": f"notebooks/{copy}", "title": title})
                shown.append(copy)
        mine = [site / "notebooks" / f"{c}.ipynb" for c in shown if page_of(c) == name]
        if len(mine) > 1 and (text := get(name).across_targets([read_published(nb) for nb in mine])):
            (site / "notebooks" / f"{name}-all.md").write_text(text)
            entries[name]["sections"].append({"file": f"notebooks/{name}-all"})
    toc_path.write_text(yaml.safe_dump(toc, sort_keys=False))
    return shown


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


def paper_builds(scale: str = "cpu") -> list[str]:
    """The pages a book built at ``scale`` (below paper) also runs at paper scale, so that the ledger's
    paper-scale column holds their verdicts: the queued pages with paper-scale runs in ``results/``
    (seconds each: they read ``results/`` and train nothing), in queue order, and in a ``cpu`` build
    the pages whose paper scale needs no GPU (``Page.paper_on_cpu``: minutes in all; a smoke build
    stays quick)."""
    from calibook.pages import all_pages
    from calibook.results import PAGES, published

    names = [name for name in PAGES if published(name)]
    return names + [p.name for p in all_pages() if p.paper_on_cpu] if scale == "cpu" else names


def execute_all(scale: str, only: list[str] | None = None) -> list[Path]:
    """Execute every notebook in book order (or those in ``only``: notebooks, or copies by their name,
    ``pacs-sketch``) at ``scale``, each shown with its place in the list (:func:`execute_notebook`),
    then, below paper scale, those of them that
    :func:`paper_builds` names at paper scale (a paper-scale copy of any other page is removed, so the
    ledger never reads a stale one); at the end, or when a page fails or the
    build is interrupted, a table of the pages with their time (:func:`timing_table`)."""
    jobs = []
    for name in only or notebook_names():
        made = copy_named(name)  # a copy by its name runs alone (pacs-sketch)
        if made is None:
            check_notebook(name)
        asked = [(*made, scale)] if made else [(name, copy, p, scale) for copy, p in copies(name)]
        jobs += [job for job in asked if job[1] not in {j[1] for j in jobs}]  # pacs and pacs-sketch: once
    if scale != "paper":
        with_runs = paper_builds(scale)
        jobs += [(name, copy, params, "paper") for name, copy, params, _ in jobs if name in with_runs]
        for name, copy, _, _ in jobs:
            if name not in with_runs:
                executed_path(copy, "paper").unlink(missing_ok=True)
    out, rows = [], []
    try:
        for i, (name, copy, params, at) in enumerate(jobs, 1):
            start = time.monotonic()
            label = copy if at == scale else f"{copy} ({at})"
            try:
                out.append(execute_notebook(name, at, params, executed_path(copy, at), place=f"{i}/{len(jobs)}"))
            except BaseException:
                rows.append((label, time.monotonic() - start, "failed"))
                raise
            rows.append((label, time.monotonic() - start, "ran"))
    finally:
        print(timing_table(rows, scale, len(jobs)), flush=True)
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
