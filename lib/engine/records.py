"""Reading run records as typed views: the checks and provenance fields that the papers' record
dataclasses share (:mod:`lib.l2d.record`, :mod:`lib.rr.record`).

A finished run is a signed JSON dict (:mod:`calibook.runs`; the queue, :mod:`calibook.gpu.queue`, adds a
``queue`` block to the copy it publishes). These helpers read one value of such a dict, or its
provenance, and raise ``ValueError("records: run <key> ...")`` naming the run and the field when the
value is missing or of the wrong type. They never change a record.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["RunOrigin", "check_record", "require_keys", "origin_fields", "record_number", "record_numbers"]


@dataclass(frozen=True)
class RunOrigin:
    """Where and how a run was made (the fields of :func:`origin_fields`): the base of the papers'
    record dataclasses. Absent values are ``None``."""

    key: str
    group: str
    version: int
    device: str | None
    date: str | None
    epochs_run: int | None
    train_seconds: float | None
    plan_id: str | None
    queue_seconds: float | None


def check_record(rec: Any, kind: str, source: str, config_keys: Sequence[str]) -> tuple[str, Mapping[str, Any]]:
    """The run key and config of ``rec``, a record of ``kind`` (e.g. "a paper-2 run record") made by
    ``source``; ``ValueError`` unless it is a mapping whose ``config`` holds every key of ``config_keys``."""
    if not isinstance(rec, Mapping):
        raise ValueError(f"records: expected {kind} (of {source}), got {type(rec).__name__}")
    run = str(rec.get("key", "?"))
    config = rec.get("config")
    if not isinstance(config, Mapping) or any(k not in config for k in config_keys):
        raise ValueError(f"records: run {run} is not {kind}: its 'config' must hold {', '.join(config_keys)}")
    return run, config


def require_keys(block: Mapping[str, Any], keys: Sequence[str], run: str, source: str) -> None:
    """``ValueError`` naming run ``run`` and the metrics of ``keys`` missing from ``block`` (every
    record of ``source`` has them)."""
    missing = [k for k in keys if k not in block]
    if missing:
        raise ValueError(
            f"records: run {run} lacks the metrics {', '.join(missing)} (every record of {source} has them)"
        )


def record_number(value: Any, run: str, name: str) -> float:
    """``value`` (field ``name`` of run ``run``) as a float; ``ValueError`` naming both unless it is
    a real number (not a bool, not a string). NaN and infinities pass: a record says what was measured."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"records: run {run} has {name} = {value!r} ({type(value).__name__}), expected a number")
    return float(value)


def record_numbers(value: Any, run: str, name: str) -> tuple[float, ...]:
    """``value`` (a non-empty list of numbers, field ``name`` of run ``run``) as a tuple of floats;
    ``ValueError`` naming the run, the field and the entry otherwise."""
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or not value:
        raise ValueError(f"records: run {run} has {name} = {value!r}, expected a non-empty list of numbers")
    return tuple(record_number(v, run, f"{name}[{i}]") for i, v in enumerate(value))


def origin_fields(rec: Mapping[str, Any]) -> dict[str, Any]:
    """Where and how a record was made, as keyword arguments of a record dataclass: ``key``,
    ``group``, ``version``; ``device`` and ``date`` (its provenance); ``epochs_run`` and
    ``train_seconds`` (the summed epoch seconds) from its training history, if it keeps one;
    ``plan_id`` and ``queue_seconds`` from the queue's block of a published copy. Absent values are
    ``None``."""
    run = str(rec.get("key", "?"))
    prov = rec.get("provenance") or {}
    queue = rec.get("queue") or {}
    history = rec.get("history")
    epochs_run = rec.get("epochs_run", len(history) if isinstance(history, list) else None)
    seconds = [h.get("seconds") for h in history if isinstance(h, Mapping)] if isinstance(history, list) else []
    timed = bool(seconds) and all(isinstance(s, numbers.Real) and not isinstance(s, bool) for s in seconds)
    return {
        "key": run,
        "group": str(rec.get("group", "")),
        "version": int(rec.get("version") or 0),
        "device": prov.get("device"),
        "date": prov.get("date"),
        "epochs_run": None if epochs_run is None else int(record_number(epochs_run, run, "epochs_run")),
        "train_seconds": float(sum(seconds)) if timed else None,
        "plan_id": queue.get("id"),
        "queue_seconds": (
            None if queue.get("seconds") is None else record_number(queue["seconds"], run, "queue.seconds")
        ),
    }
