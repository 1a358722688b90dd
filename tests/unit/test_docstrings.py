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
