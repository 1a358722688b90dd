"""Tests of calibook.performance, the performance page's module: the timer measures known durations,
exponents recover known powers, the committed-result readers compute the ratios the page shows."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest
import torch

from calibook import performance as bm


def test_round_robin_times_each_call_on_both_clocks_and_calls_each_function_alike(monkeypatch):
    """On a fake clock each call advances by a known wall and CPU time: the timer records exactly
    those, one warm-up round untimed, and keeps adding rounds while the budget lasts (no real clock,
    so the verdict does not depend on the machine's load)."""
    clock = {"wall": 0.0, "cpu": 0.0}
    calls = {"short": 0, "long": 0}

    def work(name: str, wall: float, cpu: float):
        def fn() -> None:
            calls[name] += 1
            clock["wall"] += wall
            clock["cpu"] += cpu

        return fn

    monkeypatch.setattr(bm.time, "perf_counter", lambda: clock["wall"])
    monkeypatch.setattr(bm.time, "process_time", lambda: clock["cpu"])
    fns = {"short": work("short", 0.002, 0.002), "long": work("long", 0.02, 0.0)}  # "long" sleeps
    t = bm.time_round_robin(fns, min_repeats=4, budget_s=0.0, warmup=1)
    assert calls == {"short": 5, "long": 5}  # one warm-up round + four timed rounds
    assert t["short"]["wall"] == pytest.approx([0.002] * 4) and t["long"]["wall"] == pytest.approx([0.02] * 4)
    assert t["short"]["cpu"] == pytest.approx([0.002] * 4) and t["long"]["cpu"] == [0.0] * 4
    # a round costs 0.022 s: a 0.05 s budget takes three rounds (0.044 s left room for a third)
    t = bm.time_round_robin(fns, min_repeats=2, budget_s=0.05, warmup=0)
    assert len(t["short"]["wall"]) == 3
    assert len(bm.time_round_robin(fns, min_repeats=2, budget_s=10.0, max_repeats=6, warmup=0)["long"]["wall"]) == 6


def test_round_robin_syncs_around_every_call_and_validates():
    log = []
    bm.time_round_robin(
        {"f": lambda: log.append("call")}, min_repeats=2, budget_s=0.0, warmup=0, sync=lambda: log.append("sync")
    )
    assert log == ["sync", "sync", "call", "sync", "sync", "call", "sync"]
    with pytest.raises(ValueError, match="fns"):
        bm.time_round_robin({})
    with pytest.raises(ValueError, match="max_repeats"):
        bm.time_round_robin({"f": lambda: None}, min_repeats=5, max_repeats=2)


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_scaling_exponent_recovers_a_power_law(power):
    n = np.array([128, 256, 512, 1024, 2048])
    table = pd.DataFrame({"loss": "a", "n": n, "median_s": 3e-7 * n**power})
    assert bm.scaling_exponent(table, "a") == pytest.approx(power, abs=1e-9)
    # n log n lies between the two and approaches 1 at large n
    nlogn = pd.DataFrame({"loss": "b", "n": n, "median_s": n * np.log(n)})
    assert 1.0 < bm.scaling_exponent(nlogn, "b") < 1.2
    assert bm.scaling_exponent(table, "a", n_min=1024) == pytest.approx(power, abs=1e-9)
    with pytest.raises(ValueError, match="need at least 2"):
        bm.scaling_exponent(table, "a", n_min=2048)
    with pytest.raises(ValueError, match="column"):
        bm.scaling_exponent(table, "a", column="cpu")


def test_scaling_summary_fits_each_loss_from_the_sizes_it_reached():
    """Exponents from n >= 4096 where two sizes reach it (the AU loss, AURC); KDE-XE, timed only up to
    4096, from its two largest sizes, 2048..4096: both power laws come back, and so do the sizes."""
    big, small = np.array([1024, 2048, 4096, 8192]), np.array([512, 1024, 2048, 4096])
    timing = pd.concat(
        [
            pd.DataFrame({"loss": "AU loss (bins)", "n": big, "median_s": 1e-6 * big}),
            pd.DataFrame({"loss": "AURC loss (sort)", "n": big, "median_s": 2e-6 * big}),
            pd.DataFrame({"loss": "KDE-XE (kernel)", "n": small, "median_s": 1e-9 * small**2.0}),
        ]
    )
    got = bm.scaling_summary(timing, ["AU loss (bins)", "KDE-XE (kernel)"], n_from=4096)
    assert got["fit_from"] == {"AU loss (bins)": 4096, "KDE-XE (kernel)": 2048}
    assert got["exponents"] == {"AU loss (bins)": pytest.approx(1.0), "KDE-XE (kernel)": pytest.approx(2.0)}
    assert got["kde_n"] == 4096 and got["kde_over_au"] == pytest.approx(1e-9 * 4096 / 1e-6)
    assert list(got["au_over_aurc"].dropna()) == [0.5] * 4  # n = 512: KDE-XE alone


def test_loss_scaling_rows_and_size_limits():
    losses = {"xe": torch.nn.functional.cross_entropy, "sq": lambda z, y: (z**2).mean()}
    table = bm.loss_scaling(losses, [16, 64], num_classes=3, budget_s=0.0, min_repeats=2, max_n={"sq": 16})
    assert list(zip(table["loss"], table["n"])) == [("xe", 16), ("sq", 16), ("xe", 64)]
    assert (table["repeats"] == 2).all() and (table["min_s"] <= table["median_s"]).all()
    with pytest.raises(ValueError, match="max_n"):
        bm.loss_scaling(losses, [16], max_n={"kde": 8})
    with pytest.raises(ValueError, match="sizes"):
        bm.loss_scaling(losses, [1])


def test_method_costs_ratios_and_references():
    record = {
        "results": {
            "vanilla": {"sec_per_step_median": 2.0},
            "robust_filtered": {"sec_per_step_median": 2.2},
            "robust_filtered_ref": {"sec_per_step_median": 3.0},
            "fgr": {"sec_per_step_median": 4.0},
        }
    }
    t = bm.method_costs(record).set_index("method")
    assert list(t.index) == ["vanilla", "robust_filtered", "fgr"]
    assert t.loc["robust_filtered", "x vanilla"] == pytest.approx(1.1)
    assert t.loc["robust_filtered", "reference x vanilla"] == pytest.approx(1.5)
    assert np.isnan(t.loc["fgr", "reference x vanilla"])
    with pytest.raises(ValueError, match="vanilla"):
        bm.method_costs({"results": {}})


def test_epoch_table_and_committed_results_exist():
    for name in bm.BENCH_SCRIPTS:
        assert bm.bench_results(name)  # the committed files the performance page reads
    assert set(bm.BENCH_SCRIPTS) <= set(bm.result_names())
    assert bm.result_names("epoch_*") == sorted(n for n in bm.result_names() if n.startswith("epoch_"))
    assert "epoch_cpu" in bm.result_names("epoch_*")
    t = bm.epoch_table(bm.bench_results("epoch_cpu"))
    assert t.index.names == ["dataset", "method"] and {"epoch minutes", "images/s"} <= set(t.columns)
    assert (t["epoch minutes"] > 0).all()
    with pytest.raises(ValueError, match="results"):
        bm.epoch_table({"results": []})


def test_missing_result_names_the_script(monkeypatch, tmp_path):
    monkeypatch.setattr(bm, "repo_root", lambda: tmp_path)
    with pytest.raises(FileNotFoundError, match="bench/bench_methods.py"):
        bm.bench_results("methods_cpu")


def _bench_epoch():
    import importlib.util

    from lib.config import repo_root

    spec = importlib.util.spec_from_file_location("bench_epoch", repo_root() / "bench" / "bench_epoch.py")
    be = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(be)
    return be


def test_packed_epoch_benchmark_runs_a_tiny_pack_and_projects_the_grid():
    """bench/bench_epoch.py --pack: a pack's images/s counts every run's images, a run's epoch is the
    pack's epoch over its size, the build cost is not negative, and the grid projection adds up the runs."""
    from lib.moe.config import TrainConfig

    be = _bench_epoch()
    cfg = TrainConfig(method="vanilla", backbone="tiny_cnn", width=8, batch_size=8, amp=False, progress=False)
    out = be.bench_pack("cifar10h", cfg, 3, 16, 4, epoch_images=80, steps=2, warmup_steps=1, device=torch.device("cpu"))
    assert out["pack"] == 3 and not out["compiled"] and out["compile_seconds"] >= 0
    assert out["images_per_second"] == pytest.approx(3 * 8 / out["seconds_per_step"])
    assert out["pack_epoch_seconds"] == pytest.approx(10 * out["seconds_per_step"])  # 80 images / batch 8
    assert out["run_epoch_seconds"] == pytest.approx(out["pack_epoch_seconds"] / 3)
    assert out["run_step_ms"] == pytest.approx(1e3 * out["seconds_per_step"] / 3)
    proj = be.table1_projection([{**out, "method": m} for m in be.TRAINED], seeds=5, epochs=50)
    assert proj["stack"] == 3 and proj["runs"] == 5 * len(be.TRAINED)
    assert proj["serial_minutes"] == pytest.approx(5 * len(be.TRAINED) * 50 * out["run_epoch_seconds"] / 60)
    faster = dict(out, run_epoch_seconds=out["run_epoch_seconds"] / 2, compiled=True)
    assert be.best_packs([out, faster, {"method": "fgr", "pack": 8, "error": "x"}]) == [faster]


def test_the_epoch_benchmark_skips_only_packs_it_measured_and_records_a_failed_one(tmp_path):
    """``--unless-measured``: a benchmark holding packs of every size asked for of every method is not
    run again; one missing a method or a size, unreadable or whose packs failed is. A failed pack is
    recorded with what was packed and the error's first line."""
    import json

    be = _bench_epoch()
    path = tmp_path / "epoch_cuda-X.json"
    rows = [{"method": m, "pack": g} for m in ("vanilla", "fgr") for g in (8, 16)]
    path.write_text(json.dumps({"packed": rows}))
    assert be.measured(path, ["vanilla", "fgr"], [8, 16]) == (True, True)  # no processes asked for
    assert be.measured(path, ["vanilla", "fgr"], [8, 32]) == (False, True)
    assert be.measured(path, ["vanilla", "robust"], [8]) == (False, True)
    assert be.measured(path, ["vanilla", "fgr"], []) == (False, True)
    assert be.measured(path, ["vanilla", "fgr"], [8], [2, 4]) == (True, False)  # processes not yet timed
    procs = [{"method": m, "workers": n, "seconds_per_step": 1.0} for m in ("vanilla", "fgr") for n in (2, 4)]
    path.write_text(json.dumps({"packed": rows, "workers": procs}))
    assert be.measured(path, ["vanilla", "fgr"], [16], [2, 4]) == (True, True)
    path.write_text(json.dumps({"packed": [dict(r, error="RuntimeError: x") for r in rows]}))
    assert not be.measured(path, ["vanilla"], [8])[0]  # failed: tried again
    path.write_text("{not json")
    assert (
        be.measured(path, ["vanilla"], [8]) == be.measured(tmp_path / "absent.json", ["vanilla"], [8]) == (False, False)
    )
    err = RuntimeError("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED\nmore")
    assert be.pack_failure("fgr", 8, True, err) == {
        "name": "cifar10h",
        "method": "fgr",
        "pack": 8,
        "compiled": True,
        "error": "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED",
    }


def _bench_module(name: str):
    import importlib.util

    from lib.config import repo_root

    spec = importlib.util.spec_from_file_location(name, repo_root() / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_pack_nets_benchmark_times_a_network_alone_and_packed():
    """bench/bench_pack_nets.py: one step of a WRN alone and of two packed (a run that works, no timing asserted)."""
    pn = _bench_module("bench_pack_nets")
    for runs in (1, 2):
        assert pn.step_seconds("wrn-10-1", 3, 8, 4, runs, 1, torch.device("cpu")) > 0


def test_packed_runs_agree_with_published_ones_within_the_bounds():
    """bench/packed_vs_published.py's comparison: accuracy within 0.5 points and ECE within 0.01 agree."""
    pv = _bench_module("packed_vs_published")

    def rec(acc, ece, packed=None):
        m = {"accuracy": acc, "ece": ece}
        hist = [{"packed": packed}] if packed else [{}]
        return {"metrics": {"all": m, "hard": m}, "history": hist, "wall_time": {"train": 10.0}}

    same = pv.compare(rec(0.884, 0.073), rec(0.880, 0.080, packed=4))
    assert same["agrees"] and same["packed_with"] == 4
    assert same["all_accuracy"]["diff"] == pytest.approx(-0.004)
    assert not pv.compare(rec(0.884, 0.073), rec(0.874, 0.073))["agrees"]  # 1 point of accuracy
    assert not pv.compare(rec(0.884, 0.073), rec(0.884, 0.090))["agrees"]  # ECE 0.017 apart


def _timings(au_over_aurc: float, kde_over_au: float, fgr_ref: float, robust: float, device: str):
    scaling = {
        "au_over_aurc": pd.Series({1024: 1.1, 65536: au_over_aurc}),
        "exponents": {"KDE-XE (kernel)": 2.0 if kde_over_au > 1 else 0.9, "AU loss (bins)": 1.0},
        "kde_n": 4096,
        "kde_over_au": kde_over_au,
        "fit_from": {"KDE-XE (kernel)": 2048, "AU loss (bins)": 4096},
    }
    results = {
        m: {"sec_per_step_median": s}
        for m, s in (("vanilla", 1.0), ("robust_filtered", robust), ("robust_filtered_ref", 2.0), ("fgr", 1.2))
    }
    results["fgr_ref"] = {"sec_per_step_median": fgr_ref}
    return scaling, bm.method_costs({"results": results}), {"device": device, "device_name": device}


def test_the_performance_pages_timings_can_hold_and_fail_and_are_counted_apart():
    """Each row is one timing (no noise bar), so it is a "timing", never one of the papers' claims;
    each can hold and fail on the numbers it reads, and FGR's GPU figure is not judged on a CPU."""
    held = bm.claims(*_timings(0.5, 40.0, 2.5, 1.0, "cuda"))
    failed = bm.claims(*_timings(1.5, 0.5, 4.0, 1.6, "cuda"))
    assert set(held["kind"]) == set(failed["kind"]) == {"timing"}
    assert list(held["verdict"]) == ["held"] * 4 and list(failed["verdict"]) == ["did not hold"] * 4
    # Robust Filtered's bar, 1.15x Vanilla, with the timings' 10% margin: 1.1x decides nothing
    assert bm.claims(*_timings(0.5, 40.0, 2.5, 1.1, "cuda"))["verdict"].iloc[3] == "inconclusive at this scale"
    assert "(KDE-XE on n = 2048..4096) vs 1.00 (the AU loss on n >= 4096)" in held["ours"].iloc[1]
    on_cpu = bm.claims(*_timings(0.5, 40.0, 2.5, 1.05, "cpu"))
    assert on_cpu["verdict"].iloc[2] == "inconclusive at this scale"
    # a single AU / AURC timing within 10% of parity decides nothing either way; beyond it, it does
    for ratio, verdict in (
        (0.95, "inconclusive at this scale"),
        (1.05, "inconclusive at this scale"),
        (0.89, "held"),
        (1.11, "did not hold"),
    ):
        assert bm.claims(*_timings(ratio, 40.0, 2.5, 1.05, "cuda"))["verdict"].iloc[0] == verdict


def test_pack_table_sets_a_runs_share_of_a_pack_beside_the_run_alone():
    """A hand-made record: alone an epoch takes 4 s; 8 runs packed take 20 s, 2.5 s a run, so the
    runs per GPU-second are 4 / 2.5 = 1.6 times those alone; the older vmap stack's rows are labelled
    as such, a packed method with no run alone beside it, a failed pack and a record with no pack
    give no row."""
    alone = {"name": "cifar10h", "method": "vanilla", "epoch_seconds": 4.0, "fraction_of_peak": 0.03}
    packed = {"name": "cifar10h", "method": "vanilla", "pack": 8, "compiled": True, "run_epoch_seconds": 2.5}
    packed["fraction_of_peak"] = 0.05
    stacked = {"name": "cifar10h", "method": "vanilla", "stack": 8, "run_epoch_seconds": 3.2}
    orphan, failed = {**packed, "method": "fgr"}, {**packed, "pack": 32, "error": "out of memory"}
    gpu = {"device": "GPU", "results": [alone], "packed": [packed, orphan, failed], "stacked": [stacked]}
    t = bm.pack_table({"epoch_gpu": gpu, "epoch_cpu": {"device": "CPU", "results": [alone]}})
    assert len(t) == 2
    row = t.loc[("GPU", "cifar10h", "Vanilla MoE", "packed (fit_packed), compiled", 8)]
    assert row["runs per GPU-second (x alone)"] == pytest.approx(1.6)
    assert (row["fraction of bf16 peak alone"], row["together"]) == (0.03, 0.05)
    old = t.loc[("GPU", "cifar10h", "Vanilla MoE", "vmap stack (before packed runs)", 8)]
    assert old["runs per GPU-second (x alone)"] == pytest.approx(4.0 / 3.2)
    assert bm.pack_table({"epoch_cpu": {"device": "CPU", "results": [alone]}}) is None
    committed = bm.pack_table({n: bm.bench_results(n) for n in bm.result_names("epoch_*")})
    assert committed is not None and (committed["runs per GPU-second (x alone)"] > 1).all()


def test_probe_table_divides_by_one_model_eager():
    """Speed-up = the eager channels_last step of one model over each row's per-model step: 8 ms
    alone, 2 ms per model packed (G = 16) is 4x. The committed H200 probe: 8.422 ms alone, 1.585 ms
    per model packed under torch.compile (G = 16), 5.3x."""
    rows = [
        {"variant": "eager_cl", "G": 1, "per_model_step_ms": 8.0, "frac_peak_989": 0.04},
        {"variant": "compile_nocl", "G": 16, "per_model_step_ms": 2.0, "frac_peak_989": 0.16},
    ]
    t = bm.probe_table({"rows": rows})
    assert t.loc[("torch.compile", "contiguous", 16), "speed-up"] == pytest.approx(4.0)
    assert t.loc[("eager", "channels_last", 1), "speed-up"] == 1.0
    h200 = bm.probe_table(bm.bench_results("packed_step_probe-H200"))
    assert h200.loc[("torch.compile", "channels_last", 16), "speed-up"] == pytest.approx(8.422 / 1.585)
    with pytest.raises(ValueError, match="eager_cl"):
        bm.probe_table({"rows": rows[1:]})
