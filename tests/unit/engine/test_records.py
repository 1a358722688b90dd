"""lib.engine.records: one value of a run record read by name, and a record's provenance."""

import math

import pytest

from lib.engine.records import origin_fields, record_number, record_numbers


def test_numbers_are_read_and_wrong_types_named() -> None:
    assert record_number(3, "k1", "ece") == 3.0 and math.isnan(record_number(math.nan, "k1", "ece"))
    assert record_numbers([0.5, 1], "k1", "coverage") == (0.5, 1.0)
    for bad in ("0.5", None, True):
        with pytest.raises(ValueError, match=r"^records: run k1 has ece = .* expected a number"):
            record_number(bad, "k1", "ece")
    for bad in ([], "0.5", {"a": 1}, 0.5):
        with pytest.raises(ValueError, match=r"^records: run k1 has coverage = .* expected a non-empty list"):
            record_numbers(bad, "k1", "coverage")
    with pytest.raises(ValueError, match=r"coverage\[1\] = 'x'"):
        record_numbers([1, "x"], "k1", "coverage")


def test_origin_of_a_cached_and_of_a_published_record() -> None:
    rec = {
        "key": "k1",
        "group": "rr_losses",
        "version": 2,
        "provenance": {"device": "cuda", "date": "2026-11-23"},
        "history": [{"epoch": 1, "seconds": 1.5}, {"epoch": 2, "seconds": 2.0}],
    }
    assert origin_fields(rec) == {
        "key": "k1",
        "group": "rr_losses",
        "version": 2,
        "device": "cuda",
        "date": "2026-11-23",
        "epochs_run": 2,
        "train_seconds": 3.5,
        "plan_id": None,
        "queue_seconds": None,
    }
    published = {**rec, "history": [{"epoch": 1}], "queue": {"id": "p/xe/s0", "seconds": 60.0}}
    got = origin_fields(published)
    assert (got["plan_id"], got["queue_seconds"], got["epochs_run"], got["train_seconds"]) == ("p/xe/s0", 60.0, 1, None)
    assert origin_fields({"epochs_run": 4})["epochs_run"] == 4 and origin_fields({})["key"] == "?"
    with pytest.raises(ValueError, match="queue.seconds = 'soon'"):
        origin_fields({**rec, "queue": {"seconds": "soon"}})
