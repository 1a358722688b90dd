"""calibook.runs: results keyed by config and code version, verified on read, locked, resumable."""

import json
import multiprocessing as mp
import time

import numpy as np
import pytest

from calibook import runs


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))


def test_key_ignores_order_and_changes_with_values() -> None:
    assert runs.config_key({"a": 1, "b": 2}) == runs.config_key({"b": 2, "a": 1})
    assert runs.config_key({"a": 1}) != runs.config_key({"a": 2})


def test_key_changes_with_the_code_version() -> None:
    """A bumped code version never returns the old result (stale results after a code change)."""
    assert runs.Run("demo", {"seed": 0}, version=1).key != runs.Run("demo", {"seed": 0}, version=2).key
    calls = []
    runs.Run  # noqa: B018
    first = runs.cached_run("demo", {"seed": 0}, lambda r: calls.append(1) or {"v": 1})
    assert first["version"] == 0 and calls == [1]


def test_finished_run_is_loaded_not_recomputed() -> None:
    calls = []

    def compute(run):
        calls.append(run.key)
        return {"metric": 0.5}

    first = runs.cached_run("demo", {"seed": 0}, compute)
    second = runs.cached_run("demo", {"seed": 0}, compute)
    assert calls == [first["key"]] and second["metric"] == 0.5 == first["metric"]
    assert first["config"] == {"seed": 0} and "provenance" in first and "checksum" in first
    runs.cached_run("demo", {"seed": 1}, compute)
    assert len(calls) == 2


def test_checkpoint_round_trip_with_weights_only_and_cleanup() -> None:
    import torch

    from lib.engine.device import rng_state

    run = runs.Run("demo", {"seed": 3})
    assert run.load_checkpoint() is None
    run.save_checkpoint({"epoch": 2, "history": [1.0, 0.5], "rng": rng_state(), "w": torch.ones(2)})
    back = run.load_checkpoint()  # weights_only=True: RNG states are stored as tensors
    assert back["epoch"] == 2 and back["history"] == [1.0, 0.5] and torch.equal(back["w"], torch.ones(2))
    run.save_result({"ok": True})
    run.clear_checkpoint()
    assert run.done and run.load_checkpoint() is None


