"""A paper-1 run record, typed: what :func:`lib.moe.train.train_run` saves, read as a dataclass
(:meth:`MoERecord.from_record` checks the shape once and names what is missing)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SUBSETS: tuple[str, ...] = ("all", "hard")


@dataclass(frozen=True)
class SubsetMetrics:
    """Test metrics of one run on one subset (``"all"`` or ``"hard"``); ``None`` where not computed."""

    n: int
    accuracy: float
    ece: float
    ece_ts: float | None = None
    nll: float | None = None

    @classmethod
    def from_dict(cls, block: Mapping[str, Any]) -> SubsetMetrics:
        """Read a record's ``metrics[subset]`` block."""
        return cls(
            n=int(block.get("n") or 0),
            accuracy=float(block["accuracy"]),
            ece=float(block["ece"]),
            **{k: (None if block.get(k) is None else float(block[k])) for k in ("ece_ts", "nll")},
        )


@dataclass(frozen=True)
class MoERecord:
    """One finished paper-1 run: what it was, where it ran and its metrics per subset; ``metrics`` is the
    record's whole metrics block (MoCaE's temperatures, per-group ECE on text), ``raw`` the record."""

    key: str
    version: int
    method: str
    seed: int
    lam: float | None
    warmup_epochs: int | None
    epochs: int | None
    backbone: str | None
    pretrained: bool
    device: str | None
    date: str | None
    train_seconds: float | None
    subsets: dict[str, SubsetMetrics]
    routing_entropy: dict[str, float]
    metrics: Mapping[str, Any] = field(repr=False)
    raw: Mapping[str, Any] = field(repr=False)

    @classmethod
    def from_record(cls, rec: Any) -> MoERecord:
        """Type a record of :func:`lib.moe.train.train_run` (cached, committed or a MoCaE view);
        ``ValueError`` naming what is missing for anything else."""
        if isinstance(rec, MoERecord):
            return rec
        if not isinstance(rec, Mapping) or "metrics" not in rec or "method" not in rec:
            raise ValueError(
                "records: expected result records from lib.moe.train.train_run "
                f"(with 'method' and 'metrics'), got {type(rec).__name__}"
            )
        train = (rec.get("config") or {}).get("train") or {}
        metrics = rec["metrics"]
        try:
            subsets = {s: SubsetMetrics.from_dict(metrics[s]) for s in SUBSETS if metrics.get(s)}
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"records: run {rec.get('key')} has an unreadable metrics block ({err})") from None
        return cls(
            key=str(rec.get("key", "")),
            version=int(rec.get("version") or 0),
            method=str(rec["method"]),
            seed=int(train.get("seed", 0)),
            lam=train.get("lam"),
            warmup_epochs=train.get("warmup_epochs"),
            epochs=train.get("epochs"),
            backbone=rec.get("backbone"),
            pretrained=bool(rec.get("pretrained")),
            device=rec.get("device"),
            date=(rec.get("provenance") or {}).get("date"),
            train_seconds=(rec.get("wall_time") or {}).get("train"),
            subsets=subsets,
            routing_entropy=dict(metrics.get("routing_entropy") or {}),
            metrics=metrics,
            raw=rec,
        )
