"""Tests of lib.l2d.experiment.run_gaussian: one tiny run of the study is cached."""

from __future__ import annotations

from lib.l2d import experiment as lg


def test_tiny_run_is_cached(tmp_path, monkeypatch, tiny_gaussians):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    cfg = tiny_gaussians
    out = lg.run_gaussian("experts", 2, "ova", 0, cfg)
    assert len(out["ece_per_expert"]) == 2 and 0 <= out["system_accuracy"] <= 1 and out["epochs_run"] <= 2
    assert lg.run_gaussian("experts", 2, "ova", 0, cfg) == out
