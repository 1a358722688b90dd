"""lib.moe.record: a paper-1 record's run fields read once, and anything else refused by name."""

import pytest

from lib.moe.record import run_fields, subset_metrics


def _record(**over):
    rec = {
        "key": "k1",
        "version": 3,
        "method": "robust",
        "backbone": "cifar_resnet18",
        "device": "cuda",
        "config": {"train": {"seed": 2, "lam": 2.0, "warmup_epochs": 20, "epochs": 50}},
        "provenance": {"date": "2026-11-23"},
        "wall_time": {"train": 120.0},
        "metrics": {
            "all": {"n": 10000, "accuracy": 0.9, "ece": 0.02, "ece_ts": 0.01, "nll": 0.3},
            "hard": {"n": 327, "accuracy": 0.5, "ece": 0.1},
            "routing_entropy": {"all": 1.1, "hard": 1.3},
        },
    }
    rec.update(over)
    return rec


def test_a_record_reads_as_plain_fields() -> None:
    f = run_fields(_record())
    assert (f["method"], f["seed"], f["lam"], f["warmup_epochs"], f["epochs"], f["version"]) == (
        "robust",
        2,
        2.0,
        20,
        50,
        3,
    )
    assert f["train_seconds"] == 120.0 and f["date"] == "2026-11-23" and not f["pretrained"]
    assert run_fields({"method": "vanilla", "metrics": {}})["seed"] == 0


def test_bad_records_are_named() -> None:
    with pytest.raises(ValueError, match="records: expected"):
        run_fields({"metrics": {}})
    with pytest.raises(ValueError, match="k1 has an unreadable metrics block"):
        subset_metrics(_record(metrics={"all": {"n": 3}}), "all")


def test_a_subsets_metrics_are_numbers_with_none_where_not_computed() -> None:
    rec = _record()
    want = {"n": 10000, "accuracy": 0.9, "ece": 0.02, "ece_ts": 0.01, "ece_ts_converged": None, "nll": 0.3}
    assert subset_metrics(rec, "all") == want
    assert subset_metrics(rec, "hard")["ece_ts"] is None
