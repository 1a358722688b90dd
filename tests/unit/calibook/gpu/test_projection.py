"""calibook.gpu.projection: GPU-minutes and windows per page from a CUDA benchmark (stacked figures first)
and the recipe's training minutes, "cpu-extrapolated" where only the CPU one exists, and the runs one
call can finish (stack sizes from the measured epoch times)."""

from __future__ import annotations

import pytest

from calibook.gpu import projection as pj
from lib.moe.config import tiny_config
from calibook.results import plan

CUDA = {
    "device": "NVIDIA H100 80GB HBM3",
    "results": [{"name": "cifar10h", "method": m, "epoch_seconds": 6.0} for m in ("vanilla", "fgr")],
    "stacked": [
        {"name": "cifar10h", "method": "vanilla", "stack": 8, "run_epoch_seconds": 1.0, "channels_last": True},
        {"name": "cifar10h", "method": "vanilla", "stack": 8, "run_epoch_seconds": 3.0, "channels_last": False},
        {"name": "cifar10h", "method": "fgr", "stack": 8, "run_epoch_seconds": 2.0, "channels_last": True},
    ],
}


def test_minutes_and_sessions_from_a_stacked_cuda_benchmark(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    b = pj.bench(CUDA, "epoch_cuda-H100.json")
    assert not b.cpu_extrapolated and b.stack == 8
    assert b.epoch_seconds[("cifar10h", "vanilla")] == 1.0  # the layout the stacks use (channels_last)
    items = plan(["cifar10h"], "paper")
    # by hand: 5 seeds x 50 epochs; single, vanilla, robust, robust_filtered at the vanilla figure (1 s);
    # fgr and fgr_robust 20 warmup epochs at 1 s and 30 at 2 s; no run published from this GPU yet, so
    # a whole run is taken to cost 1.3x the step figures (the H200's largest measured ratio, 1.28)
    assert b.factor == pj.UNMEASURED_FACTOR == 1.3
    want = 1.3 * 5 * (4 * 50 * 1.0 + 2 * (20 * 1.0 + 30 * 2.0)) / 60
    assert pj.page_minutes(items, b) == pytest.approx(want)
    text = pj.describe(items, b)
    assert "GPU-minutes" in text and f"~{want:8.1f} min  {pj.sessions(want):3d} session(s)" in text
    # sessions count the training minutes the recipe leaves: calls of --minutes 7 and 4, less half a
    # minute of setup each and what each keeps to evaluate and export (a fifth of its minutes, at most 1.5)
    assert pj.SESSION_TRAIN_MINUTES == pytest.approx((7 - 0.5 - 1.4) + (4 - 0.5 - 0.8)) == 7.8
    assert pj.sessions(7.8) == 1 and pj.sessions(7.9) == 2 and pj.sessions(0) == 0
    assert f"{pj.SESSION_TRAIN_MINUTES:g} training minutes per 15-minute GPU session" in text


def test_without_a_cuda_benchmark_the_projection_says_cpu_extrapolated():
    b = pj.bench(
        {
            "device": "CPU (x86_64, 2 threads)",
            "results": [{"name": "cifar10h", "method": "vanilla", "epoch_seconds": 700.0}],
        },
        "epoch_cpu.json",
    )
    assert b.cpu_extrapolated
    text = pj.describe(plan(["cifar10h", "l2d_cifar10"], "paper"), b)
    assert "cpu-extrapolated" in text and "session(s)  " not in text and "(no benchmark" in text


def test_a_member_costs_its_alone_time_at_one_and_its_stacked_share_at_the_measured_size():
    b = pj.bench(CUDA, "epoch_cuda-H100.json")
    assert pj.member_epoch_seconds(b, "cifar10h", "vanilla", 1) == 6.0
    assert pj.member_epoch_seconds(b, "cifar10h", "vanilla", 8) == 1.0
    assert pj.member_epoch_seconds(b, "cifar10h", "vanilla", 64) == 1.0
    assert pj.member_epoch_seconds(b, "cifar10h", "fgr", 3) == pytest.approx(6.0 + (2.0 - 6.0) * 2 / 7)
    assert pj.member_epoch_seconds(b, "cifar10h", "robust", 8) == 1.0  # Vanilla's step
    assert pj.member_epoch_seconds(b, "pacs-224", "vanilla", 8) is None


def test_a_batch_is_the_longest_head_of_the_plan_whose_stacks_end_in_the_time_left():
    """Three runs of 10 epochs: Vanilla seeds 0 and 1 (one stack) and FGR seed 0 (a stack of its own,
    warmup 4). By hand, in stacks of 2: Vanilla's stack 2 x 10 x (6 - 5/7) s = 105.7 s; FGR alone
    4 x 6 + 6 x 6 = 60 s."""
    b = pj.bench(CUDA, "epoch_cuda-H100.json")
    b.factor = 1.0  # the step figures as they are (no whole run published to correct them by)
    van = [tiny_config("vanilla", s, epochs=10, warmup_epochs=0) for s in (0, 1)]
    fgr = tiny_config("fgr", 0, epochs=10, warmup_epochs=4)

    class It:
        def __init__(self, c):
            self.config = c

    items = [It(van[0]), It(van[1]), It(fgr)]
    two = 2 * 10 * (6.0 - 5.0 / 7)
    assert pj.batch_seconds(b, "cifar10h", van, 2) == pytest.approx(two)
    assert pj.batch_seconds(b, "cifar10h", van, 1) == pytest.approx(2 * 10 * 6.0)  # two stacks of one
    assert pj.batch_seconds(b, "cifar10h", [fgr], 8) == pytest.approx(60.0)
    runs, n, secs = pj.fit_batch(items, b, "cifar10h", two + 60.0)
    assert runs == items and n == 3 and secs == pytest.approx(two + 60.0)
    runs, n, secs = pj.fit_batch(items, b, "cifar10h", two + 59.0)  # FGR would end too late
    assert runs == items[:2] and n == 2
    assert pj.fit_batch(items, b, "cifar10h", 59.0)[0] == []  # not even one run
    runs, n, _ = pj.fit_batch(items, b, "cifar10h", 1e9, cap=1)  # an out-of-memory cap: stacks of one
    assert runs == items and n == 1
    assert pj.fit_batch(items, b, "pacs-224", 1e9) is None  # no figures for PACS: not sized


class _It:
    def __init__(self, config):
        self.config = config


def test_a_batch_skips_a_run_that_would_not_end_and_takes_a_later_one_that_does():
    """By hand, alone at 6 s an epoch: Vanilla for 20 epochs 120 s, FGR for 5 (warmup 2) 30 s. With
    100 s left the call skips Vanilla and trains FGR; with 150 s, both."""
    b = pj.bench(CUDA, "epoch_cuda-H100.json", runs={})
    b.factor = 1.0  # the step figures as they are
    long, short = (
        _It(tiny_config("vanilla", 0, epochs=20, warmup_epochs=0)),
        _It(tiny_config("fgr", 0, epochs=5, warmup_epochs=2)),
    )
    runs, n, secs = pj.fit_batch([long, short], b, "cifar10h", 100.0, cap=1)
    assert runs == [short] and n == 1 and secs == pytest.approx(30.0)
    assert pj.fit_batch([long, short], b, "cifar10h", 150.0, cap=1)[0] == [long, short]


def test_measured_runs_cost_what_they_took_and_scale_the_estimates_of_the_others():
    """Vanilla (10 epochs) took 90 s against an estimate of 10 x 6 = 60 s; FGR (10 epochs, warmup 4)
    72 s against 4 x 6 + 6 x 6 = 60 s: the factor is the larger ratio, 1.5. A measured run costs what it
    took; Vanilla for 20 epochs 20 x 6 x 1.5 = 180 s; FGR + Robust (warmup 4) 60 x 1.5 = 90 s."""
    runs = {("cifar10h", "vanilla", 10, 0): 90.0, ("cifar10h", "fgr", 10, 4): 72.0}
    b = pj.bench(CUDA, "epoch_cuda-H100.json", runs=runs)
    assert b.factor == pytest.approx(1.5) and b.stack == 8  # stacks (1 s, 2 s an epoch) still pay
    cost = lambda c: pj.batch_seconds(b, "cifar10h", [c], 1)  # noqa: E731
    assert cost(tiny_config("vanilla", 3, epochs=10, warmup_epochs=0)) == pytest.approx(90.0)
    assert cost(tiny_config("vanilla", 3, epochs=20, warmup_epochs=0)) == pytest.approx(180.0)
    assert cost(tiny_config("fgr_robust", 0, epochs=10, warmup_epochs=4)) == pytest.approx(90.0)


def test_stacks_are_left_out_where_a_run_alone_costs_about_as_much():
    """As on the H200: a stacked Vanilla run's epoch (1 s) costs more than 0.8 of what a whole run
    alone took per epoch (12 s / 10 epochs = 1.2 s): runs alone, at the alone figures."""
    b = pj.bench(CUDA, "epoch_cuda-H100.json", runs={("cifar10h", "vanilla", 10, 0): 12.0})
    assert b.stack == 1 and b.epoch_seconds == {("cifar10h", "vanilla"): 6.0, ("cifar10h", "fgr"): 6.0}
    assert pj.bench(CUDA, "epoch_cuda-H100.json", runs={("cifar10h", "vanilla", 10, 0): 13.0}).stack == 8


def _procs(*rows: tuple[str, int, float]) -> list[dict]:
    """bench_epoch.py --workers rows: (method, processes, seconds per step at once); alone: 1 s."""
    return [{"method": m, "workers": n, "alone_seconds_per_step": 1.0, "seconds_per_step": s} for m, n, s in rows]


def test_processes_at_once_are_used_where_they_pay_and_slow_each_run_by_the_slowest_method(tmp_path, monkeypatch):
    """By hand: 2 processes slow Vanilla's step 1.2x and FGR's 1.4x (the slower counts: 2 / 1.4 = 1.43
    >= 1.3); 4 slow them 3.0x and 2.5x (4 / 3.0 = 1.33): 2 processes pay most. A run then costs 1.4x
    its time alone and a page's minutes are halved; a failed count is left out; a 3-process count at
    2.5x (1.2 x the runs) does not pay."""
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    rows = _procs(("vanilla", 2, 1.2), ("fgr", 2, 1.4), ("vanilla", 4, 3.0), ("fgr", 4, 2.5))
    rows.append({"method": "vanilla", "workers": 8, "error": "RuntimeError: out of memory"})
    alone = {**CUDA, "stacked": []}
    b = pj.bench({**alone, "workers": rows}, "epoch_cuda-H100.json")
    b.factor = 1.0  # the step figures as they are
    assert b.slowdowns == {2: pytest.approx(1.4), 4: pytest.approx(3.0)} and b.workers == 2
    assert b.slowdown == pytest.approx(1.4)
    cfg = tiny_config("vanilla", 0, epochs=10, warmup_epochs=0)
    assert pj.run_seconds(b, "cifar10h", cfg) == pytest.approx(10 * 6.0 * 1.4)
    items = plan(["cifar10h"], "paper")
    one = pj.bench(alone, "epoch_cuda-H100.json")
    one.factor = 1.0
    assert one.workers == 1 and one.slowdown == 1.0
    assert pj.page_minutes(items, b) == pytest.approx(pj.page_minutes(items, one) * 1.4 / 2)
    assert "2 processes at once (each run 1.40 x as long)" in pj.describe(items, b)
    assert pj.bench({**alone, "workers": _procs(("vanilla", 3, 2.5))}, "epoch_cuda-H100.json").workers == 1


def test_runs_trained_beside_others_do_not_count_as_runs_alone(results):
    """A published run trained in one of several processes took longer than alone: the estimates of
    runs alone never learn from it."""
    import json

    from calibook.runs import sign

    folder = results / "cifar10h" / "moe"
    folder.mkdir(parents=True)
    for key, workers in (("a", 1), ("b", 2)):
        rec = {
            "device": "NVIDIA H100 80GB HBM3",
            "queue": {"page": "cifar10h", "id": key, **({"workers": workers} if workers > 1 else {})},
            "config": {"train": {"method": "vanilla" if key == "a" else "fgr", "epochs": 10, "warmup_epochs": 0}},
            "wall_time": {"train": 50.0},
        }
        (folder / f"{key}.json").write_text(json.dumps(sign(rec)))
    assert pj.measured_runs("NVIDIA H100 80GB HBM3") == {("cifar10h", "vanilla", 10, 0): 50.0}


def test_a_call_sizes_by_its_own_gpus_benchmark_where_one_is_committed(tmp_path, monkeypatch):
    """An H100's call must not be sized by the H200's figures because "H200" sorts last: the
    benchmark named for the device wins; a device without one gets the last by name."""
    import json

    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(pj, "repo_root", lambda: tmp_path)
    folder = tmp_path / "bench" / "results"
    folder.mkdir(parents=True)
    for name, secs in (("NVIDIA H100 80GB HBM3", 4.0), ("NVIDIA H200", 3.0)):
        body = {"device": name, "results": [{"name": "cifar10h", "method": "vanilla", "epoch_seconds": secs}]}
        (folder / f"epoch_cuda-{name.replace(' ', '_')}.json").write_text(json.dumps(body))
    assert pj.bench(device="NVIDIA H100 80GB HBM3").epoch_seconds[("cifar10h", "vanilla")] == 4.0
    assert pj.bench(device="NVIDIA A100-SXM4-40GB").epoch_seconds[("cifar10h", "vanilla")] == 3.0
    assert pj.bench().source.startswith("epoch_cuda-NVIDIA_H200.json")


PACKED = {
    "device": "NVIDIA H100 80GB HBM3",
    "results": [{"name": "cifar10h", "method": m, "epoch_seconds": 6.0} for m in ("vanilla", "fgr")],
    "packed": [
        {"name": "cifar10h", "method": "vanilla", "pack": 8, "compiled": False, "run_epoch_seconds": 1.5},
        {
            "name": "cifar10h",
            "method": "vanilla",
            "pack": 16,
            "compiled": True,
            "run_epoch_seconds": 1.0,
            "compile_seconds": 40.0,
        },
        {
            "name": "cifar10h",
            "method": "fgr",
            "pack": 16,
            "compiled": True,
            "run_epoch_seconds": 2.0,
            "compile_seconds": 60.0,
        },
        {"name": "cifar10h", "method": "fgr", "pack": 32, "compiled": True, "error": "OutOfMemoryError: x"},
    ],
    "stacked": [{"name": "cifar10h", "method": "vanilla", "stack": 8, "run_epoch_seconds": 0.1}],  # older: unused
}


def test_packs_size_by_each_methods_cheapest_measured_pack_and_pay_their_compile_once(tmp_path, monkeypatch):
    """A benchmark with packs: each method's cheapest pack counts (failed ones do not, nor older vmap
    stacks), the queue compiles where compiled packs won, and every pack of several runs pays the
    largest measured build-and-compile time once."""
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    b = pj.bench(PACKED, "epoch_cuda-H100.json")
    assert b.stack == 16 and b.compiled and b.pack_seconds == 60.0
    assert b.epoch_seconds[("cifar10h", "vanilla")] == 1.0 and b.epoch_seconds[("cifar10h", "fgr")] == 2.0
    one = [tiny_config("vanilla", 0, epochs=10, warmup_epochs=0)]
    two = [tiny_config("vanilla", s, epochs=10, warmup_epochs=0) for s in (0, 1)]
    alone = pj.batch_seconds(b, "cifar10h", one, 16)
    assert alone == pytest.approx(pj.run_seconds(b, "cifar10h", one[0], 1))  # a run alone: no pack to build
    packed = pj.batch_seconds(b, "cifar10h", two, 16)
    assert packed == pytest.approx(2 * pj.run_seconds(b, "cifar10h", two[0], 2) + 60.0)
    eager = {**PACKED, "packed": [dict(r, compiled=False) for r in PACKED["packed"]]}
    assert not pj.bench(eager, "epoch_cuda-H100.json").compiled
