"""How long the paper-scale plan takes on the device, and how many runs one call can finish.

``python -m lib paper --dry-run`` prints, per page, the runs done and left, the GPU-minutes left and
the GPU sessions they need, counted with the training minutes the recipe (:mod:`lib.gpu.recipe`)
leaves per session. Epoch times come from ``bench/results/epoch_cuda-*.json`` (``python bench/bench_epoch.py
--stack N`` on the GPU: the start of the recipe's call) when one is committed, stacked figures first;
otherwise from the CPU benchmark, and the projection then says ``cpu-extrapolated`` (minutes on that
CPU, not on a GPU). A run's epoch in a stack of k runs costs what the benchmark measured alone (k = 1)
and per run in its stack of N, linearly in between (:func:`member_epoch_seconds`).

The same figures size a call's stacks (:func:`fit_batch`): the queue hands a page only the runs
whose stacks, trained one after the other as the stacked engine groups them
(:func:`lib.moe.grid.stack_groups`), end inside the call's training minutes: a run cut by a
deadline would lose its checkpoints with the machine.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lib.config import repo_root
from lib.gpu.recipe import SESSION_MINUTES, training_minutes
from lib.moe.grid import stack_groups
from lib.moe.train import STACK_CHANNELS_LAST
from lib.nets.backbones import family
from lib.pages import get as get_page

#: Training minutes one GPU session yields: the recipe's one call.
SESSION_TRAIN_MINUTES = training_minutes()

__all__ = [
    "Bench",
    "SESSION_TRAIN_MINUTES",
    "batch_seconds",
    "bench",
    "describe",
    "fit_batch",
    "member_epoch_seconds",
    "page_minutes",
    "sessions",
]


@dataclass
class Bench:
    """Seconds per epoch of one run by (dataset, method): ``epoch_seconds`` in a stack of ``stack``
    runs (where measured stacked, else alone) and ``alone`` (trained alone); where they come from,
    and whether they are CPU figures extrapolated."""

    epoch_seconds: dict[tuple[str, str], float]
    stack: int
    source: str
    cpu_extrapolated: bool
    alone: dict[tuple[str, str], float] = field(default_factory=dict)


def bench(results: Mapping[str, Any] | None = None, source: str = "") -> Bench:
    """The newest committed CUDA epoch benchmark (its stacked figures first), else the CPU one; or
    the given ``results`` (a ``bench/bench_epoch.py`` JSON)."""
    if results is None:
        folder = repo_root() / "bench" / "results"
        files = sorted(folder.glob("epoch_cuda*.json")) or sorted(folder.glob("epoch_cpu*.json"))
        if not files:
            return Bench({}, 1, "no benchmark", True)
        results, source = json.loads(files[-1].read_text()), files[-1].name
    cpu = not str(results.get("device", "")).lower().startswith(("nvidia", "cuda")) and "cuda" not in source
    stacked = [r for r in results.get("stacked") or [] if bool(r.get("channels_last")) == STACK_CHANNELS_LAST] or list(
        results.get("stacked") or []
    )  # the layout stacks train with
    per: dict[tuple[str, str], float] = {}
    stack = 1
    for r in stacked:
        per.setdefault((r["name"], r["method"]), float(r["run_epoch_seconds"]))
        stack = max(stack, int(r.get("stack", 1)))
    alone = {(r["name"], r["method"]): float(r["epoch_seconds"]) for r in results.get("results", [])}
    for k, v in alone.items():
        per.setdefault(k, v)
    return Bench(per, stack, f"{source} ({results.get('device', '?')})", cpu, alone)


def _lookup(table: Mapping[tuple[str, str], float], dataset: str, method: str) -> float | None:
    # an unmeasured method costs what its step kind costs: FGR's step for fgr_robust, Vanilla's otherwise
    return (
        table.get((dataset, method))
        or (table.get((dataset, "fgr")) if "fgr" in method else None)
        or table.get((dataset, "vanilla"))
    )


def member_epoch_seconds(b: Bench, dataset: str, method: str, k: int | None = None) -> float | None:
    """Seconds one run of ``method`` adds to an epoch of a stack of ``k`` runs (``None``: the stack
    measured): measured alone at k = 1 and per run in a stack of ``b.stack``, linear in between."""
    stacked, alone = _lookup(b.epoch_seconds, dataset, method), _lookup(b.alone, dataset, method)
    if k is None or alone is None or stacked is None or b.stack <= 1 or k >= b.stack:
        return stacked
    return alone + (stacked - alone) * (max(k, 1) - 1) / (b.stack - 1)


def _run_seconds(b: Bench, dataset: str, cfg: Any, k: int | None = None) -> float | None:
    """Seconds one run of ``cfg`` adds to its stack of ``k`` (robust/FGR: warmup epochs at Vanilla's step)."""
    v = member_epoch_seconds(b, dataset, cfg.method, k)
    if v is None:
        return None
    erm = member_epoch_seconds(b, dataset, "vanilla", k) or v
    return cfg.warmup * erm + (cfg.epochs - cfg.warmup) * v


def page_minutes(items: Sequence[Any], b: Bench) -> float | None:
    """Training minutes of the runs ``items`` (one page) on the benchmark's device, stacked as measured;
    ``None`` when the benchmark covers none of them (the WRN and text pages)."""
    total, known = 0.0, False
    for it in items:
        dataset = get_page(it.page).bench  # the benchmark data set the page's epochs are measured on
        if not dataset or not hasattr(it.config, "warmup"):
            continue
        sec = _run_seconds(b, dataset, it.config)
        if sec is not None:
            total, known = total + sec, True
    return total / 60 if known else None


def batch_seconds(b: Bench, dataset: str, configs: Sequence[Any], stack: int) -> float | None:
    """Seconds the stacked engine takes for ``configs`` in stacks of at most ``stack``, trained one
    stack after another (each as long as its slowest member times its size); ``None`` unmeasured."""
    total = 0.0
    for group in stack_groups(configs, stack):
        secs = [_run_seconds(b, dataset, c, len(group)) for c in group]
        if any(s is None for s in secs):
            return None
        total += len(group) * max(secs)  # type: ignore[type-var]
    return total


def fit_batch(
    items: Sequence[Any], b: Bench, dataset: str, seconds: float, cap: int | None = None
) -> tuple[list[Any], int, float] | None:
    """The longest head of ``items`` (plan order) whose stacks (at most ``cap`` runs, else as many as
    the head holds) end within ``seconds``: (runs, stack size, seconds), with no runs when not even
    the first fits; ``None`` when the benchmark does not cover them."""
    best: tuple[list[Any], int, float] = ([], 1, 0.0)
    for k in range(1, len(items) + 1):
        n = min(k, cap) if cap else k
        secs = batch_seconds(b, dataset, [it.config for it in items[:k]], n)
        if secs is None:
            return None
        if secs > seconds:
            break
        best = (list(items[:k]), n, secs)
    return best


def sessions(minutes: float, per_session: float = SESSION_TRAIN_MINUTES) -> int:
    """GPU sessions needed for ``minutes`` of training (``per_session`` training minutes each)."""
    if not per_session > 0:
        raise ValueError(f"per_session: must be positive, got {per_session!r}")
    return math.ceil(max(minutes, 0.0) / per_session - 1e-9)


def describe(items: Sequence[Any], b: Bench | None = None, unplanned: Mapping[str, str] | None = None) -> str:
    """The plan as text: one line per page with runs done and left, minutes left and GPU sessions
    (``unplanned``: pages that could not be planned here, and why)."""
    b = b or bench()
    unit = "CPU-minutes, cpu-extrapolated" if b.cpu_extrapolated else "GPU-minutes"
    lines = [
        f"projected from {b.source}: {unit}; stacks of {b.stack} run(s) as measured; "
        f"{SESSION_TRAIN_MINUTES:g} training minutes per {SESSION_MINUTES:g}-minute GPU session "
        "(one call; results/README.md)"
    ]
    grand = 0.0
    for page in dict.fromkeys(it.page for it in items):
        its = [it for it in items if it.page == page]
        left = [it for it in its if not it.done]
        mins = page_minutes(left, b)
        how = "stacked" if get_page(page).bench else "one at a time"  # the benchmarked pages train stacked
        if mins is None:
            cost = "    (no benchmark: each run must end inside one call)"
        else:
            grand += mins
            cost = f"~{mins:8.1f} min" + ("" if b.cpu_extrapolated else f"  {sessions(mins):3d} session(s)")
        lines.append(f"{page:15s} {len(its) - len(left):4d} done {len(left):4d} left  {cost}  ({how})")
        c = its[0].config
        if hasattr(c, "backbone") and family(c.backbone) == "imagenet":
            # which ImageNet network, and never "pretrained" without weights
            lines.append(f"    backbone {c.backbone} ({'pretrained' if c.pretrained else 'scratch'})")
        lines += [f"    {it.id}" for it in left[:3]] + ([f"    ... {len(left) - 3} more"] if len(left) > 3 else [])
    lines += [f"{page:15s} not planned here: {why}" for page, why in (unplanned or {}).items()]
    lines.append(
        f"{'benchmarked':15s} ~{grand:.1f} min ({unit}), "
        + (
            "GPU sessions unknown: run the call of results/README.md (it runs the CUDA benchmark) and commit its JSON"
            if b.cpu_extrapolated
            else f"{sessions(grand)} session(s) of {SESSION_MINUTES:g} minutes"
        )
    )
    return "\n".join(lines)
