"""calibook.gpu.window and the queue's deadline: one command per call that cannot waste a call.

A call is cut by a hard deadline at an epoch boundary (fake clock) and resumes where it stopped;
with a benchmark of the device it trains only the runs whose stacks end in the time left; an
out-of-memory error halves the stack; it publishes what a cut call left in the cache, exports what
it published, and runs with the optional packages absent (no page named, too); PACS without its
weights is refused; bad input is one line and a non-zero exit.
"""

from __future__ import annotations

import re

import json
import sys
import tarfile
import time

import pytest
import torch

import lib.config
import calibook.gpu.queue as q
from calibook.runs import Run
from calibook.gpu import cluster, projection, transfer, window
from calibook.results import plan, select


@pytest.fixture()
def two_epochs(monkeypatch):
    """The smoke CIFAR-10H grid with 2 epochs (warmup 1), so a deadline can fall between epochs."""
    real = lib.config.settings

    def settings(page, scale, **overrides):
        cfg = dict(real(page, scale, **overrides))
        return {**cfg, "epochs": 2} if page == "cifar10h" else cfg

    monkeypatch.setattr(lib.config, "settings", settings)  # what the queue and every page read


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


def _ten_seconds_an_epoch(monkeypatch, clock):
    import lib.moe.train as mt

    real = mt.PreparedRun.mark

    def mark(self, epoch, entry, m):
        real(self, epoch, entry, m)
        clock.t += 10.0

    monkeypatch.setattr(mt.PreparedRun, "mark", mark)


def test_with_a_benchmark_only_runs_whose_stacks_end_in_time_start(results, two_epochs, monkeypatch):
    """Every run's epoch takes 10 s (fake clock) and the benchmark says so. Plan order: Single
    Expert, Vanilla, FGR, Robust, Robust Filtered, FGR + Robust, 2 epochs each. With 70 s left the
    first three (three stacks of one, 60 s) fit, Robust would share Vanilla's stack (80 s): the call
    trains those three, then stops before Robust with 10 s left, and no run is left half-trained.
    The queue then asks the next page (Sensitivity), whose runs do not fit either."""
    clock = FakeClock()
    _ten_seconds_an_epoch(monkeypatch, clock)
    b = projection.Bench({("cifar10h", "vanilla"): 10.0}, 8, "test", False, {("cifar10h", "vanilla"): 10.0})
    said: list[str] = []
    got = q.run_queue(["cifar10h", "sensitivity"], scale="smoke", clock=clock, deadline=70.0, log=said.append, sizing=b)
    # Sensitivity's Vanilla is CIFAR-10H's run (same key): published from the cache, not trained again
    assert [json.loads(p.read_text())["method"] for p in got] == ["single", "vanilla", "fgr", "vanilla"]
    assert clock.t == pytest.approx(60.0)
    assert "cifar10h: 3 run(s) in packs of at most 3, ~1.0 min (test)" in said
    assert [s for s in said if "no run left fits" in s] == [
        "cifar10h: no run left fits the 0.2 min left; the next, cifar10h/robust/lam2.0/w1/s0, takes ~0.3 min: "
        "they are the next call's",
        "sensitivity: no run left fits the 0.2 min left; the next, sensitivity/robust/lam0.5/w1/s0, takes ~0.3 min: "
        "they are the next call's",
    ]
    from lib.moe import experiment as exp
    import lib.moe.train as mt

    data = exp.cifar10h_data(lib.config.settings("cifar10h", "smoke"))
    left = [it for it in q.plan(["cifar10h"], "smoke") if not it.done]
    assert [Run(mt.GROUP, mt.run_config(it.config, data)).load_checkpoint() for it in left] == [None] * 3


OOM = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
CUDNN = RuntimeError("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED\nmore lines")


