"""lib's layers point one way, its modules import no cycle (issue 38), and lib imports nothing of
calibook, the machinery beside it (issue 54).

Every import counts, at the top of a module or inside a function (calibook.imports reads them
from the source). The table below is the one CONTRIBUTING.md shows.
"""

from __future__ import annotations

from calibook import imports

BASE = {"lib", "lib.validation", "lib.config", "calibook.notebook_errors"}  # what every layer may use
PAPERS = ("moe", "l2d", "ccc", "rr")

#: lib's top-level package or module -> its layer (the ``pages`` package or module of a paper or of
#: the cross-paper chapter is in the pages layer).
LAYER_OF = {
    "calibration": "calibration",
    "data": "data",
    "engine": "engine",
    "nets": "nets",
    "features": "features",
    **dict.fromkeys(("report", "plots"), "presentation"),
    **dict.fromkeys(PAPERS, "papers"),
    "cross_paper": "cross_paper",
    "page": "pages",
}

#: layer -> the layers its modules may import (besides their own and BASE).
MAY_IMPORT: dict[str, set[str]] = {
    "base": set(),
    "calibration": set(),
    "data": set(),
    "engine": {"data"},
    "nets": {"data", "engine"},
    "features": {"data", "engine", "nets"},
    "presentation": {"calibration", "engine"},
    "papers": {"calibration", "data", "engine", "nets", "features", "presentation"},
}
MAY_IMPORT["cross_paper"] = MAY_IMPORT["papers"] | {"papers"}
MAY_IMPORT["pages"] = MAY_IMPORT["cross_paper"] | {"cross_paper"}


def layer(module: str) -> str:
    """The layer of a module of lib (see LAYER_OF)."""
    if module in BASE:
        return "base"
    parts = module.split(".")
    if parts[1] in (*PAPERS, "cross_paper") and len(parts) > 2 and parts[2] == "pages":
        return "pages"
    return LAYER_OF[parts[1]]


def _edges() -> list[tuple[str, str, int]]:
    return [(m, d, line) for m in imports.lib_modules() for d, line in imports.imported(m).items()]


def test_every_module_has_a_layer() -> None:
    unknown = [m for m in imports.lib_modules() if m not in BASE and m.split(".")[1] not in LAYER_OF]
    assert not unknown, f"modules of no layer (add their package to LAYER_OF and CONTRIBUTING.md): {unknown}"


def allowed(module: str, imported: str) -> bool:
    """Whether ``module`` may import ``imported``: a layer imports BASE, itself and MAY_IMPORT's
    layers; a paper imports no other paper (the cross-paper chapter and the pages import them all)."""
    lm, ld = layer(module), layer(imported)
    if lm == ld == "papers":
        return module.split(".")[1] == imported.split(".")[1]
    return ld in ("base", lm) or ld in MAY_IMPORT[lm]


def test_no_import_runs_back_up() -> None:
    bad = [f"{m} (line {line}, {layer(m)}) imports {d} ({layer(d)})" for m, d, line in _edges() if not allowed(m, d)]
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_lib_has_no_import_cycle() -> None:
    graph: dict[str, list[str]] = {m: [] for m in imports.lib_modules()}
    for m, d, _ in _edges():
        if d in graph and d != m:
            graph[m].append(d)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while not part or part[-1] != v:
                part.append(stack.pop())
            if len(part) > 1:
                cycles.append(sorted(part))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_the_rules_on_hand_made_edges() -> None:
    assert allowed("lib.nets.backbones", "lib.data.augment") and not allowed("lib.data.bundle", "lib.nets.wrn")
    assert allowed("lib.features.frozen", "lib.nets.backbones") and not allowed(
        "lib.nets.backbones", "lib.features.frozen"
    )
    assert allowed("lib.moe.heads", "lib.moe.robust") and not allowed("lib.rr.losses", "lib.moe.mocae")
    assert allowed("lib.moe.pages.pacs", "lib.moe.heads") and not allowed("lib.moe.heads", "lib.moe.pages.pacs")
    assert allowed("lib.cross_paper.pages.cross_paper", "lib.ccc.cascade") and not allowed(
        "lib.ccc.cascade", "lib.cross_paper.pages.cross_paper"
    )
    assert allowed("lib.data.jpeg", "lib.validation") and not allowed("lib.calibration.metrics", "lib.plots")


def test_the_checks_catch_an_arrow_up_and_a_cycle(monkeypatch) -> None:
    """The checks on a graph with two hand-made edges added: data importing a network, and two
    modules importing each other."""
    real = imports.imported

    def fake(module: str, root=None) -> dict[str, int]:
        extra = {"lib.data.bundle": {"lib.nets.backbones": 1}, "lib.nets.hub": {"lib.nets.wrn": 1}}
        extra["lib.nets.wrn"] = {"lib.nets.hub": 2}
        return {**real(module, root), **extra.get(module, {})}

    monkeypatch.setattr(imports, "imported", fake)
    for check, words in ((test_no_import_runs_back_up, "lib.data.bundle"), (test_lib_has_no_import_cycle, "hub")):
        try:
            check()
        except AssertionError as e:
            assert words in str(e)
        else:
            raise AssertionError(f"{check.__name__} passed on a bad graph")


def _imports_of(path) -> list[tuple[str, int]]:
    """Every module ``path``'s source imports (``import``, ``from ... import``, ``importlib.import_module``
    with a literal name), at the top or inside a function, with its line."""
    import ast

    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, node.lineno))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            out.append((str(node.args[0].value), node.lineno))
    return out


def _calibook_imports(root) -> list[str]:
    return [
        f"{p.relative_to(root)}:{line} imports {name}"
        for p in sorted((root / "lib").rglob("*.py"))
        for name, line in _imports_of(p)
        if name == "calibook" or name.startswith("calibook.")
    ]


def test_lib_imports_nothing_of_calibook() -> None:
    bad = _calibook_imports(imports.SOURCE_ROOT)
    assert not bad, "lib imports the machinery (move the code to calibook, or pass it in):\n" + "\n".join(bad)


def test_the_seam_check_catches_an_import(tmp_path) -> None:
    """The check on a copy of a tiny lib with one import of calibook inside a function, and one by name."""
    (tmp_path / "lib" / "x").mkdir(parents=True)
    (tmp_path / "lib" / "x" / "a.py").write_text("import os\n\ndef f():\n    from calibook.gpu import queue\n")
    (tmp_path / "lib" / "b.py").write_text("import importlib\nm = importlib.import_module('calibook.book')\n")
    found = _calibook_imports(tmp_path)
    assert found == ["lib/b.py:2 imports calibook.book", "lib/x/a.py:4 imports calibook.gpu"], found
