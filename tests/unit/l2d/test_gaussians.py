"""Tests of lib.l2d.gaussians: the splits are one draw of the mixture cut in order, and
one tiny run of the study is cached."""

from __future__ import annotations

import numpy as np

from lib.l2d import gaussians as lg
from lib.l2d.gaussian_mixture import gaussian_mixture


def test_gaussian_splits_cut_one_draw_in_order():
    splits = lg.gaussian_splits(30, 10, 20, seed=4)
    assert [len(splits[k][1]) for k in ("train", "val", "test")] == [30, 10, 20]
    x, y, _ = gaussian_mixture(60, seed=4)
    np.testing.assert_array_equal(np.concatenate([splits[k][0] for k in ("train", "val", "test")]), x)
    np.testing.assert_array_equal(np.concatenate([splits[k][1] for k in ("train", "val", "test")]), y)


def test_tiny_run_is_cached(tmp_path, monkeypatch, tiny_gaussians):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    cfg = tiny_gaussians
    out = lg.run_gaussian("experts", 2, "ova", 0, cfg)
    assert len(out["ece_per_expert"]) == 2 and 0 <= out["system_accuracy"] <= 1 and out["epochs_run"] <= 2
    assert lg.run_gaussian("experts", 2, "ova", 0, cfg) == out
