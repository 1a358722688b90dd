"""lib.moe.record: a paper-1 record read as a dataclass, and anything else refused by name."""

import pytest

from lib.moe.record import MoERecord, SubsetMetrics


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


def test_a_record_reads_as_typed_fields() -> None:
    r = MoERecord.from_record(_record())
    assert (r.method, r.seed, r.lam, r.warmup_epochs, r.epochs, r.version) == ("robust", 2, 2.0, 20, 50, 3)
    assert r.subsets["all"] == SubsetMetrics(n=10000, accuracy=0.9, ece=0.02, ece_ts=0.01, nll=0.3)
    assert r.subsets["hard"].ece_ts is None and r.routing_entropy["hard"] == 1.3
    assert r.train_seconds == 120.0 and r.date == "2026-11-23" and not r.pretrained
    assert MoERecord.from_record(r) is r


def test_a_missing_subset_is_absent_and_bad_records_are_named() -> None:
    rec = _record()
    del rec["metrics"]["hard"]
    assert set(MoERecord.from_record(rec).subsets) == {"all"}
    with pytest.raises(ValueError, match="records: expected"):
        MoERecord.from_record({"metrics": {}})
    with pytest.raises(ValueError, match="k1 has an unreadable metrics block"):
        MoERecord.from_record(_record(metrics={"all": {"n": 3}}))
