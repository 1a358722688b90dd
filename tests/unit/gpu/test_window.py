"""lib.gpu.window, lib.gpu.transfer and the queue's deadline: one command per call that cannot waste a window.

A window is cut by a hard deadline at an epoch boundary (fake clock), resumes on the next call,
publishes what a cut window left in the cache, exports what it published into one archive that
imports back, and runs with the notebook tools absent; bad input is one line and a non-zero exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import lib.config
import lib.gpu.queue as q
from lib.gpu import transfer
from lib.gpu import window
from lib.engine.runs import Run


@pytest.fixture()
def two_epochs(monkeypatch):
    """The smoke CIFAR-10H grid with 2 epochs (warmup 1), so a deadline can fall between epochs."""
    real = lib.config.settings

    def settings(page, scale, **overrides):
        cfg = dict(real(page, scale, **overrides))
        return {**cfg, "epochs": 2} if page == "cifar10h" else cfg

    monkeypatch.setattr(lib.config, "settings", settings)  # what every Page.settings reads


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_deadline_stops_at_an_epoch_boundary_and_the_next_call_resumes(results, two_epochs, monkeypatch):
    """Each run's epoch 'takes' 10 s on a fake clock. With a 70 s deadline the Single Expert (alone)
    finishes at 20 s and is published; the stack of Vanilla, Robust and Robust Filtered trains its
    first epoch (to 50 s) and does not start the second (30 s more would cross 70 s); the FGR stack
    does not start. The next call resumes the stack from its checkpoints and publishes the rest."""
    import lib.moe.train as mt

    clock, real = FakeClock(), mt.PreparedRun.mark

    def mark(self, epoch, entry, m):
        real(self, epoch, entry, m)
        clock.t += 10.0

    monkeypatch.setattr(mt.PreparedRun, "mark", mark)
    said: list[str] = []
    got = q.run_queue(["cifar10h"], scale="smoke", clock=clock, deadline=70.0, log=said.append)
    assert [json.loads(p.read_text())["method"] for p in got] == ["single"]
    assert any(s.startswith("deadline: ") for s in said) and clock.t == pytest.approx(50.0)
    items = {it.method: it for it in q.plan(["cifar10h"], "smoke")}
    from lib.moe import experiment as exp

    data = exp.cifar10h_data(lib.config.settings("cifar10h", "smoke"))
    epoch = {
        m: (Run(mt.GROUP, mt.run_config(it.config, data)).load_checkpoint() or {}).get("epoch")
        for m, it in items.items()
        if m != "single"
    }
    assert epoch == {"vanilla": 1, "robust": 1, "robust_filtered": 1, "fgr": None, "fgr_robust": None}
    got = q.run_queue(["cifar10h"], scale="smoke", clock=clock, deadline=clock.t + 1000.0, log=said.append)
    recs = {r["method"]: r for r in (json.loads(p.read_text()) for p in got)}
    assert sorted(recs) == ["fgr", "fgr_robust", "robust", "robust_filtered", "vanilla"]
    assert [recs[m]["resumed_from"] for m in ("vanilla", "robust", "robust_filtered", "fgr")] == [1, 1, 1, None]
    assert all(it.done for it in q.plan(["cifar10h"], "smoke"))


def test_runs_finished_in_the_cache_are_published_on_the_next_call(results, monkeypatch, tmp_path):
    first = q.run_queue(["cifar10h"], minutes=30, scale="smoke", log=lambda s: None)
    import shutil

    shutil.rmtree(results)  # the window ended before it published (its runs are in the cache)
    import lib.moe.grid as grid

    monkeypatch.setattr(grid, "fit_stack", lambda *a, **k: pytest.fail("trained a finished run again"))
    again = q.run_queue(["cifar10h"], minutes=30, scale="smoke", log=lambda s: None)
    assert sorted(p.name for p in again) == sorted(p.name for p in first)
    stamp = [p.stat().st_mtime_ns for p in again]
    rec = json.loads(again[0].read_text())
    assert q.publish(rec, "cifar10h", rec["queue"]["id"]) == again[0]  # idempotent: left as it is
    assert [p.stat().st_mtime_ns for p in again] == stamp
    assert not list(results.rglob("*.tmp"))  # atomic writes leave no temporary files

    # export what was published into one archive; it imports back into an empty results/
    archive = tmp_path / "out" / "results.tgz"
    assert transfer.export(again, archive) == 6
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert all(n.startswith("cifar10h/moe/") for n in names) and len(names) == 12  # record + predictions
    shutil.rmtree(results)
    copied = q.import_results(archive, "smoke")
    assert len(copied) == 12 and all(it.done for it in q.plan(["cifar10h"], "smoke"))

    # an empty archive, an empty folder and a folder one level off are refused with the reason
    empty = tmp_path / "empty.tgz"
    with tarfile.open(empty, "w:gz"):
        pass
    with pytest.raises(ValueError, match="holds no records"):
        q.import_results(empty, "smoke")
    (tmp_path / "nothing").mkdir()
    with pytest.raises(ValueError, match="holds no records"):
        q.import_results(tmp_path / "nothing", "smoke")
    nested = tmp_path / "nested"
    shutil.copytree(results, nested / "results")
    with pytest.raises(ValueError, match="one level deeper"):
        q.import_results(nested, "smoke")


def test_the_window_command_exports_what_it_published_when_an_error_ends_it(results, tmp_path, capsys, monkeypatch):
    """The Single Expert (trained alone) is published, then the first stack fails: the command exits
    1 with one line and its archive holds the published record."""
    import lib.moe.grid as grid

    def boom(*a, **k):
        raise RuntimeError("CUDA error: an illegal memory access")

    monkeypatch.setattr(grid, "fit_stack", boom)
    out = tmp_path / "r.tgz"
    code = window.main(
        [
            "cifar10h",
            "--scale",
            "smoke",
            "--minutes",
            "5",
            "--no-selftest",
            "--export",
            str(out),
            "--packs",
            str(tmp_path / "packs"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 1 and captured.err.count("\n") == 1 and "RuntimeError: CUDA error" in captured.err
    assert "exported 1 record(s)" in captured.out
    with tarfile.open(out) as tar:
        assert len([n for n in tar.getnames() if n.endswith(".json")]) == 1


def test_bad_input_is_one_line_and_a_non_zero_exit(results, monkeypatch, capsys, without_data):
    for argv in (["--minutes", "nan"], ["--minutes", "-1"], ["--minutes", "0"], ["--stack", "0"]):
        with pytest.raises(SystemExit) as exit_:
            window.main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "error: argument --" in err
    assert window.main(["--import", str(results / "nowhere")]) == 2
    assert capsys.readouterr().err.count("\n") == 1

    def missing(cfg, target):
        raise FileNotFoundError("cifar10h: not in any of the places searched")

    without_data(missing)  # a requested page without its data fails the call
    assert window.main(["cifar10h", "--scale", "smoke", "--no-selftest", "--minutes", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cifar10h cannot run here" in err
    monkeypatch.setattr(window, "missing", lambda pages: ["timm"])
    assert window.main(["pacs", "--scale", "smoke", "--no-selftest"]) == 2
    assert "missing timm" in capsys.readouterr().err


BLOCKER = """
import sys
BLOCKED = ("papermill", "altair", "nbformat", "myst_nb", "dill")  # not on the lent GPU machines
for name in BLOCKED:
    sys.modules[name] = None  # import raises ImportError, as if not installed
