"""Planned runs: one :class:`Item` per run a page trains, the unit of the paper-scale queue.

A page's run plan (:meth:`lib.page.Page.runs`) lists :class:`Item`\\ s; the queue trains and publishes
them, the paper-scale tables count them, and :func:`matches` says whether a published record is the
run an item plans (same plan id and same config).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Item", "coverage", "coverage_text", "matches", "plain"]


def plain(obj: Any) -> Any:
    """``obj`` as the plain JSON types a record holds once read back (keys sorted, tuples as lists)."""
    return json.loads(json.dumps(obj, sort_keys=True, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


@dataclass
class Item:
    """One planned run: its page, an id unique in the plan, its seed, epochs and method (the label
    coverage tables count by), its ``config`` (an object with a ``key()`` -- paper 1's TrainConfig --
    or the dict of the run's config known before its data is loaded), the PACS ``target``, and
    ``extra`` (e.g. paper 2's sweep ``point``). ``post_hoc`` runs are made from another run's record
    (MoCaE from Vanilla MoE) and never trained by the queue."""

    page: str
    id: str
    seed: int
    epochs: int
    method: str
    config: Any = None
    target: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    post_hoc: bool = False
    record: dict[str, Any] | None = None  # its published record (set by the queue's plan), if any

    @property
    def done(self) -> bool:
        """Whether the run is published in ``results/`` (same plan id and config)."""
        return self.record is not None


def matches(item: Item, record: Mapping[str, Any]) -> bool:
    """Whether a published ``record`` is the run ``item`` plans: same plan id and same config (a run of
    another scale or of an older config with the same id does not count)."""
    if (record.get("queue") or {}).get("id") != item.id:
        return False
    if hasattr(item.config, "key"):
        return record.get("config", {}).get("train") == plain(item.config.key())
    want = item.config
    return want is None or {k: record.get("config", {}).get(k) for k in want} == plain(want)


def coverage(items: Sequence[Item], got: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Per method (plan order): runs published (``got``: plan id -> record) and runs planned."""
    out: dict[str, tuple[int, int]] = {}
    for it in items:
        k, n = out.get(it.method, (0, 0))
        out[it.method] = (k + (it.id in got), n + 1)
    return out


def coverage_text(counts: Mapping[str, tuple[int, int]], unit: str) -> dict[str, str]:
    """:func:`coverage` as text per method: ``"k of n <unit>"``."""
    return {m: f"{k} of {n} {unit}" for m, (k, n) in counts.items()}
