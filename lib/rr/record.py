"""A paper-4 run record, typed: what :func:`lib.rr.experiment.run_loss` returns (a signed JSON
dict, :mod:`calibook.runs`), read once through :meth:`LossRecord.from_record`, which names the run
and what is missing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lib.engine.records import RunOrigin, check_record, origin_fields, record_number, require_keys

# The metrics of lib.rr.experiment.evaluate_logits: each before and after temperature scaling.
METRICS: tuple[str, ...] = (
    "temperature",
    *(
        f"{m}{suffix}"
        for suffix in ("", "_ts")
        for m in ("accuracy", "ece", "ece_a", "cwece", "cwece_a", "nll", "conf_gap")
    ),
)
CONFIG_KEYS: tuple[str, ...] = ("loss", "seed", "coverage", "nu")


@dataclass(frozen=True)
class LossRecord(RunOrigin):
    """One finished paper-4 run: the loss, seed, ``coverage`` and ``nu``, its test ``metrics``
    (:func:`lib.rr.experiment.evaluate_logits`), the head's ``train_accuracy`` and ``diverged_epoch``
    where it has them, and where it ran (:func:`lib.engine.records.origin_fields`); ``raw`` is the record."""

    loss: str
    seed: int
    coverage: float
    nu: float
    mode: str | None
    metrics: Mapping[str, float]
    backbone_test_accuracy: float | None
    raw: Mapping[str, Any] = field(repr=False)
    train_accuracy: float | None = None
    diverged_epoch: int | None = None

    @classmethod
    def from_record(cls, rec: Any) -> LossRecord:
        """Type a record of ``run_loss`` (cached or published); a ``LossRecord`` is returned as it
        is. ``ValueError`` naming the run and what is missing or mistyped for anything else."""
        if isinstance(rec, LossRecord):
            return rec
        run, config = check_record(rec, "a paper-4 run record", "lib.rr.experiment.run_loss", CONFIG_KEYS)
        block = rec.get("metrics")
        if not isinstance(block, Mapping):
            raise ValueError(
                f"records: run {run} has no metrics block (got {type(block).__name__}); a record of "
                "run_loss keeps the metrics of lib.rr.experiment.evaluate_logits"
            )
        require_keys(block, METRICS, run, "lib.rr.experiment.evaluate_logits")
        backbone, train, diverged = (rec.get(k) for k in ("backbone_test_accuracy", "train_accuracy", "diverged_epoch"))
        return cls(
            loss=str(config["loss"]),
            seed=int(record_number(config["seed"], run, "config.seed")),
            coverage=record_number(config["coverage"], run, "config.coverage"),
            nu=record_number(config["nu"], run, "config.nu"),
            mode=config.get("mode"),
            metrics={k: record_number(v, run, f"metrics.{k}") for k, v in block.items()},
            backbone_test_accuracy=None if backbone is None else record_number(backbone, run, "backbone_test_accuracy"),
            **origin_fields(rec),
            raw=rec,
            train_accuracy=None if train is None else record_number(train, run, "train_accuracy"),
            diverged_epoch=None if diverged is None else int(record_number(diverged, run, "diverged_epoch")),
        )