from lib.cli import main
code = main(sys.argv[1:])
assert all(sys.modules.get(name) is None for name in BLOCKED)
sys.exit(code)
"""


def test_the_paper_command_runs_without_the_notebook_tools(results, tmp_path):
    """In a subprocess where papermill, altair, nbformat, myst_nb and dill cannot be imported: the
    dry run, and a whole (deadline-cut) window with its self-test and export, exit 0."""
    env = {**os.environ, "PYTHONPATH": str(lib.config.repo_root())}

    def run(*a: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", BLOCKER, *a], env=env, capture_output=True, text=True, timeout=300)

    dry = run("paper", "cifar10h", "--scale", "smoke", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    out = tmp_path / "w.tgz"
    win = run(
        "paper",
        "cifar10h",
        "--scale",
        "smoke",
        "--minutes",
        "0.001",
        "--export",
        str(out),
        "--packs",
        str(tmp_path / "packs"),
    )
    assert win.returncode == 0, win.stderr
    assert "self-test: 4 runs stacked = alone" in win.stdout and Path(out).exists()
    bad = run("pack", "nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_a_one_at_a_time_page_without_its_data_is_skipped_or_fails_when_requested(results, monkeypatch, without_data):
    def missing(cfg, target):
        raise FileNotFoundError("cifar10: not in any of the places searched")

    without_data(missing)
    said: list[str] = []
    assert q.run_queue(["l2d_cifar10"], scale="smoke", log=said.append) == []
    assert said == ["skipped l2d_cifar10: cifar10: not in any of the places searched"]
    with pytest.raises(q.PageSkipped, match="l2d_cifar10 cannot run here"):
        q.run_queue(["l2d_cifar10"], scale="smoke", log=said.append, strict=True)
