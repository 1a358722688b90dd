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


def test_older_entries_count_as_one_accepted_fingerprint(tmp_path, monkeypatch):
    """An entry of the older form (one "fingerprint", e.g. from a branch not yet merged) still reads."""
    import json

    path = tmp_path / "versions.json"
    path.write_text(
        json.dumps(
            {
                "moe": {"version": 4, "fingerprint": "abc", "modules": []},
                "l2d_cifar10": {"version": 2, "accepted": ["x", "y"], "modules": []},
            }
        )
    )
    monkeypatch.setattr(versions, "VERSIONS_FILE", path)
    assert versions.code_version("moe") == 4 and versions.accepted_fingerprints("moe") == ("abc",)
    assert versions.accepted_fingerprints("l2d_cifar10") == ("x", "y")
    assert "moe" in versions.stale_groups()  # the live code is not "abc"
    assert versions.update()["moe"]["accepted"] == ["abc", versions.fingerprint("moe")]


def test_module_fingerprint_follows_the_file_as_it_is_now(tmp_path, monkeypatch):
    mod = tmp_path / "fp_probe_mod.py"
    mod.write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = versions.module_fingerprint("fp_probe_mod")
    mod.write_text('"""doc"""\nX = 1\n')
    assert versions.module_fingerprint("fp_probe_mod") == first
    mod.write_text("X = 2\n")
    assert versions.module_fingerprint("fp_probe_mod") != first
    with pytest.raises(ValueError, match="module"):
        versions.module_fingerprint("")


def test_canonical_form_is_the_same_on_every_python():
    """The written-out tree leaves out None and empty fields, so Python 3.12's empty ``type_params``
    (and 3.13's dump defaults) do not change it: this literal is what 3.11, 3.12 and 3.13 all give,
    which lets records made on a lent GPU machine (Python 3.12) match the code here."""
    import ast

    tree = ast.parse("def f(x):\n    return x\n")
    assert versions.canonical(tree) == (
        "Module(body=[FunctionDef(name='f',args=arguments(args=[arg(arg='x')]),"
        "body=[Return(value=Name(id='x',ctx=Load()))])])"
    )
    node = ast.parse("def g(): pass").body[0]
    node.extra = []  # a field a later Python adds empty: not written out
    node._fields = (*node._fields, "extra")
    assert versions.canonical(node) == "FunctionDef(name='g',args=arguments(),body=[Pass()])"


def test_made_by_current_code_needs_the_version_and_an_accepted_fingerprint(monkeypatch):
    monkeypatch.setattr(versions, "_recorded", lambda: {"g": {"version": 2, "accepted": ["aa", "bb"]}})
    assert versions.made_by_current_code({"group": "g", "version": 2, "code_fingerprint": "bb"})
    assert versions.made_by_current_code({"group": "g", "version": 2})  # written before fingerprints
    assert not versions.made_by_current_code({"group": "g", "version": 2, "code_fingerprint": "cc"})
    assert not versions.made_by_current_code({"group": "g", "version": 1, "code_fingerprint": "aa"})
    assert not versions.made_by_current_code({"version": 2})
