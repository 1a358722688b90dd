"""lib.rr.record: a paper-4 run record (a real one, made by run_loss at a tiny config) read as a
dataclass, its logits and numbers through a published results/ copy, and malformed records refused
with the run and the problem named."""

from __future__ import annotations

import copy
import shutil

import numpy as np
import pytest

from lib.nets import image_training
from lib.rr import experiment as rx
from lib.rr.record import METRICS, LossRecord


@pytest.fixture(scope="module")
def made(tmp_path_factory, tiny_image_cfg):
    """One tiny end-to-end run of the AU loss in a cache of its own: (record, tmp dir)."""
    root = tmp_path_factory.mktemp("loss_record")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CALIBOOK_CACHE", str(root / "cache"))
        mp.setenv("CALIBOOK_RESULTS", str(root / "results"))
        cfg = dict(tiny_image_cfg)
        rec = rx.run_loss("au", cfg, image_training.image_data(cfg), seed=0, coverage=0.7, nu=0.05)
    return rec, root


@pytest.fixture()
def dirs(made, monkeypatch):
    root = made[1]
    monkeypatch.setenv("CALIBOOK_CACHE", str(root / "cache"))
    monkeypatch.setenv("CALIBOOK_RESULTS", str(root / "results"))
    return root


def test_the_metrics_are_those_of_evaluate_logits() -> None:
    rng = np.random.default_rng(0)
    z, y = rng.normal(size=(40, 3)), rng.integers(0, 3, 40)
    assert set(rx.evaluate_logits(z[:20], y[:20], z[20:], y[20:])) == set(METRICS)


def test_a_runner_record_reads_as_typed_fields(made, dirs) -> None:
    rec = made[0]
    r = LossRecord.from_record(rec)
    assert (r.loss, r.seed, r.coverage, r.nu, r.mode) == ("au", 0, 0.7, 0.05, "end_to_end")
    assert (r.key, r.group, r.version) == (rec["key"], "rr_losses", rec["version"])
    assert r.metrics == rec["metrics"] and set(r.metrics) == set(METRICS)
    assert r.epochs_run == 1 and r.train_seconds > 0 and r.backbone_test_accuracy is None
    assert r.device == rec["provenance"]["device"] and r.plan_id is None and r.queue_seconds is None
    assert r.raw is rec and LossRecord.from_record(r) is r
    by_record, by_dict = rx.run_logits(r), rx.run_logits(rec)
    assert by_record.keys() == by_dict.keys() and all(np.array_equal(by_record[k], by_dict[k]) for k in by_dict)
    from lib.rr.pages.losses_cifar10 import loss_table

    assert loss_table({"au": r.metrics}).equals(loss_table({"au": rec["metrics"]}))


def test_a_published_copy_reads_back_the_same_with_its_logits(made, dirs) -> None:
    from calibook.runs import read_record
    from calibook.gpu.queue import publish

    rec = made[0]
    path = publish(rec, "losses_cifar10", "losses_cifar10/au/k0.7/nu0.05/s0", seconds=3.0)
    shutil.rmtree(dirs / "cache")  # only the published copy is left
    back = LossRecord.from_record(read_record(path))
    assert (back.plan_id, back.queue_seconds, back.key, back.metrics) == (
        "losses_cifar10/au/k0.7/nu0.05/s0",
        3.0,
        rec["key"],
        rec["metrics"],
    )
    assert rx.run_logits(back)["test"].shape == (32, 10)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["metrics"].pop("ece_ts"), r"run \w+ lacks the metrics ece_ts"),
        (lambda r: r.pop("metrics"), r"run \w+ has no metrics block \(got NoneType\)"),
        (lambda r: r.update(metrics=[0.1]), r"has no metrics block \(got list\)"),
        (lambda r: r["metrics"].update(ece="low"), r"metrics.ece = 'low' \(str\), expected a number"),
        (lambda r: r["config"].update(seed="0"), r"config.seed = '0' \(str\), expected a number"),
        (lambda r: r["config"].pop("nu"), r"run \w+ is not a paper-4 run record: its 'config' must hold loss, seed"),
    ],
)
def test_a_malformed_record_is_refused_naming_the_run_and_the_problem(made, change, message) -> None:
    rec = copy.deepcopy(made[0])
    change(rec)
    with pytest.raises(ValueError, match=f"^records: .*{message}") as err:
        LossRecord.from_record(rec)
    assert rec["key"] in str(err.value)
    with pytest.raises(ValueError, match="^records: "):
        rx.run_logits(rec)  # refused before any file is looked for


def test_anything_but_a_record_is_refused() -> None:
    with pytest.raises(ValueError, match="records: expected a paper-4 run record .* got str"):
        LossRecord.from_record("rr_losses/abc")
