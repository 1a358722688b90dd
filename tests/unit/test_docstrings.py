"""Cross-references: every public lib function has a docstring, and every page a docstring names
("Used in: notebooks/<name>") is a page of the book."""

import importlib
import inspect
import pkgutil
import re

import calibook
import lib
from calibook.notebooks import notebook_names

MODULES = [
    importlib.import_module(m.name)
    for package in (lib, calibook)
    for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
    if not m.name.endswith("__main__")
]


def _public_functions():
    for module in MODULES:
        for name, obj in vars(module).items():
            if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            if obj.__module__ == module.__name__:
                yield f"{module.__name__}.{name}", obj


def test_every_public_function_and_class_has_a_docstring() -> None:
    missing = [name for name, obj in _public_functions() if not inspect.getdoc(obj)]
    assert not missing, f"public lib objects without a docstring: {missing}"


def test_pages_named_in_docstrings_exist() -> None:
    pages = set(notebook_names())
    named = set()
    for module in MODULES:
        named |= set(re.findall(r"notebooks/([a-z0-9_]+)", inspect.getsource(module)))
    assert named <= pages, f"docstrings name pages that do not exist: {sorted(named - pages)}"


def test_every_function_a_page_uses_is_documented_and_in_the_generated_index() -> None:
    """The "Used in" index is generated from the pages' code (calibook.book.used_in_index), never written
    by hand in docstrings, so it cannot drift; every function it lists has a docstring."""
    from calibook.book import lib_references, used_in_index
    from lib.config import repo_root

    rows = {line.split("`")[1]: line for line in used_in_index().splitlines() if line.startswith("| {py:obj}")}
    for page in notebook_names():
        for ref in lib_references(repo_root() / "notebooks" / f"{page}.ipynb"):
            module, _, name = ref.rpartition(".")
            assert inspect.getdoc(getattr(importlib.import_module(module), name)), f"{ref} has no docstring"
            assert f"notebooks/{page}.ipynb" in rows.get(ref, ""), f"{ref} ({page}) not in the index"
    handwritten = [m.__name__ for m in MODULES if "Used in:" in inspect.getsource(m)]
    assert not handwritten, f"hand-written 'Used in:' lines drift; the index is generated: {handwritten}"
