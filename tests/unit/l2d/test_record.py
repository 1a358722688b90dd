"""lib.l2d.record: a paper-2 run record (a real one, made by the CIFAR-10 runner at a tiny config)
read as a dataclass, the same numbers through a published results/ copy, and malformed records
refused with the run and the problem named."""

from __future__ import annotations

import copy
import math

import pytest

from lib.nets import image_training
from lib.l2d import cifar10 as l2d_cifar10
from lib.l2d import results as l2d_results
from lib.l2d.record import L2DRecord


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


def test_a_runner_record_reads_as_typed_fields(made) -> None:
    rec, point, _ = made
    r = L2DRecord.from_record(rec)
    assert r.point == point and (r.key, r.group, r.version) == (rec["key"], "l2d_cifar10", rec["version"])
    assert r.ece == rec["ece"] and r.ece_per_expert == tuple(rec["ece_per_expert"]) and len(r.ece_per_expert) == 2
    assert r.coverage == tuple(rec["coverage"]) and r.defer_rate == rec["defer_rate"]
    assert r.ece_random_expert == rec["ece_per_expert"][0]
    assert r.epochs_run == len(rec["history"]) == 1 and r.train_seconds > 0 and r.backbone_test_accuracy is None
    assert r.device == rec["provenance"]["device"] and r.date == rec["provenance"]["date"]
    assert r.plan_id is None and r.queue_seconds is None  # a run of the local cache, not published
    assert r.raw is rec and L2DRecord.from_record(r) is r


def test_result_row_publishes_the_same_numbers_as_the_record(made) -> None:
    rec, point, _ = made
    row = l2d_results.result_row(point, rec)
    assert row == {
        **point,
        **{c: float(rec[c]) for c in l2d_results.RESULT_COLUMNS[:-1]},
        "ece_random_expert": float(rec["ece_per_expert"][0]),
    }
    assert l2d_results.result_row(point, L2DRecord.from_record(rec)) == row
    with pytest.raises(ValueError, match=r"record: run \w+ is the point .*'surrogate': 'ova'.*, not .*'softmax'"):
        l2d_results.result_row({**point, "surrogate": "softmax"}, rec)


def test_a_published_copy_reads_back_the_same(made, dirs) -> None:
    from calibook.runs import read_record
    from calibook.gpu.queue import publish

    rec, point, _ = made
    path = publish(rec, "l2d_cifar10", "l2d_cifar10/specialized/2/ova/s0", seconds=12.5)
    back = L2DRecord.from_record(read_record(path))
    here = L2DRecord.from_record(rec)
    assert (back.plan_id, back.queue_seconds) == ("l2d_cifar10/specialized/2/ova/s0", 12.5)
    assert {k: getattr(back, k) for k in ("point", "ece_per_expert", "coverage", "system_accuracy", "key")} == {
        k: getattr(here, k) for k in ("point", "ece_per_expert", "coverage", "system_accuracy", "key")
    }
    assert l2d_results.result_row(point, back.raw) == l2d_results.result_row(point, rec)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.pop("ece_per_expert"), r"run \w+ lacks the metrics ece_per_expert"),
        (lambda r: (r.pop("ece"), r.pop("coverage")), r"lacks the metrics ece, coverage"),
        (lambda r: r.update(system_accuracy="0.9"), r"system_accuracy = '0.9' \(str\), expected a number"),
        (lambda r: r.update(defer_rate=True), r"defer_rate = True \(bool\), expected a number"),
        (lambda r: r.update(ece_per_expert=0.2), r"ece_per_expert = 0.2, expected a non-empty list of numbers"),
        (lambda r: r["ece_per_expert"].__setitem__(1, None), r"ece_per_expert\[1\] = None"),
        (lambda r: r.update(coverage=[1.0, 0.0]), r"2 experts in ece_per_expert but 2 coverage entries"),
        (lambda r: r["config"].pop("surrogate"), r"run \w+ is not a paper-2 run record: its 'config' must hold"),
    ],
)
def test_a_malformed_record_is_refused_naming_the_run_and_the_problem(made, change, message) -> None:
    rec = copy.deepcopy(made[0])
    change(rec)
    with pytest.raises(ValueError, match=f"^records: .*{message}") as err:
        L2DRecord.from_record(rec)
    assert rec["key"] in str(err.value)


def test_anything_but_a_record_is_refused() -> None:
    with pytest.raises(ValueError, match="records: expected a paper-2 run record .* got list"):
        L2DRecord.from_record([0.1, 0.2])
    with pytest.raises(ValueError, match=r"records: run \? is not a paper-2 run record"):
        L2DRecord.from_record({"ece": 0.1})


def test_optional_metrics_and_nan_are_kept_as_measured(made) -> None:
    rec = {**copy.deepcopy(made[0]), "ece": math.nan, "backbone_test_accuracy": 0.7, "epochs_run": 3}
    del rec["history"], rec["frac_estimate_above_1"]
    r = L2DRecord.from_record(rec)
    assert math.isnan(r.ece) and r.backbone_test_accuracy == 0.7 and r.epochs_run == 3
    assert r.frac_estimate_above_1 is None and r.train_seconds is None


def test_a_gaussians_record_reads_through_the_pages_rows(tmp_path, monkeypatch, tiny_gaussians) -> None:
    """The mixture-of-Gaussians runner's records (no history: ``epochs_run``) are paper-2 records too."""
    from lib.l2d import gaussians as l2d_gaussians

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    cfg = tiny_gaussians
    rec = l2d_gaussians.run_gaussian("dependence", 0.5, "softmax", 1, cfg)
    r = L2DRecord.from_record(rec)
    assert (r.group, r.point, r.epochs_run, r.train_seconds) == (
        "l2d_gaussians",
        {"experiment": "dependence", "value": 0.5, "surrogate": "softmax", "seed": 1},
        rec["epochs_run"],
        None,
    )
    row = l2d_results.result_row(r.point, rec)
    assert row["ece_random_expert"] == rec["ece_per_expert"][0] and len(r.coverage) == 5