@pytest.mark.parametrize(
    ("error", "lines"),
    [
        # a device that holds one run at a time: stacks of 8, 4 and 2 run out of memory
        (OOM, [f"cifar10h: out of memory in a pack of up to {n}: packs of {n // 2} from here" for n in (8, 4, 2)]),
        # as on the H200's benchmark: stacks of several runs raise otherwise; runs alone train
        (
            CUDNN,
            [
                "cifar10h: a pack of up to 8 failed (RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED): runs alone from here"
            ],
        ),
    ],
    ids=["out-of-memory halves the stack", "another error: runs alone"],
)
def test_a_stack_that_fails_goes_on_in_smaller_stacks_and_says_why(results, monkeypatch, error, lines):
    """Stacks of several runs raise ``error``, runs alone train: every run is published, and the
    lines name what happened."""
    import lib.moe.train as train

    real = train.fit_packed

    def fit_packed(members, *a, **k):
        if len(members) > 1:
            raise error
        return real(members, *a, **k)

    monkeypatch.setattr(train, "fit_packed", fit_packed)  # the grid's one loop, alone and packed
    said: list[str] = []
    got = q.run_queue(["cifar10h"], minutes=30, scale="smoke", stack=8, log=said.append)
    assert len(got) == 6 and all(it.done for it in q.plan(["cifar10h"], "smoke"))
    assert [s for s in said if "out of memory" in s or "failed" in s] == lines


def test_stacks_hold_at_most_what_the_benchmark_measured(results):
    """A benchmark that measured runs alone only (the H200's first, its stacks having failed) sizes
    stacks of one: the queue never stacks more runs than a benchmark showed the device trains."""
    b = projection.Bench({("cifar10h", "vanilla"): 0.1, ("cifar10h", "fgr"): 0.2}, 1, "test", False)
    said: list[str] = []
    q.run_queue(["cifar10h"], minutes=30, scale="smoke", log=said.append, sizing=b)
    sizes = [s for s in said if "in packs of at most" in s]
    assert sizes and all("in packs of at most 1," in s for s in sizes)


@pytest.mark.parametrize(
    ("stack", "measured", "pages", "stacks"),
    [
        (None, 1, ["cifar10h", "sensitivity"], False),  # the H200's benchmark: every run alone
        (None, 8, ["cifar10h"], True),
        (None, None, ["cifar10h"], True),  # no benchmark sizes the call: the page's stacks
        (None, 1, ["cifar10h", "wrn_l2d"], True),  # a page without a benchmark trains its own way
        (4, 1, ["cifar10h"], True),
        (1, 8, ["cifar10h"], False),
    ],
)
def test_the_self_test_checks_stacks_only_when_the_call_may_stack(stack, measured, pages, stacks, monkeypatch):
    """The H200 stopped a call in the stacked self-test (vmap could not query channels_last) although
    the benchmark had every run train alone: the self-test checks what the call trains."""
    import argparse

    bench = {p: type("P", (), {"bench": p != "wrn_l2d"})() for p in pages}
    monkeypatch.setattr(window, "get_page", bench.__getitem__)
    sizing = None if measured is None else projection.Bench({("cifar10h", "vanilla"): 0.1}, measured, "test", False)
    assert window._stacks(argparse.Namespace(stack=stack), sizing, pages) is stacks


def test_a_machine_whose_stacks_fail_the_self_test_trains_every_run_alone(results, monkeypatch, capsys):
    """As on the H200 (batch norm under vmap raised): a failed stacked self-test is said in one line,
    the runs alone are checked instead, and the call goes on with stacks of one."""
    asked = []

    def selftest(stacked: bool = True) -> str:
        asked.append(stacked)
        if stacked:
            raise RuntimeError("NYI: querying is_contiguous inside of vmap\nmore")
        return "self-test: 4 runs alone"

    monkeypatch.setattr(window, "run_selftest", selftest)
    stacks = []
    monkeypatch.setattr(q, "run_queue", lambda *a, **k: stacks.append(a[3]) or [])
    assert window.main(["cifar10h", "--scale", "smoke", "--minutes", "5"]) == 0
    out = capsys.readouterr().out
    assert "self-test: stacks failed (RuntimeError: NYI: querying is_contiguous inside of vmap); " in out
    assert "this call trains every run alone\nself-test: 4 runs alone\n" in out
    assert asked == [True, False] and stacks == [1]


