"""A paper-1 run record is plain data (what :func:`lib.moe.train.train_run` saves); :func:`run_fields`
reads its run-level fields once, with the defaults of a record that lacks them, and
:func:`subset_metrics` one subset's test metrics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SUBSETS: tuple[str, ...] = ("all", "hard")


def run_fields(rec: Any) -> dict[str, Any]:
    """What a record of :func:`lib.moe.train.train_run` (cached, committed or a MoCaE view) says about
    its run: method, seed (0 when absent), lambda, warmup, epochs, backbone, pretrained, device, date,
    key, training seconds and code version; ``ValueError`` for anything that is not such a record."""
    if not isinstance(rec, Mapping) or "metrics" not in rec or "method" not in rec:
        raise ValueError(f"records: expected result records of lib.moe.train.train_run, got {type(rec).__name__}")
    train = (rec.get("config") or {}).get("train") or {}
    return {
        "method": rec["method"],
        "seed": int(train.get("seed", 0)),
        **{k: train.get(k) for k in ("lam", "warmup_epochs", "epochs")},
        "backbone": rec.get("backbone"),
        "pretrained": bool(rec.get("pretrained")),
        "device": rec.get("device"),
        "date": (rec.get("provenance") or {}).get("date"),
        "key": str(rec.get("key", "")),
        "train_seconds": (rec.get("wall_time") or {}).get("train"),
        "version": int(rec.get("version") or 0),
    }


def subset_metrics(rec: Mapping[str, Any], subset: str) -> dict[str, Any]:
    """``rec``'s test metrics on ``subset`` (``"all"`` or ``"hard"``): ``n``, ``accuracy`` and ``ece``
    as numbers, ``ece_ts`` (the paper's partial temperature fit), ``ece_ts_converged`` (a converged
    fit) and ``nll`` ``None`` where not computed; ``ValueError`` naming the run when the block lacks
    accuracy or ECE."""
    block = rec["metrics"][subset]
    try:
        optional = {k: None if block.get(k) is None else float(block[k]) for k in ("ece_ts", "ece_ts_converged", "nll")}
        return {
            "n": int(block.get("n") or 0),
            "accuracy": float(block["accuracy"]),
            "ece": float(block["ece"]),
            **optional,
        }
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"records: run {rec.get('key')} has an unreadable metrics block ({err})") from None
