"""A paper-4 run record (a real one, made by run_loss at a tiny config): plain data holding the run's
settings and metrics, its logits read back beside it, also through a published results/ copy."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from lib.nets import image_training
from lib.rr import experiment as rx
from lib.rr.experiment import METRICS


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


def test_a_runner_record_holds_its_settings_metrics_and_logits(made, dirs) -> None:
    rec = made[0]
    c = rec["config"]
    assert (c["loss"], c["seed"], c["coverage"], c["nu"], c["mode"]) == ("au", 0, 0.7, 0.05, "end_to_end")
    assert rec["group"] == "rr_losses" and set(rec["metrics"]) == set(METRICS)
    assert "backbone_test_accuracy" not in rec and "train_accuracy" not in rec
    assert rx.run_logits(rec)["test"].shape == (32, 10)


def test_a_published_copy_reads_back_the_same_with_its_logits(made, dirs) -> None:
    from calibook.runs import read_record
    from calibook.gpu.queue import publish

    rec = made[0]
    path = publish(rec, "losses_cifar10", "losses_cifar10/au/k0.7/nu0.05/s0", seconds=3.0)
    shutil.rmtree(dirs / "cache")  # only the published copy is left
    back = read_record(path)
    assert (back["key"], back["metrics"]) == (rec["key"], rec["metrics"])
    assert rx.run_logits(back)["test"].shape == (32, 10)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["metrics"].pop("ece_ts"), r"metrics.ece_ts is missing, expected a number"),
        (lambda r: r.pop("metrics"), r"has no metrics block \(got NoneType\)"),
        (lambda r: r.update(metrics=[0.1]), r"has no metrics block \(got list\)"),
        (lambda r: r["metrics"].update(ece="low"), r"metrics.ece is 'low' \(str\), expected a number"),
        (
            lambda r: r["config"].pop("nu"),
            r"is not a paper-4 record of lib.rr.experiment.run_loss: its config lacks nu",
        ),
    ],
)
def test_a_malformed_record_is_refused_naming_the_run_and_the_field(made, dirs, change, message) -> None:
    import copy

    rec = copy.deepcopy(made[0])
    change(rec)
    with pytest.raises(ValueError, match=f"^records: run {rec['key']}.*{message}"):
        rx.loss_record(rec)
    with pytest.raises(ValueError, match="^records: "):
        rx.run_logits(rec)  # refused before any file is looked for


def test_anything_but_a_record_is_refused() -> None:
    with pytest.raises(ValueError, match="^records: expected a paper-4 record .* got str"):
        rx.loss_record("rr_losses/abc")


def test_the_page_reads_published_records_through_the_reader(made) -> None:
    from lib.rr.pages.losses_cifar10 import PAGE

    item = next(it for it in PAGE.runs({**made[0]["config"], "seeds": 1, "coverages": [0.7], "nus": [0.05]})
                if it.method == "au")  # fmt: skip
    bad = {**made[0], "metrics": {**made[0]["metrics"], "ece": "low"}}
    with pytest.raises(ValueError, match="metrics.ece is 'low'"):
        PAGE.table([item], {item.id: bad})