@pytest.mark.parametrize("damage", ["empty", "truncated", "edited", "garbage"])
def test_damaged_result_is_reported_and_recomputed(damage) -> None:
    calls = []
    rec = runs.cached_run("demo", {"seed": 5}, lambda r: calls.append(1) or {"metric": 0.25})
    path = runs.Run("demo", {"seed": 5}).result_path
    text = path.read_text()
    path.write_text(
        {
            "empty": "",
            "truncated": text[: len(text) // 2],
            "garbage": "\x00\x01 not json",
            "edited": text.replace("0.25", "0.99"),
        }[damage]
    )
    with pytest.warns(runs.CorruptEntryWarning, match=str(path.parent.name)):
        again = runs.cached_run("demo", {"seed": 5}, lambda r: calls.append(2) or {"metric": 0.25})
    assert calls == [1, 2] and again["metric"] == rec["metric"]


@pytest.mark.parametrize("content", [b"", b"garbage bytes", None])
def test_damaged_checkpoint_restarts_the_run(content) -> None:
    import torch

    run = runs.Run("demo", {"seed": 6})
    run.save_checkpoint({"epoch": 1, "w": torch.zeros(3)})
    raw = run.checkpoint_path.read_bytes()
    run.checkpoint_path.write_bytes(raw[: len(raw) // 2] if content is None else content)
    with pytest.warns(runs.CorruptEntryWarning, match="checkpoint"):
        assert run.load_checkpoint() is None
    assert not run.checkpoint_path.exists()


def test_artifacts_are_verified_and_committed_copies_win(tmp_path) -> None:
    def compute(r):
        r.save_arrays("preds", p=np.arange(4, dtype=np.float16))
        return {"ok": 1}

    rec = runs.cached_run("demo", {"seed": 7}, compute)
    assert rec["artifacts"]["preds"]["file"] == "preds.npz"
    np.testing.assert_array_equal(runs.load_artifact(rec, "preds")["p"], np.arange(4))
    # a damaged artifact is refused with its path, never silently read
    path = runs.Run("demo", {"seed": 7}).dir / "preds.npz"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.warns(runs.CorruptEntryWarning), pytest.raises(FileNotFoundError, match="looked in"):
        runs.load_artifact(rec, "preds")
    with pytest.raises(ValueError, match="name"):
        runs.load_artifact(rec, "nope")


def test_committed_result_wins_over_cache(tmp_path) -> None:
    run = runs.Run("demo", {"seed": 9})
    cached = run.save_result({"where": "cache"})
    committed = tmp_path / "results" / "somepage" / "demo" / f"{run.key}.json"
    committed.parent.mkdir(parents=True)
    body = runs.sign({**cached, "where": "committed"})
    committed.write_text(json.dumps(body))
    assert run.load_result()["where"] == "committed" and runs.is_committed(body)
    committed.write_text(json.dumps({**body, "where": "tampered"}))  # checksum no longer matches
    with pytest.warns(runs.CorruptEntryWarning):
        assert run.load_result()["where"] == "cache"


def _held_compute(cache: str, out: str, release: str) -> None:
    """A process asking for one run: it logs "computed" when it computes it (and then holds it until
    ``release`` exists) and "waiting" when it finds another process computing it."""
    import os
    from pathlib import Path

    os.environ["CALIBOOK_CACHE"] = cache
    from calibook import runs as r
    from lib.engine import progress

    def log(line: str) -> None:
        with open(out, "a") as fh:
            fh.write(line + "\n")

    progress.note = lambda msg, *a, **k: log("waiting") if "another process" in msg else None

    def compute(run):
        log("computed")
        while not Path(release).exists():
            time.sleep(0.05)
        return {"pid": os.getpid()}

    r.cached_run("demo", {"seed": 11}, compute)


def _wait_for(path, text: str, seconds: float = 60) -> None:
    end = time.monotonic() + seconds
    while not (path.exists() and text in path.read_text()):
        assert time.monotonic() < end, f"no {text!r} in {path} after {seconds} s"
        time.sleep(0.05)


def test_two_processes_on_one_run_compute_it_once(tmp_path) -> None:
    """The second process, started while the first computes the run, waits on the run's lock and
    loads the first one's result: each step is awaited, not timed (the first holds the run until the
    second has said it waits)."""
    import os

    out, release = tmp_path / "log.txt", tmp_path / "release"
    ctx = mp.get_context("spawn")
    args = (os.environ["CALIBOOK_CACHE"], str(out), str(release))
    first = ctx.Process(target=_held_compute, args=args)
    first.start()
    _wait_for(out, "computed")
    second = ctx.Process(target=_held_compute, args=args)
    second.start()
    _wait_for(out, "waiting")
    release.touch()
    for p in (first, second):
        p.join(60)
    assert [p.exitcode for p in (first, second)] == [0, 0]
    assert out.read_text().split() == ["computed", "waiting"]


def test_a_run_another_process_holds_says_so_then_waits_for_its_result(monkeypatch) -> None:
    """The lock is held elsewhere (another FileLock on the same file): the caller says so once,
    waits, and loads the result the holder saved instead of computing it."""
    import threading

    from filelock import FileLock

    run = runs.Run("demo", {"seed": 12})
    held, said = threading.Event(), threading.Event()
    notes: list[str] = []
    monkeypatch.setattr(runs.progress, "note", lambda text, **kw: notes.append(text) or said.set())

    def finish_elsewhere() -> None:
        with FileLock(str(run.lock().lock_file)):
            held.set()
            said.wait(30)
            run.save_result({"by": "the other process"})

    other = threading.Thread(target=finish_elsewhere)
    other.start()
    held.wait(30)
    got = runs.cached_run("demo", {"seed": 12}, lambda r: {"by": "us"})
    other.join(30)
    assert got["by"] == "the other process"
    assert notes == [f"run demo/{run.key}: another process is computing it; waiting for its result"]


def test_lib_silences_tqdm_ipywidgets_warning_only():
    """Long work shows progress (tqdm.auto bars); a kernel without ipywidgets would print tqdm's
    'IProgress not found' warning into every executed page, so importing lib filters that one warning."""
    import importlib
    import warnings

    import lib

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        importlib.reload(lib)
        warnings.warn_explicit(
            "IProgress not found. Please update jupyter and ipywidgets.",
            UserWarning,
            "tqdm/autonotebook.py",
            1,
            module="tqdm.autonotebook",
        )
        warnings.warn_explicit("another warning from tqdm", UserWarning, "tqdm/std.py", 1, module="tqdm.std")
    assert [str(w.message) for w in caught] == ["another warning from tqdm"]


def test_training_off_computes_nothing_and_names_the_missing_run() -> None:
    calls = []

    def compute(run):
        calls.append(1)
        return {"x": 1}

    with runs.training(False):
        with pytest.raises(runs.RunMissing, match="g/"):
            runs.cached_run("g", {"a": 1}, compute)
    assert calls == []
    assert runs.cached_run("g", {"a": 1}, compute)["x"] == 1  # training is back on outside the block
    with runs.training(False):
        assert runs.cached_run("g", {"a": 1}, compute)["x"] == 1  # a finished run is still read
    assert calls == [1]
    with pytest.raises(ValueError, match="allowed"):
        with runs.training("no"):
            pass


# ---- the cache follows the code (issue 25) ---------------------------------------------------------


def _write_group(src, name: str, group: str, body: str):
    """lib/<name>.py under the source tree ``src``: a module that makes the runs of ``group``."""
    mod = src / "lib" / f"{name}.py"
    mod.write_text(
        f"from lib.engine.cache import cached_run\n\n{body}\n\n\ndef make(compute):\n    return cached_run({group!r}, {{}}, compute)\n"
    )
    return mod


def _code_group(tmp_path, monkeypatch, clamp: str):
    """A run group 'probe' made by a module of a lib written under tmp_path (as a user edits lib): its
    fingerprint is computed from that tree as it is now."""
    from calibook import imports, versions

    src = tmp_path / "src"
    (src / "lib" / "engine").mkdir(parents=True, exist_ok=True)
    for init in ("lib/__init__.py", "lib/engine/__init__.py", "lib/engine/cache.py"):
        (src / init).write_text("")
    monkeypatch.setattr(imports, "SOURCE_ROOT", src)
    monkeypatch.setattr(versions, "VERSIONS_FILE", tmp_path / "versions.json")
    return _write_group(src, "probe_code", "probe", f"CLAMP = {clamp}\n\n\ndef value(x):\n    return min(x, CLAMP)")


def _probe_compute(calls):
    def compute(run):
        import importlib.util

        from calibook import imports

        spec = importlib.util.spec_from_file_location("probe_code", imports.SOURCE_ROOT / "lib" / "probe_code.py")
        probe_code = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(probe_code)
        calls.append(run.code)
        return {"value": probe_code.value(0.999)}

    return compute


def test_an_edit_of_code_a_run_depends_on_is_never_served_from_the_cache(tmp_path, monkeypatch) -> None:
    """Editing a constant of a module of the group (PROB_CLAMP in lib/moe/heads.py, say) recomputes the run;
    a docstring-only edit does not; the version (hand-bumped) did not change in between."""
    mod = _code_group(tmp_path, monkeypatch, "0.9")
    calls = []
    first = runs.cached_run("probe", {"seed": 0}, _probe_compute(calls))
    assert first["value"] == 0.9 and runs.cached_run("probe", {"seed": 0}, _probe_compute(calls)) == first
    assert len(calls) == 1
    mod.write_text(mod.read_text().replace("CLAMP = 0.9", "CLAMP = 0.5"))
    second = runs.cached_run("probe", {"seed": 0}, _probe_compute(calls))
    assert second["value"] == 0.5 and len(calls) == 2 and calls[0] != calls[1]
    assert second["key"] == first["key"] and second["code_fingerprint"] == calls[1]
    mod.write_text('"""A module docstring changes no result."""\n' + mod.read_text())
    assert runs.cached_run("probe", {"seed": 0}, _probe_compute(calls))["value"] == 0.5 and len(calls) == 2


def test_an_edit_of_another_groups_code_keeps_this_groups_cache(tmp_path, monkeypatch) -> None:
    _code_group(tmp_path, monkeypatch, "0.9")
    other = _write_group(tmp_path / "src", "other_code", "other", "X = 1")
    calls = []
    runs.cached_run("probe", {"seed": 0}, _probe_compute(calls))
    other.write_text(other.read_text().replace("X = 1", "X = 2"))
    runs.cached_run("probe", {"seed": 0}, _probe_compute(calls))
    assert len(calls) == 1


def test_committed_results_need_accepted_code(tmp_path, monkeypatch) -> None:
    """A committed record is used while its code and the live code are accepted for the version;
    after an edit that is not accepted it is ignored with one warning and the run is recomputed."""
    from calibook import versions

    mod = _code_group(tmp_path, monkeypatch, "0.9")
    versions.update()  # accept today's fingerprint of 'probe' (a temp versions.json)
    run = runs.Run("probe", {"seed": 1})
    rec = run.save_result({"value": "gpu"})
    committed = tmp_path / "results" / "page" / "probe" / f"{run.key}.json"
    committed.parent.mkdir(parents=True)
    committed.write_text(json.dumps(rec))
    import shutil

    shutil.rmtree(run.dir)  # only the committed copy is left
    calls = []
    assert runs.cached_run("probe", {"seed": 1}, _probe_compute(calls))["value"] == "gpu" and calls == []
    mod.write_text(mod.read_text().replace("0.9", "0.5"))
    runs._WARNED.clear()
    with pytest.warns(runs.StaleCodeWarning, match="committed results ignored"):
        assert runs.cached_run("probe", {"seed": 1}, _probe_compute(calls))["value"] == 0.5
    versions.update()  # the edit declared a refactor: both fingerprints are accepted
    assert runs.Run("probe", {"seed": 1}).load_result()["value"] == "gpu"
    versions.update(bump=("probe",))  # a new version: the key changes, the old record is not this run
    assert runs.Run("probe", {"seed": 1}).key != run.key


def test_versions_accept_a_refactor_and_bump_restarts(tmp_path, monkeypatch) -> None:
    from calibook import versions

    mod = _code_group(tmp_path, monkeypatch, "0.9")
    first = versions.update()["probe"]
    assert first["version"] == 1 and versions.stale_groups() == []
    mod.write_text(mod.read_text().replace("0.9", "0.8"))
    assert versions.stale_groups() == ["probe"]
    assert len(versions.update()["probe"]["accepted"]) == 2
    mod.write_text(mod.read_text().replace("0.8", "0.7"))
    bumped = versions.update(bump=("probe",))["probe"]
    assert bumped["version"] == 2 and bumped["accepted"] == [versions.fingerprint("probe")]


# ---- damaged files heal (issue 25) -----------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_a_damaged_cached_artifact_is_recomputed_once(damage) -> None:
    calls = []

    def compute(r):
        calls.append(1)
        r.save_arrays("predictions", p=np.linspace(0, 1, 50))
        return {"ok": 1}

    runs.cached_run("demo", {"seed": 12}, compute)
    path = runs.Run("demo", {"seed": 12}).dir / "predictions.npz"
    path.write_bytes(path.read_bytes()[:40]) if damage == "truncated" else path.unlink()
    with pytest.warns(runs.CorruptEntryWarning, match="predictions"):
        rec = runs.cached_run("demo", {"seed": 12}, compute)
    np.testing.assert_array_equal(runs.load_artifact(rec, "predictions")["p"], np.linspace(0, 1, 50))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # healed: the next run warns no more
        runs.cached_run("demo", {"seed": 12}, compute)
    assert calls == [1, 1]


def test_a_cached_record_never_reads_a_stale_committed_artifact(tmp_path) -> None:
    """When a committed record of the same key is ignored, the cached record's artifacts and its
    'committed' flag are its own (no warning about the other record's file)."""
    import warnings

    run = runs.Run("demo", {"seed": 13})
    run.save_arrays("p", x=np.ones(3))
    cached = run.save_result({"v": "cache"})
    other = tmp_path / "results" / "page" / "demo" / f"{run.key}.json"
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps(runs.sign({**cached, "v": "other"})))
    np.savez(other.with_name(f"{run.key}.p.npz"), x=np.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(runs.load_artifact(cached, "p")["x"], np.ones(3))
        assert not runs.is_committed(cached) and runs.is_committed(json.loads(other.read_text()))


def test_a_damaged_entry_is_told_to_the_terminal_too(monkeypatch, tmp_path) -> None:
    """A page shows the CorruptEntryWarning; the book runner's terminal gets the same line as a note."""
    from calibook import artifacts

    notes: list[tuple[str, dict]] = []
    monkeypatch.setattr(artifacts.progress, "note", lambda text, **kw: notes.append((text, kw)))
    with pytest.warns(artifacts.CorruptEntryWarning, match="truncated"):
        artifacts.warn(tmp_path / "result.json", "truncated", "recomputed")
    assert notes == [(f"warning: {tmp_path / 'result.json'}: truncated; recomputed", {"warned": True})]
