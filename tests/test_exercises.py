"""Every exercise solution in the book's pages runs and its assertions hold."""

from __future__ import annotations

import re

import pytest

from lib.config import repo_root

BLOCK = re.compile(r":::\{dropdown\} Solution\n(.*?)\n:::", re.S)
CODE = re.compile(r"```python\n(.*?)```", re.S)


def _solutions() -> list[tuple[str, str]]:
    found = []
    for page in sorted((repo_root() / "book").rglob("*.md")):
        for i, block in enumerate(BLOCK.findall(page.read_text())):
            for code in CODE.findall(block):
                found.append((f"{page.relative_to(repo_root())}#{i + 1}", code))
    return found


SOLUTIONS = _solutions()


def test_every_paper_page_has_exercises() -> None:
    pages = {name.split("#")[0] for name, _ in SOLUTIONS}
    for paper in ("moe", "l2d", "ccc", "rr"):
        assert f"book/{paper}/overview.md" in pages


@pytest.mark.parametrize(("where", "code"), SOLUTIONS, ids=[s[0] for s in SOLUTIONS])
def test_solution_runs(where: str, code: str) -> None:
    exec(compile(code, where, "exec"), {})