def test_runs_train_in_processes_at_once_each_its_share_and_the_call_exports_them_all(
    results, tmp_path, capsys, monkeypatch
):
    """A benchmark that measured 2 processes at once to pay (1.2x slower each): on the CPU at smoke
    scale the call starts two processes (``python -m calibook paper --runs ...``) that train a share each,
    in plan order, and publish; it says their lines with their number, exports every record, and each
    record says it was trained beside another."""
    slow = projection.bench(
        {
            "device": "NVIDIA H200",
            "workers": [{"method": "vanilla", "workers": 2, "alone_seconds_per_step": 1.0, "seconds_per_step": 1.2}],
        },
        "epoch_cuda-test.json",
    )
    assert slow.workers == 2
    monkeypatch.setattr(window, "_sizing", lambda args, pages: slow)
    log, out = tmp_path / "window.log", tmp_path / "out" / "results.tgz"
    argv = ["cifar10h", "--scale", "smoke", "--no-selftest", "--export", str(out), "--log", str(log)]
    assert window.main(argv) == 0
    said = capsys.readouterr().out
    assert "workers: 2 processes at once, 3, 3 run(s) each" in said
    for i in (1, 2):
        assert f"worker {i}: published cifar10h/" in said and f"worker {i}: left: 0 run(s)" in said
    assert all(it.done for it in q.plan(["cifar10h"], "smoke"))
    records = [json.loads(p.read_text()) for p in results.glob("cifar10h/moe/*.json")]
    assert len(records) == 6 and {r["queue"]["workers"] for r in records} == {2}
    with tarfile.open(out) as tar:
        assert len([n for n in tar.getnames() if n.endswith(".json")]) == 6


def test_a_worker_that_fails_is_said_and_the_call_goes_on(results, monkeypatch):
    """A worker process that exits non-zero: its lines and its exit status are said, nothing it did
    not publish is exported, and the call goes on (its runs are the call's or the next call's)."""
    import argparse
    import subprocess
    import types

    real = subprocess.Popen
    started = []

    def popen(cmd, **kw):
        started.append(cmd)
        return real([sys.executable, "-c", "print('loading'); raise SystemExit(3)"], **kw)

    # window's own view of the module only: patching subprocess.Popen itself would also catch the
    # session's background smoke runs (tests/conftest.py), started from another thread meanwhile
    fake = types.SimpleNamespace(**{k: getattr(subprocess, k) for k in ("PIPE", "DEVNULL", "STDOUT")}, Popen=popen)
    monkeypatch.setattr(window, "subprocess", fake)
    said, published = [], []
    items = [it for it in q.plan(["cifar10h"], "smoke") if not it.done][:2]
    args = argparse.Namespace(scale="smoke", stack=None, log=None)
    window._run_workers(args, ["cifar10h"], [items[:1], items[1:]], 2, time.monotonic() + 60, said.append, published)
    assert [c[c.index("--runs") + 1] for c in started] == [items[0].id, items[1].id]
    assert all(c[c.index("--workers") + 1] == "2" and "--deadline-in" in c for c in started)
    assert sorted(said) == sorted(
        [f"worker {i}: loading" for i in (1, 2)]
        + [f"worker {i}: ended with exit status 3; its runs left stay in the queue" for i in (1, 2)]
    )
    assert published == []


def test_shares_keep_shared_runs_together_and_balance_the_projected_time(results, monkeypatch):
    """Greedy by plan order: each configuration's runs (pages share runs) go to the share with the
    least projected time so far; a count of processes the benchmark did not measure is refused."""
    import argparse

    items = [it for it in q.plan(["cifar10h", "sensitivity"], "smoke") if not it.done]
    assert len(items) >= 4  # an empty results/ (the fixture): the loops below check something
    shares = window._shares(items, 3, None)
    assert sorted(it.id for s in shares for it in s) == sorted(it.id for it in items)
    where = {it.id: i for i, s in enumerate(shares) for it in s}
    for a in items:
        for b in items:
            if repr(a.config) == repr(b.config):
                assert where[a.id] == where[b.id], (a.id, b.id)
    sizes = [len({repr(it.config) for it in s}) for s in shares]
    assert max(sizes) - min(sizes) <= 1  # one unit per configuration without a benchmark
    b = projection.Bench({("cifar10h", "vanilla"): 1.0}, 1, "test", False, slowdowns={2: 1.2})
    with pytest.raises(
        ValueError, match=r"workers: 4 processes at once were not measured on this device \(measured: 2\)"
    ):
        window._workers(argparse.Namespace(workers=4), b)
    assert window._workers(argparse.Namespace(workers=2), b) == 2 and b.slowdown == 1.2
    assert window._workers(argparse.Namespace(workers=None), None) == 1


