"""Cross-references: every public lib function has a docstring, and every page a docstring names
("Used in: notebooks/<name>") is a page of the book."""

import importlib
import inspect
import pkgutil
import re

import lib
from lib.book import notebook_names

MODULES = [
    importlib.import_module(m.name)
    for m in pkgutil.walk_packages(lib.__path__, "lib.")
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


def test_functions_the_pages_use_name_a_page_in_their_docstring() -> None:
    from lib.book import lib_references
    from lib.config import repo_root

    unnamed = set()
    for page in notebook_names():
        for ref in lib_references(repo_root() / "notebooks" / f"{page}.ipynb"):
            module, _, name = ref.rpartition(".")
            obj = getattr(importlib.import_module(module), name, None)
            doc = inspect.getdoc(obj) or ""
            if obj is not None and "notebooks/" not in doc and "every notebook page" not in doc:
                unnamed.add(ref)
    assert not unnamed, f"docstrings that do not name the page introducing them: {sorted(unnamed)}"
