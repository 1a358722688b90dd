"""Paper-2 run records are plain dicts: a real one (made by the CIFAR-10 runner at a tiny config)
gives its table row (lib.l2d.results.result_row), the same through a published results/ copy."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lib.nets import image_training
from lib.l2d import cifar10 as l2d_cifar10
from lib.l2d import results as l2d_results


@pytest.fixture(scope="module")
def made(tmp_path_factory, tiny_image_cfg):
    """One tiny end-to-end run of the CIFAR-10 study in a cache of its own: (record, point, tmp dir)."""
    root = tmp_path_factory.mktemp("l2d_record")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CALIBOOK_CACHE", str(root / "cache"))
        mp.setenv("CALIBOOK_RESULTS", str(root / "results"))
        cfg = {**tiny_image_cfg, "patience": 5}
        data = image_training.image_data(cfg)
        point = {"experiment": "specialized", "value": 2, "surrogate": "ova", "seed": 0}
        rec = l2d_cifar10.run_cifar(*point.values(), cfg, data)
    return rec, point, root


@pytest.fixture()
def dirs(made, monkeypatch):
    _, _, root = made
    monkeypatch.setenv("CALIBOOK_CACHE", str(root / "cache"))
    monkeypatch.setenv("CALIBOOK_RESULTS", str(root / "results"))
    return root


def test_result_row_publishes_the_same_numbers_as_the_record(made) -> None:
    """The record's metrics; the specialized sweep has no random expert (its expert 0 is an oracle on
    classes 0 and 1), so its random expert's ECE is NaN (blank in the tables), not expert 0's."""
    rec, point, _ = made
    row = l2d_results.result_row(point, rec)
    assert math.isnan(row.pop("ece_random_expert")) and math.isfinite(rec["ece_per_expert"][0])
    assert row == {**point, **{c: float(rec[c]) for c in l2d_results.RESULT_COLUMNS[:-1]}}
    shown = l2d_results.summary_table(l2d_results.summarize(pd.DataFrame([{**row, "ece_random_expert": np.nan}])))
    assert shown["random expert's ECE"].tolist() == [""]
    with pytest.raises(ValueError, match=r"record: run \w+ is the point .*'surrogate': 'ova'.*, not .*'softmax'"):
        l2d_results.result_row({**point, "surrogate": "softmax"}, rec)


def test_a_published_copy_reads_back_the_same(made, dirs) -> None:
    from calibook.runs import read_record
    from calibook.gpu.queue import publish

    rec, point, _ = made
    path = publish(rec, "l2d_cifar10", "l2d_cifar10/specialized/2/ova/s0", seconds=12.5)
    back = read_record(path)
    assert back["queue"]["id"] == "l2d_cifar10/specialized/2/ova/s0"
    assert l2d_results.result_row(point, back) == l2d_results.result_row(point, rec)


def test_a_gaussians_record_reads_through_the_pages_rows(tmp_path, monkeypatch, tiny_gaussians) -> None:
    """The mixture-of-Gaussians runner's records (no history: ``epochs_run``) are paper-2 records too."""
    from lib.l2d import experiment as l2d_gaussians

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    cfg = tiny_gaussians
    rec = l2d_gaussians.run_gaussian("dependence", 0.5, "softmax", 1, cfg)
    point = {"experiment": "dependence", "value": 0.5, "surrogate": "softmax", "seed": 1}
    assert rec["group"] == "l2d_gaussians" and len(rec["coverage"]) == 5
    row = l2d_results.result_row(point, rec)
    assert row == {**point, **{c: float(rec[c]) for c in l2d_results.RESULT_COLUMNS[:-1]},
                   "ece_random_expert": rec["ece_per_expert"][0]}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["config"].pop("surrogate"), r"is not a paper-2 run record: its config lacks surrogate"),
        (lambda r: r.pop("config"), r"its config lacks experiment, value, surrogate, seed"),
        (lambda r: r.update(ece="low"), r"ece is 'low' \(str\), expected a number"),
        (lambda r: r.pop("defer_rate"), r"defer_rate is missing, expected a number"),
        (lambda r: r.update(system_accuracy=True), r"system_accuracy is True \(bool\)"),
        (lambda r: r.update(ece_per_expert=[]), r"ece_random_expert is None \(NoneType\)"),
    ],
)
def test_a_malformed_record_is_refused_naming_the_run_and_the_field(made, change, message) -> None:
    import copy

    rec, point, _ = made
    bad = copy.deepcopy(rec)
    change(bad)
    with pytest.raises(ValueError, match=f"^records: run {rec['key']}.*{message}"):
        l2d_results.result_row(point, bad)


def test_anything_but_a_record_is_refused(made) -> None:
    with pytest.raises(ValueError, match="^records: expected a paper-2 run record, got str"):
        l2d_results.result_row(made[1], "l2d_cifar10/abc")
