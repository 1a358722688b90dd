"""lib.runs: results keyed by config, computed once, checkpoints resumable."""

import json

import pytest

from lib import runs


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(runs, "results_dir", lambda: tmp_path / "results")


def test_key_ignores_order_and_changes_with_values() -> None:
    assert runs.config_key({"a": 1, "b": 2}) == runs.config_key({"b": 2, "a": 1})
    assert runs.config_key({"a": 1}) != runs.config_key({"a": 2})


def test_finished_run_is_loaded_not_recomputed() -> None:
    calls = []

    def compute(run):
        calls.append(run.key)
        return {"metric": 0.5}

    first = runs.cached_run("demo", {"seed": 0}, compute)
    second = runs.cached_run("demo", {"seed": 0}, compute)
    assert calls == [first["key"]] and second["metric"] == 0.5
    assert first["config"] == {"seed": 0} and "provenance" in first
    runs.cached_run("demo", {"seed": 1}, compute)
    assert len(calls) == 2


def test_checkpoint_round_trip_and_cleanup() -> None:
    run = runs.Run("demo", {"seed": 3})
    assert run.load_checkpoint() is None
    run.save_checkpoint({"epoch": 2, "history": [1.0, 0.5]})
    assert run.load_checkpoint() == {"epoch": 2, "history": [1.0, 0.5]}
    run.save_result({"ok": True})
    run.clear_checkpoint()
    assert run.done and run.load_checkpoint() is None


def test_committed_result_wins_over_cache(tmp_path) -> None:
    run = runs.Run("demo", {"seed": 9})
    run.save_result({"where": "cache"})
    run.committed.parent.mkdir(parents=True)
    run.committed.write_text(json.dumps({"where": "committed"}))
    assert run.load_result()["where"] == "committed"


def test_lib_silences_tqdm_ipywidgets_warning_only():
    """Long work shows progress (tqdm.auto bars); a kernel without ipywidgets would print tqdm's
    'IProgress not found' warning into every executed page, so importing lib filters that one warning."""
    import importlib
    import warnings

    import lib

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        importlib.reload(lib)  # runs lib/__init__, which installs the filter (inside this scope)
        warnings.warn_explicit("IProgress not found. Please update jupyter and ipywidgets.", UserWarning,
                               "tqdm/autonotebook.py", 1, module="tqdm.autonotebook")
        warnings.warn_explicit("another warning from tqdm", UserWarning, "tqdm/std.py", 1, module="tqdm.std")
    assert [str(w.message) for w in caught] == ["another warning from tqdm"]
