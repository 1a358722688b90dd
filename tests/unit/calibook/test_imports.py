"""calibook.imports: the import graph of lib read from the source, on hand-made trees."""

import pytest

from calibook import imports


def _tree(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.fixture()
def root(tmp_path):
    return _tree(
        tmp_path,
        {
            "lib/__init__.py": "from lib.base import X\n",
            "lib/base.py": "X = 1\n",
            "lib/p/__init__.py": "NAME = 'p'\n",
            "lib/p/a.py": "import os\nimport lib.p.b as bee\nfrom lib.p import c, NAME\n\n\n"
            "def f():\n    from lib.q.d import g\n\n    return g\n",
            "lib/p/b.py": "from . import c\nfrom .c import Y\n",
            "lib/p/c.py": "Y = 2\n",
            "lib/q/__init__.py": "from .. import base\n",
            "lib/q/d.py": "def g():\n    return 3\n",
            "lib/r.py": "import lib.p.a\n",
        },
    )


def test_modules_and_their_files(root):
    assert imports.lib_modules(root) == [
        "lib",
        "lib.base",
        "lib.p",
        "lib.p.a",
        "lib.p.b",
        "lib.p.c",
        "lib.q",
        "lib.q.d",
        "lib.r",
    ]
    assert imports.module_file("lib.p", root) == root / "lib/p/__init__.py"
    assert imports.module_file("lib.q.d", root) == root / "lib/q/d.py"
    with pytest.raises(ValueError, match="module: 'lib.zz' has no source"):
        imports.module_file("lib.zz", root)
    with pytest.raises(ValueError, match="module: expected a module of 'lib'"):
        imports.module_file("os.path", root)


def test_every_import_counts_with_its_line(root):
    """Top level and inside a function; `from lib.p import c, NAME` names the module c and the package
    (NAME is a value of its __init__); other packages' imports do not count."""
    assert imports.imported("lib.p.a", root) == {"lib.p.b": 2, "lib.p.c": 3, "lib.p": 3, "lib.q.d": 7}
    assert imports.imported("lib.p.b", root) == {"lib.p.c": 1}  # relative imports of a module
    assert imports.imported("lib.q", root) == {"lib.base": 1}  # relative import of a package's __init__
    assert imports.bindings("lib.p.a", root) == {
        "bee": ("lib.p.b", None),
        "c": ("lib.p.c", None),
        "NAME": ("lib.p", "NAME"),
        "g": ("lib.q.d", "g"),
    }


def test_the_closure_adds_what_is_imported_through_others_and_the_packages_above(root):
    assert imports.closure(["lib.r"], root) == (
        "lib",
        "lib.base",
        "lib.p",
        "lib.p.a",
        "lib.p.b",
        "lib.p.c",
        "lib.q",
        "lib.q.d",
        "lib.r",
    )
    assert imports.closure(["lib.p.b"], root) == ("lib", "lib.base", "lib.p", "lib.p.b", "lib.p.c")
    assert "lib.q.d" not in imports.closure(["lib.r"], root, skip=("lib.p.a",))


def test_an_edit_is_read_at_once(root):
    (root / "lib/p/c.py").write_text("from lib.r import *\n")
    assert imports.imported("lib.p.c", root) == {"lib.r": 1}