def test_pacs_without_its_weights_is_refused_not_planned_from_scratch(results, monkeypatch):
    import lib.nets.backbones as bb

    monkeypatch.setattr(bb, "weights_available", lambda spec: False)
    items = q.plan(["pacs"], "paper")
    assert {it.config.pretrained for it in items} == {False}  # what the plan would be without .weights
    with pytest.raises(q.PageSkipped, match="pacs cannot run here: its settings ask for ImageNet weights"):
        q.load_data(items, "paper", strict=True)
    said: list[str] = []
    assert q.load_data(items, "paper", log=said.append) == {} and said[0].startswith("skipped pacs: ")
    monkeypatch.setattr(bb, "weights_available", lambda spec: spec == "imagenet_efficientnet_lite0")
    assert q.cannot_run(q.plan(["pacs"], "paper"), lib.config.settings("pacs", "paper")) is None


def test_a_target_trains_only_its_runs_and_an_unknown_one_is_one_line(results, monkeypatch, capsys):
    """``--target sketch``: the queue is handed only PACS's sketch runs (the user's own command's
    target first); a target no page has is refused before anything is unpacked or trained."""
    asked = []
    monkeypatch.setattr(window, "run_selftest", lambda **k: "self-test: ok")
    monkeypatch.setattr(q, "run_queue", lambda *a, **k: asked.append(k["only"]) or [])
    assert window.main(["pacs", "--scale", "smoke", "--minutes", "5", "--target", "sketch"]) == 0
    want = {it.id for it in q.plan(["pacs"], "smoke") if it.target == "sketch"}
    assert asked == [want] and want and all("/sketch/" in i for i in want)
    assert window.main(["pacs", "--scale", "smoke", "--target", "clipart"]) == 2
    err = capsys.readouterr().err
    assert "target: 'clipart' is not a target of pacs; valid: ['art_painting', 'cartoon', 'photo', 'sketch']" in err


def test_runs_finished_in_the_cache_are_published_on_the_next_call(results, monkeypatch, tmp_path):
    first = q.run_queue(["cifar10h"], minutes=30, scale="smoke", log=lambda s: None)
    import shutil

    shutil.rmtree(results)  # the call ended before it published (its runs are in the cache)
    import lib.moe.train as train

    monkeypatch.setattr(train, "fit_packed", lambda *a, **k: pytest.fail("trained a finished run again"))
    again = q.run_queue(["cifar10h"], minutes=30, scale="smoke", log=lambda s: None)
    assert sorted(p.name for p in again) == sorted(p.name for p in first)
    stamp = [p.stat().st_mtime_ns for p in again]
    rec = json.loads(again[0].read_text())
    assert rec["queue"]["scale"] == "smoke"
    assert q.publish(rec, "cifar10h", rec["queue"]["id"]) == again[0]  # idempotent: left as it is
    assert [p.stat().st_mtime_ns for p in again] == stamp
    assert not list(results.rglob("*.tmp"))  # atomic writes leave no temporary files

    # export what was published into one archive; it imports back into an empty results/
    archive = tmp_path / "out" / "results.tgz"
    assert transfer.export(again, archive) == [archive]
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert all(n.startswith("cifar10h/moe/") for n in names) and len(names) == 12  # record + predictions
    shutil.rmtree(results)
    copied = transfer.import_results(archive, "smoke")
    assert len(copied) == 12 and all(it.done for it in q.plan(["cifar10h"], "smoke"))


def test_the_window_command_exports_what_it_published_when_an_error_ends_it(results, tmp_path, capsys, monkeypatch):
    """The Single Expert (trained alone) is published, then the first stack fails and so does its
    first run alone: the command exits 1 with one line and its archive holds the published record;
    its log holds every line."""
    import lib.moe.grid as grid
    import lib.moe.train as mt

    def boom(*a, **k):
        raise RuntimeError("CUDA error: an illegal memory access")

    real = mt.fit_alone
    monkeypatch.setattr(grid, "fit_runs", boom)  # every pack
    monkeypatch.setattr(  # every run alone (the grid's compute_run) but the Single Expert
        mt, "fit_alone", lambda pr, *a, **k: real(pr, *a, **k) if pr.cfg.method == "single" else boom()
    )
    out = tmp_path / "r.tgz"
    log = tmp_path / "OUT" / "window.log"
    argv = ["cifar10h", "--scale", "smoke", "--minutes", "5", "--no-selftest", "--export", str(out), "--log", str(log)]
    code = window.main(argv)
    captured = capsys.readouterr()
    assert code == 1 and captured.err.count("\n") == 1 and "RuntimeError: CUDA error" in captured.err
    assert "exported 1 record(s)" in captured.out and captured.out.startswith("machine: Python ")
    # the same lines, with the grid's progress lines between them, then whatever went to stderr
    lines = [x for x in log.read_text().splitlines(keepends=True) if not re.search(r": epoch \d+/\d+, ", x)]
    assert "".join(lines).startswith(captured.out)
    with tarfile.open(out) as tar:
        assert len([n for n in tar.getnames() if n.endswith(".json")]) == 1


