"""How long the paper-scale plan takes on the device, from committed epoch benchmarks.

``python -m lib paper --dry-run`` prints, per page, the runs done and left, the GPU-minutes left and
the 30-minute windows they need. Epoch times come from ``bench/results/epoch_cuda-*.json``
(``python bench/bench_epoch.py --stack N`` on the GPU) when one is committed, stacked figures
first; otherwise from the CPU benchmark, and the projection then says ``cpu-extrapolated`` (minutes
on that CPU, not on a GPU). Stacking is taken into account: a stack of N runs costs what the
benchmark measured for N runs trained as one model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lib.config import repo_root

#: Training minutes one 30-minute window yields -- calls of <= 10 minutes training ~9 each, less the
#: machine's start, the first call's self-test and data unpacking.
WINDOW_TRAIN_MINUTES = 25.0
WARMUP_FRACTION = 0.4  # as lib.moe.methods: robust/FGR runs spend 40% of their epochs in ERM

__all__ = ["Bench", "WINDOW_TRAIN_MINUTES", "bench", "describe", "page_minutes", "windows"]


@dataclass
class Bench:
    """Seconds per epoch of one run by (dataset, method) (in a stack of ``stack`` runs where
    measured stacked), where they come from, and whether they are CPU figures extrapolated."""

    epoch_seconds: dict[tuple[str, str], float]
    stack: int
    source: str
    cpu_extrapolated: bool


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
    per: dict[tuple[str, str], float] = {}
    stack = 1
    from lib.moe.train import STACK_CHANNELS_LAST  # the layout stacks train with

    stacked = [r for r in results.get("stacked") or [] if bool(r.get("channels_last")) == STACK_CHANNELS_LAST] or list(
        results.get("stacked") or []
    )
    for r in stacked:
        per.setdefault((r["name"], r["method"]), float(r["run_epoch_seconds"]))
        stack = max(stack, int(r.get("stack", 1)))
    for r in results.get("results", []):
        per.setdefault((r["name"], r["method"]), float(r["epoch_seconds"]))
    return Bench(per, stack, f"{source} ({results.get('device', '?')})", cpu)


def _run_seconds(b: Bench, dataset: str, method: str, epochs: int, warmup: int) -> float | None:
    # an unmeasured method costs what its step kind costs: FGR's step for fgr_robust, Vanilla's otherwise
    v = (
        b.epoch_seconds.get((dataset, method))
        or (b.epoch_seconds.get((dataset, "fgr")) if "fgr" in method else None)
        or b.epoch_seconds.get((dataset, "vanilla"))
    )
    if v is None:
        return None
    erm = b.epoch_seconds.get((dataset, "vanilla"), v)
    return warmup * erm + (epochs - warmup) * v


def page_minutes(items: Sequence[Any], b: Bench) -> float | None:
    """Training minutes of the runs ``items`` (one page) on the benchmark's device, stacked as measured;
    ``None`` when the benchmark covers none of them (the WRN and text pages)."""
    from lib.pages import get

    total, known = 0.0, False
    for it in items:
        cfg = it.config
        dataset = get(it.page).bench  # the benchmark data set the page's epochs are measured on
        if not dataset or not hasattr(cfg, "warmup"):
            continue
        sec = _run_seconds(b, dataset, cfg.method, cfg.epochs, cfg.warmup)
        if sec is not None:
            total, known = total + sec, True
    return total / 60 if known else None


def windows(minutes: float, per_window: float = WINDOW_TRAIN_MINUTES) -> int:
    """30-minute windows needed for ``minutes`` of training (``per_window`` training minutes each)."""
    if not per_window > 0:
        raise ValueError(f"per_window: must be positive, got {per_window!r}")
    return math.ceil(max(minutes, 0.0) / per_window - 1e-9)


def describe(items: Sequence[Any], b: Bench | None = None) -> str:
    """The plan as text: one line per page with runs done and left, minutes left and windows."""
    b = b or bench()
    unit = "CPU-minutes, cpu-extrapolated" if b.cpu_extrapolated else "GPU-minutes"
    lines = [
        f"projected from {b.source}: {unit}; stacks of {b.stack} run(s) as measured; "
        f"{WINDOW_TRAIN_MINUTES:g} training minutes per 30-minute window"
    ]
    grand = 0.0
    from lib.nets.backbones import family
    from lib.pages import get

    for page in dict.fromkeys(it.page for it in items):
        its = [it for it in items if it.page == page]
        left = [it for it in its if not it.done]
        mins = page_minutes(left, b)
        how = "stacked" if get(page).bench else "one at a time"  # the benchmarked pages train stacked
        if mins is None:
            cost = "    (no benchmark)"
        else:
            grand += mins
            cost = f"~{mins:8.1f} min" + ("" if b.cpu_extrapolated else f"  {windows(mins):3d} window(s)")
        lines.append(f"{page:15s} {len(its) - len(left):4d} done {len(left):4d} left  {cost}  ({how})")
        c = its[0].config
        if hasattr(c, "backbone") and family(c.backbone) == "imagenet":
            # which ImageNet network, and never "pretrained" without weights
            lines.append(f"    backbone {c.backbone} ({'pretrained' if c.pretrained else 'scratch'})")
        lines += [f"    {it.id}" for it in left[:3]] + ([f"    ... {len(left) - 3} more"] if len(left) > 3 else [])
    lines.append(
        f"{'benchmarked':15s} ~{grand:.1f} min ({unit}), "
        + (
            "GPU windows unknown: run `python3 bench/bench_epoch.py --stack 8` on the GPU and commit its JSON"
            if b.cpu_extrapolated
            else f"{windows(grand)} window(s) of 30 minutes"
        )
    )
    return "\n".join(lines)
