"""lib.gpu.projection: GPU-minutes and windows per page from a CUDA benchmark (stacked figures first),
and "cpu-extrapolated" where only the CPU one exists."""

from __future__ import annotations

import pytest

import lib.gpu.queue as q
from lib.gpu import projection as pj

CUDA = {
    "device": "NVIDIA H100 80GB HBM3",
    "results": [{"name": "cifar10h", "method": m, "epoch_seconds": 6.0} for m in ("vanilla", "fgr")],
    "stacked": [
        {"name": "cifar10h", "method": "vanilla", "stack": 8, "run_epoch_seconds": 1.0, "channels_last": False},
        {"name": "cifar10h", "method": "vanilla", "stack": 8, "run_epoch_seconds": 3.0, "channels_last": True},
        {"name": "cifar10h", "method": "fgr", "stack": 8, "run_epoch_seconds": 2.0, "channels_last": False},
    ],
}


def test_minutes_and_windows_from_a_stacked_cuda_benchmark(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    b = pj.bench(CUDA, "epoch_cuda-H100.json")
    assert not b.cpu_extrapolated and b.stack == 8
    assert b.epoch_seconds[("cifar10h", "vanilla")] == 1.0  # the layout the stacks use (no channels_last)
    items = q.plan(["cifar10h"], "paper")
    # by hand: 5 seeds x 50 epochs; single, vanilla, robust, robust_filtered at the vanilla figure (1 s);
    # fgr and fgr_robust 20 warmup epochs at 1 s and 30 at 2 s
    want = 5 * (4 * 50 * 1.0 + 2 * (20 * 1.0 + 30 * 2.0)) / 60
    assert pj.page_minutes(items, b) == pytest.approx(want)
    text = pj.describe(items, b)
    assert "GPU-minutes" in text and f"~{want:8.1f} min    {pj.windows(want)} window(s)" in text
    assert pj.windows(25.0) == 1 and pj.windows(25.1) == 2 and pj.windows(0) == 0


def test_without_a_cuda_benchmark_the_projection_says_cpu_extrapolated():
    b = pj.bench(
        {
            "device": "CPU (x86_64, 2 threads)",
            "results": [{"name": "cifar10h", "method": "vanilla", "epoch_seconds": 700.0}],
        },
        "epoch_cpu.json",
    )
    assert b.cpu_extrapolated
    text = pj.describe(q.plan(["cifar10h", "l2d_cifar10"], "paper"), b)
    assert "cpu-extrapolated" in text and "window(s)  " not in text and "(no benchmark)" in text