def test_with_a_log_progress_goes_to_the_file_and_the_output_keeps_whole_lines(results, tmp_path, capsys, monkeypatch):
    """A data set whose loading draws a carriage-return bar on stderr (as tqdm does): with --log the
    bar lands in the log file, the call's output has none."""
    from lib.moe import experiment as exp

    real = exp.cifar10h_data

    def drawing(cfg):
        for pct in (0, 50, 100):
            sys.stderr.write(f"\rdecoding JPEGs: {pct}%")
        return real(cfg)

    monkeypatch.setattr(exp, "cifar10h_data", drawing)
    log = tmp_path / "OUT" / "window.log"
    assert window.main(["cifar10h", "--scale", "smoke", "--prepare", "--no-selftest", "--log", str(log)]) == 0
    captured = capsys.readouterr()
    assert "\r" not in captured.out + captured.err and "data cifar10h: synthetic-images " in captured.out
    assert b"\rdecoding JPEGs: 100%" in log.read_bytes()


def test_bad_input_is_one_line_and_a_non_zero_exit(results, monkeypatch, capsys, without_data):
    for argv in (["--minutes", "nan"], ["--minutes", "-1"], ["--minutes", "0"], ["--stack", "0"]):
        with pytest.raises(SystemExit) as exit_:
            window.main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "error: argument --" in err
    assert window.main(["--import", str(results / "nowhere")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert window.main(["nope", "--dry-run"]) == 2
    assert "unknown page 'nope'" in capsys.readouterr().err

    def missing(cfg, target):
        raise FileNotFoundError("cifar10h: not in any of the places searched")

    without_data(missing)  # a requested page without its data fails the call, before the self-test
    assert window.main(["cifar10h", "--scale", "smoke", "--minutes", "5"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "cifar10h cannot run here" in captured.err
    assert "self-test" not in captured.out
    monkeypatch.setattr(window, "missing", lambda pages: ["timm"])
    assert window.main(["pacs", "--scale", "smoke", "--no-selftest"]) == 2
    assert "missing timm" in capsys.readouterr().err


def test_a_one_at_a_time_page_without_its_data_is_skipped_or_fails_when_requested(results, monkeypatch, without_data):
    def missing(cfg, target):
        raise FileNotFoundError("cifar10: not in any of the places searched")

    without_data(missing)
    said: list[str] = []
    assert q.run_queue(["l2d_cifar10"], scale="smoke", log=said.append) == []
    assert said == [
        "skipped l2d_cifar10: cifar10: not in any of the places searched "
        "(a call carries the packs of its pages: results/README.md)"
    ]
    with pytest.raises(q.PageSkipped, match="l2d_cifar10 cannot run here"):
        q.run_queue(["l2d_cifar10"], scale="smoke", log=said.append, strict=True)


def test_target_and_runs_choose_the_same_runs_on_every_path(results, capsys):
    """``--target`` and ``--runs`` choose the runs of a lent-GPU call, of its dry run and of a cluster
    launch alike (calibook.results.select): a PACS launch for the sketch target submits only sketch
    runs, and a misspelled target or an unplanned run id is one line and exit 2 on every path."""
    items = plan(["pacs"], "smoke")
    sketch = select(items, target="sketch")
    assert sketch and {it.target for it in sketch} == {"sketch"} and len(sketch) < len(items)
    said: list[str] = []
    cluster.launch(["pacs"], "smoke", "local", target="sketch", dry_run=True, log=said.append)
    assert f"for {len(sketch)} run(s) of pacs" in said[0]
    for argv in (
        ["pacs", "--scale", "smoke", "--target", "skecth", "--dry-run"],
        ["pacs", "--scale", "smoke", "--target", "skecth", "--launch", "local", "--dry-run"],
        ["cifar10h", "--scale", "smoke", "--runs", "bogus", "--dry-run"],
        ["cifar10h", "--scale", "smoke", "--runs", "bogus", "--minutes", "1"],
    ):
        assert window.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and ("target: 'skecth'" in err or "runs: 'bogus'" in err), (argv, err)
    assert window.main(["pacs", "--scale", "smoke", "--target", "sketch", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "pacs/sketch/" in out and "pacs/photo/" not in out
