"""lib.engine.versions: the code of every run group is fingerprinted; a change must be acknowledged."""

import pytest

from lib.engine import versions


def test_every_group_fingerprint_is_recorded():
    """Fails when the code that computes a group's runs changed without `python -m lib.engine.versions`
    (bump the group with --bump GROUP when results change, so cached and committed runs are redone)."""
    stale = versions.stale_groups()
    assert not stale, f"code of {stale} changed: run python -m lib.engine.versions [--bump GROUP]"


def test_fingerprint_ignores_docstrings_but_not_code(tmp_path, monkeypatch):
    import ast

    a = versions._strip_docstrings(ast.parse('def f():\n    """doc"""\n    return 1\n'))
    b = versions._strip_docstrings(ast.parse('def f():\n    """other words"""\n    return 1\n'))
    c = versions._strip_docstrings(ast.parse('def f():\n    """doc"""\n    return 2\n'))
    assert ast.dump(a) == ast.dump(b) != ast.dump(c)
    with pytest.raises(ValueError, match="group"):
        versions.fingerprint("nope")
    assert versions.code_version("moe") >= 1 and versions.code_version("unknown-group") == 0
