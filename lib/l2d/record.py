"""A paper-2 run record, typed: what :func:`lib.l2d.cifar10.run_cifar` and
:func:`lib.l2d.gaussians.run_gaussian` return (signed JSON dicts, :mod:`calibook.runs`), read once
through :meth:`L2DRecord.from_record`, which names the run and what is missing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lib.engine.records import RunOrigin, check_record, origin_fields, record_number, record_numbers, require_keys

POINT_KEYS: tuple[str, ...] = ("experiment", "value", "surrogate", "seed")  # the grid point
SOURCE = "lib.l2d.cifar10.run_cifar or l2d_gaussians.run_gaussian"
METRIC_KEYS: tuple[str, ...] = (
    "ece",
    "ece_per_expert",
    "system_accuracy",
    "classifier_accuracy",
    "defer_rate",
    "coverage",
)


@dataclass(frozen=True)
class L2DRecord(RunOrigin):
    """One finished paper-2 run: its grid point, its test metrics (:func:`lib.l2d.experiment.l2d_metrics`;
    ``coverage`` has one entry more than ``ece_per_expert``), and where it ran
    (:func:`lib.engine.records.origin_fields`); ``raw`` is the record."""

    experiment: str
    value: float
    surrogate: str
    seed: int
    ece: float
    ece_per_expert: tuple[float, ...]
    system_accuracy: float
    classifier_accuracy: float
    defer_rate: float
    coverage: tuple[float, ...]
    frac_estimate_above_1: float | None
    backbone_test_accuracy: float | None
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def ece_random_expert(self) -> float:
        """The ECE of expert 0, the random expert of the dependence experiment (Fig. 1c/f)."""
        return self.ece_per_expert[0]

    @property
    def point(self) -> dict[str, Any]:
        """The run's grid point, as :func:`lib.l2d.experiment.grid` lists points."""
        return {"experiment": self.experiment, "value": self.value, "surrogate": self.surrogate, "seed": self.seed}

    @classmethod
    def from_record(cls, rec: Any) -> L2DRecord:
        """Type a record of ``run_cifar`` or ``run_gaussian`` (cached or published); an
        ``L2DRecord`` is returned as it is. ``ValueError`` naming the run and what is missing or
        mistyped for anything else."""
        if isinstance(rec, L2DRecord):
            return rec
        run, config = check_record(rec, "a paper-2 run record", SOURCE, POINT_KEYS)
        require_keys(rec, METRIC_KEYS, run, "lib.l2d.experiment.l2d_metrics")
        per_expert = record_numbers(rec["ece_per_expert"], run, "ece_per_expert")
        coverage = record_numbers(rec["coverage"], run, "coverage")
        if len(coverage) != len(per_expert) + 1:
            raise ValueError(
                f"records: run {run} has {len(per_expert)} experts in ece_per_expert but "
                f"{len(coverage)} coverage entries (expected the classifier's and one per expert)"
            )
        optional = {
            k: None if rec.get(k) is None else record_number(rec[k], run, k)
            for k in ("frac_estimate_above_1", "backbone_test_accuracy")
        }
        return cls(
            experiment=str(config["experiment"]),
            value=record_number(config["value"], run, "config.value"),
            surrogate=str(config["surrogate"]),
            seed=int(record_number(config["seed"], run, "config.seed")),
            ece=record_number(rec["ece"], run, "ece"),
            ece_per_expert=per_expert,
            system_accuracy=record_number(rec["system_accuracy"], run, "system_accuracy"),
            classifier_accuracy=record_number(rec["classifier_accuracy"], run, "classifier_accuracy"),
            defer_rate=record_number(rec["defer_rate"], run, "defer_rate"),
            coverage=coverage,
            **optional,
            **origin_fields(rec),
            raw=rec,
        )
