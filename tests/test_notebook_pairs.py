"""Notebook pairs: every notebooks/*.py has an output-free .ipynb twin with the same cells, and
every notebook has exactly one `parameters` cell of literals with type hints that includes `scale`."""

from __future__ import annotations

import ast

import jupytext
import nbformat
import pytest

from calibook.notebooks import notebook_names
from lib.config import SCALES, notebooks_with_settings, repo_root, settings

NOTEBOOKS = repo_root() / "notebooks"
NAMES = notebook_names()


def _cells(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_every_toc_notebook_has_a_pair() -> None:
    py = {p.stem for p in NOTEBOOKS.glob("*.py")}
    ipynb = {p.stem for p in NOTEBOOKS.glob("*.ipynb")}
    assert py == ipynb, f"unpaired notebooks: {sorted(py ^ ipynb)}"
    assert set(NAMES) <= py, f"toc notebooks without a source: {sorted(set(NAMES) - py)}"


@pytest.mark.parametrize("name", NAMES)
def test_pair_in_sync_and_output_free(name: str) -> None:
    text = jupytext.read(NOTEBOOKS / f"{name}.py")
    paired = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert _cells(text) == _cells(paired), (
        f"notebooks/{name}.py and .ipynb differ: run `jupytext --sync notebooks/{name}.py`"
    )
    for cell in paired.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, (
                f"notebooks/{name}.ipynb carries outputs: re-sync it from the .py source"
            )
    assert paired.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("name", NAMES)
def test_one_parameters_cell_of_typed_literals(name: str) -> None:
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{name}: expected one cell tagged 'parameters', found {len(tagged)}"
    source = tagged[0].source
    tree = ast.parse(source)
    names = []
    for stmt in tree.body:
        assert isinstance(stmt, ast.AnnAssign), f"{name}: parameters must be `name: type = literal`"
        ast.literal_eval(stmt.value)  # raises if the value is not a literal
        names.append(stmt.target.id)
    assert "scale" in names, f"{name}: the parameters cell needs `scale`"
    for line in source.splitlines():
        if line.strip():
            assert "#" in line, f"{name}: every parameter needs a comment: {line!r}"
    cells = nb.cells
    index = cells.index(tagged[0])
    assert cells[index - 1].cell_type == "markdown", f"{name}: the parameters cell needs prose before it"


@pytest.mark.parametrize("name", NAMES)
def test_prose_before_every_code_cell(name: str) -> None:
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "remove-cell" not in cell.metadata.get("tags", []):  # hidden setup
            assert i > 0 and nb.cells[i - 1].cell_type == "markdown", (
                f"{name}: code cell {i} has no sentence of prose before it"
            )


@pytest.mark.parametrize("name", NAMES)
def test_every_scale_is_configured(name: str) -> None:
    assert name in notebooks_with_settings(), f"lib/scales.toml has no entry for {name}"
    keys = [set(settings(name, scale)) for scale in SCALES]
    assert keys[0] == keys[1] == keys[2], f"{name}: scales define different settings: {keys}"


@pytest.mark.parametrize("name", NAMES)
def test_code_fits_the_rendered_column(name: str) -> None:
    """No code line wider than 88 columns (wider ones scroll sideways in the rendered book, issue
    #41), and a notebook stays thin: at most 150 code lines (issue #54: the formulas' hand-checked
    cases are the lecture's code; the rest lives in its page's module)."""
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    lines = [line for c in nb.cells if c.cell_type == "code" for line in c.source.splitlines() if line.strip()]
    wide = [line for line in lines if len(line) > 88]
    assert not wide, f"notebooks/{name}.py: {len(wide)} code lines over 88 columns, e.g. {wide[0]!r}"
    assert len(lines) <= 150, f"notebooks/{name}.py: {len(lines)} code lines (at most 150)"
