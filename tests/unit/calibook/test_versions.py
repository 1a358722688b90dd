"""calibook.versions: the code of every run group is fingerprinted; a change must be acknowledged."""

import pytest

from calibook import versions


def test_every_group_fingerprint_is_recorded():
    """Fails when the code that computes a group's runs changed without `python -m calibook.versions`
    (bump the group with --bump GROUP when results change, so cached and committed runs are redone)."""
    stale = versions.stale_groups()
    assert not stale, f"code of {stale} changed: run python -m calibook.versions [--bump GROUP]"


def test_fingerprint_ignores_docstrings_but_not_code(tmp_path, monkeypatch):
    import ast

    a = versions._strip_docstrings(ast.parse('def f():\n    """doc"""\n    return 1\n'))
    b = versions._strip_docstrings(ast.parse('def f():\n    """other words"""\n    return 1\n'))
    c = versions._strip_docstrings(ast.parse('def f():\n    """doc"""\n    return 2\n'))
    assert ast.dump(a) == ast.dump(b) != ast.dump(c)
    # a constant's attribute docstring is prose too; the constant's value is code
    d, e, g = (
        versions._strip_docstrings(ast.parse(src))
        for src in ('X = 1\n"""doc"""\n', 'X = 1\n"""other words"""\n', 'X = 2\n"""doc"""\n')
    )
    assert ast.dump(d) == ast.dump(e) != ast.dump(g)
    with pytest.raises(ValueError, match="group"):
        versions.fingerprint("nope")
    assert versions.code_version("moe") >= 1 and versions.code_version("unknown-group") == 0


def test_recorded_versions_and_accepted_fingerprints_are_read(tmp_path, monkeypatch):
    import json

    path = tmp_path / "versions.json"
    path.write_text(
        json.dumps(
            {
                "moe": {"version": 4, "accepted": ["abc"], "modules": []},
                "l2d_cifar10": {"version": 2, "accepted": ["x", "y"], "modules": []},
            }
        )
    )
    monkeypatch.setattr(versions, "VERSIONS_FILE", path)
    assert versions.code_version("moe") == 4 and versions.accepted_fingerprints("moe") == ("abc",)
    assert versions.accepted_fingerprints("l2d_cifar10") == ("x", "y")
    assert "moe" in versions.stale_groups()  # the live code is not "abc"
    assert versions.update()["moe"]["accepted"] == ["abc", versions.fingerprint("moe")]


def test_module_fingerprint_follows_the_file_as_it_is_now(tmp_path):
    mod = tmp_path / "lib" / "fp_probe_mod.py"
    mod.parent.mkdir()
    mod.write_text("X = 1\n")
    first = versions.module_fingerprint("lib.fp_probe_mod", tmp_path)
    mod.write_text('"""doc"""\nX = 1\n')
    assert versions.module_fingerprint("lib.fp_probe_mod", tmp_path) == first
    mod.write_text("X = 2\n")
    assert versions.module_fingerprint("lib.fp_probe_mod", tmp_path) != first
    with pytest.raises(ValueError, match="module"):
        versions.module_fingerprint("", tmp_path)


# ---- the groups and their code are read from the source (issue 38) -------------------------------


def _tree(tmp_path, files: dict[str, str]):
    for name, text in {"lib/__init__.py": "", "lib/engine/__init__.py": "", "lib/engine/cache.py": "", **files}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_run_makers_are_the_modules_that_call_cached_run_or_run_with_a_group(tmp_path):
    root = _tree(
        tmp_path,
        {
            "lib/a.py": 'from lib.engine.cache import cached_run\n\n\ndef f(c):\n    return cached_run("ga", {}, c)\n',
            "lib/b.py": 'GROUP = "gb"\n',
            "lib/c.py": "from lib.b import GROUP\nfrom lib.engine import cache\n\n\ndef f():\n    return cache.open_run(GROUP, {})\n",
            "lib/d.py": "import lib.b as b\n\n\ndef f():\n    from lib.engine.cache import open_run as R\n\n    return R(b.GROUP, {})\n",
            "lib/e.py": "def open_run(group, config):\n    return group\n\n\nopen_run(1, {})\n",  # not the run store's open_run
        },
    )
    assert versions.run_makers(root) == {"ga": ("lib.a",), "gb": ("lib.c", "lib.d")}
    (root / "lib/f.py").write_text(
        "from lib.engine.cache import cached_run\n\n\ndef f(g, c):\n    return cached_run(g, {}, c)\n"
    )
    with pytest.raises(ValueError, match=r"lib\.f, line 5: the group of this run is not a string literal"):
        versions.run_makers(root)


