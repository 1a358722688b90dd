"""The GPU window code's imports point one way: calibook.gpu's modules and calibook.results form no cycle
(every import counted, those inside functions too), and calibook.results imports nothing of calibook.gpu."""

from __future__ import annotations

import ast
from pathlib import Path

import lib.config

ROOT = lib.config.repo_root()


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_the_gpu_modules_import_each_other_without_a_cycle() -> None:
    mods = {f"calibook.gpu.{p.stem}": p for p in (ROOT / "calibook" / "gpu").glob("*.py") if p.stem != "__init__"}
    mods["calibook.results"] = ROOT / "calibook" / "results.py"
    graph = {m: {i for i in _imports(p) if i in mods and i != m} for m, p in mods.items()}
    assert not {i for i in graph["calibook.results"] if i.startswith("calibook.gpu")}
    done: set[str] = set()

    def visit(m: str, path: tuple[str, ...]) -> None:
        assert m not in path, f"import cycle: {' -> '.join((*path, m))}"
        if m not in done:
            for n in sorted(graph[m]):
                visit(n, (*path, m))
            done.add(m)

    for m in sorted(graph):
        visit(m, ())
    assert graph["calibook.gpu.transfer"] == {"calibook.results"}  # the archives know the plan, not the queue
