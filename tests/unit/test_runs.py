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


def test_progress_bar_is_text_without_widgets(capsys, monkeypatch):
    """Long work shows progress: without ipywidgets the bar is tqdm's plain text bar (tqdm.auto
    would try the notebook widget and print a TqdmWarning into every executed page)."""
    import sys

    from lib.runs import progress_bar

    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets -> ImportError
    bar = progress_bar(range(5), desc="decoding", file=sys.stderr, mininterval=0)
    assert type(bar).__module__ == "tqdm.std"
    assert list(bar) == [0, 1, 2, 3, 4]
    err = capsys.readouterr().err
    assert "decoding" in err and "5/5" in err