def test_a_groups_modules_are_the_import_closure_of_its_makers(tmp_path):
    root = _tree(
        tmp_path,
        {
            "lib/maker.py": "from lib.engine.cache import cached_run\nfrom lib import helper\n\n\n"
            'def f(c):\n    return cached_run("g", {}, c)\n',
            "lib/helper.py": "def h():\n    from lib.deep import X\n\n    return X\n",
            "lib/deep.py": "X = 1\n",
            "lib/unrelated.py": "import lib.deep\n",
        },
    )
    assert versions.group_modules("g", root) == (
        "lib",
        "lib.deep",
        "lib.engine",  # the seam to the run store, lib.engine.cache, makes no run: left out
        "lib.helper",
        "lib.maker",
    )
    first = versions.fingerprint("g", root)
    (root / "lib/unrelated.py").write_text("import lib.deep\n\nY = 2\n")
    assert versions.fingerprint("g", root) == first
    (root / "lib/deep.py").write_text('"""Prose changes no result."""\n\nX = 1\n')
    assert versions.fingerprint("g", root) == first
    (root / "lib/deep.py").write_text("X = 2\n")  # two imports away, inside a function
    assert versions.fingerprint("g", root) != first
    with pytest.raises(ValueError, match="group: unknown 'h'"):
        versions.fingerprint("h", root)


# A module on each group's run path, named by hand from what each group computes (not read from the
# code under test), and modules no run imports: the pages' plots, paper 3's cascades, the book's CLI,
# and the cache (it stores results, makes none; what it stores is versioned by RECORD_FORMAT).
ON_RUN_PATH = {
    "moe": ("lib/moe/heads.py", "lib/moe/grid.py", "lib/engine/packed.py", "lib/calibration/posthoc.py"),
    "l2d_gaussians": ("lib/l2d/surrogates.py", "lib/l2d/experiment.py", "lib/nets/backbones.py"),
    "l2d_cifar10": ("lib/l2d/surrogates.py", "lib/nets/wrn.py", "lib/nets/image_training.py"),
    "rr_backbone": ("lib/nets/image_training.py", "lib/nets/pretrained.py", "lib/engine/loop.py"),
    "rr_losses": ("lib/rr/losses.py", "lib/rr/weights.py", "lib/calibration/ece_kde.py"),
}
UNRELATED = ("lib/plots.py", "lib/ccc/cascade.py", "lib/page.py", "lib/moe/tables.py", "lib/engine/cache.py")


@pytest.fixture(scope="module")
def lib_copy(tmp_path_factory):
    import shutil

    from calibook import imports

    root = tmp_path_factory.mktemp("src")
    shutil.copytree(imports.SOURCE_ROOT / "lib", root / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _edited(root, rel: str, text: str) -> dict[str, str]:
    path = root / rel
    before = path.read_text()
    path.write_text(before + text)
    try:
        return {g: versions.fingerprint(g, root) for g in versions.run_makers(root)}
    finally:
        path.write_text(before)


def test_an_edit_on_each_groups_run_path_changes_its_key_and_only_where_imported(lib_copy):
    today = {g: versions.fingerprint(g, lib_copy) for g in versions.run_makers(lib_copy)}
    assert set(today) == set(ON_RUN_PATH)
    for group, paths in ON_RUN_PATH.items():
        for rel in paths:
            after = _edited(lib_copy, rel, "\n_PROBE = 1\n")
            assert after[group] != today[group], f"editing {rel} left {group}'s fingerprint as it was"
            module = rel.removesuffix(".py").replace("/", ".")
            assert {g for g in today if after[g] != today[g]} == {
                g for g in today if module in versions.group_modules(g, lib_copy)
            }
    for rel in UNRELATED:
        assert _edited(lib_copy, rel, "\n_PROBE = 1\n") == today, f"editing {rel} changed a run group's key"
    assert _edited(lib_copy, "lib/moe/heads.py", "\n\n# a comment\n") == today


def test_a_module_a_run_path_starts_to_import_counts_from_then_on(lib_copy):
    rel = "lib/rr/losses.py"
    before = (lib_copy / rel).read_text()
    try:
        (lib_copy / rel).write_text(before + "\n\ndef _probe():\n    import lib.plots\n\n    return lib.plots\n")
        assert "lib.plots" in versions.group_modules("rr_losses", lib_copy)
        first = versions.fingerprint("rr_losses", lib_copy)
        assert _edited(lib_copy, "lib/plots.py", "\n_PROBE = 1\n")["rr_losses"] != first
    finally:
        (lib_copy / rel).write_text(before)


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


def test_code_a_run_reaches_through_its_data_is_fingerprinted():
    """FGR's filtered rows of frozen features (``lib.moe.fgr.feature_batch``; once a method of the
    feature bundle that no run module imports, so an edit of its 5% was served from the stale cache)
    are in the moe group's import closure."""
    assert "lib.moe.fgr" in versions.group_modules("moe")
