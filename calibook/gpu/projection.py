"""How long the paper-scale plan takes on the device, and how many runs one call can finish.

``python -m calibook paper --dry-run`` prints, per page, the runs done and left, the GPU-minutes left and
the GPU sessions they need, counted with the training minutes the recipe (:mod:`calibook.gpu.recipe`)
leaves per session. Epoch times come from ``bench/results/epoch_cuda-*.json`` (``python bench/bench_epoch.py
--pack 16 8 32`` on the GPU: the start of the recipe's call) when one is committed, each method's
cheapest measured pack first (older benchmarks' vmap stacks where no pack was
measured); otherwise from the CPU benchmark, and the projection then says ``cpu-extrapolated``
(minutes on that CPU, not on a GPU). A run's epoch in a pack of k runs costs what the benchmark
measured alone (k = 1) and per run in its pack of N, linearly in between (:func:`member_epoch_seconds`);
a pack of several runs also pays its measured build-and-compile time once (``Bench.pack_seconds``).

The step benchmark leaves out what a whole run also spends (data, augmentation, evaluation), so
runs published from the benchmark's device correct it (:func:`measured_runs`): a method trained
there costs what its slowest run cost, and any other run the benchmark's estimate times the largest
ratio of a measured run to its estimate (on the H200, 0.92-1.28 against the step figures). Packs
are used only where the benchmark measured them clearly cheaper per run than a run alone
(:data:`STACK_GAIN`): on the H200 a vmap stack of 8 cost what runs alone do.

Runs alone may also train in several processes at once (``bench_epoch.py --workers``: each run's
step is ``slowdown`` times as long with N processes): the queue does so where N / slowdown is at
least :data:`WORKER_GAIN` (``Bench.workers``), every run's time then multiplied by the slowdown.

The same figures size a call's work (:func:`fit_batch`): the queue hands a page the runs, in plan
order, whose packs, trained one after the other as the packed engine groups them
(:func:`lib.moe.grid.stack_groups`), end inside the call's training minutes, skipping a run that
would not (a run cut by a deadline would lose its checkpoints with the machine).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from lib.config import repo_root
from calibook.artifacts import results_dir
from calibook.runs import read_record
from calibook.gpu.recipe import SESSION_MINUTES, training_minutes
from lib.moe.grid import stack_groups
from lib.nets.backbones import family
from calibook.pages import get as get_page

#: Training minutes one GPU session yields: its training calls' (the recipe's, calibook.gpu.recipe.SESSION).
SESSION_TRAIN_MINUTES = training_minutes()

#: Stacks are used when every stacked method's run costs at most this fraction of its run alone.
STACK_GAIN = 0.8

#: Runs train in N processes at once when N of them take at most 1 / WORKER_GAIN of N runs alone.
WORKER_GAIN = 1.3

#: How much longer than the step benchmark's estimate a whole run is taken to be on a GPU with no
#: run published yet: the largest ratio measured on the H200 (1.28), rounded up.
UNMEASURED_FACTOR = 1.3

__all__ = [
    "Bench",
    "SESSION_TRAIN_MINUTES",
    "STACK_GAIN",
    "cheapest_packs",
    "UNMEASURED_FACTOR",
    "WORKER_GAIN",
    "batch_seconds",
    "bench",
    "describe",
    "fit_batch",
    "measured_runs",
    "member_epoch_seconds",
    "page_minutes",
    "run_seconds",
    "sessions",
]


@dataclass
class Bench:
    """Seconds per epoch of one run by (dataset, method): ``epoch_seconds`` in a stack of ``stack``
    runs (where measured stacked, else alone) and ``alone`` (trained alone); where they come from,
    and whether they are CPU figures extrapolated. ``runs``: seconds of whole runs published from
    this device by (dataset, method, epochs, warmup epochs); ``factor``: how much longer than the
    benchmark's estimate a measured run took, at most (without measured runs:
    :data:`UNMEASURED_FACTOR` on a GPU, 1 for CPU figures). ``slowdowns``: by
    a count of processes training at once, how much longer each run takes (the slowest method);
    ``workers``: the processes a call trains in (1, or a measured count that pays)."""

    epoch_seconds: dict[tuple[str, str], float]
    stack: int
    source: str
    cpu_extrapolated: bool
    alone: dict[tuple[str, str], float] = field(default_factory=dict)
    runs: dict[tuple[str, str, int, int], float] = field(default_factory=dict)
    factor: float = 1.0
    slowdowns: dict[int, float] = field(default_factory=dict)
    workers: int = 1
    pack_seconds: float = 0.0  # what building (and compiling) a pack costs once, as measured
    compiled: bool = False  # the packs measured cheapest were compiled: the queue compiles its packs

    @property
    def slowdown(self) -> float:
        """How much longer each run takes with ``workers`` processes at once (1 for one)."""
        return self.slowdowns[self.workers] if self.workers > 1 else 1.0


def measured_runs(device: str) -> dict[tuple[str, str, int, int], float]:
    """Training seconds of the runs published in ``results/`` from ``device``, by (the page's
    benchmark data set, method, epochs, warmup epochs); the slowest run of each. Resumed runs and
    pages without a benchmark are left out."""
    out: dict[tuple[str, str, int, int], float] = {}
    for path in sorted(results_dir().glob("*/*/*.json")):
        rec = read_record(path)
        if rec is None or rec.get("device") != device or rec.get("resumed_from"):
            continue
        if int((rec.get("queue") or {}).get("workers") or 1) > 1:  # slowed by its neighbours
            continue
        try:
            dataset, train = get_page(rec["queue"]["page"]).bench, rec["config"]["train"]
            secs = float(rec["wall_time"]["train"])
            key = (dataset, str(train["method"]), int(train["epochs"]), int(train["warmup_epochs"]))
        except (KeyError, TypeError, ValueError):
            continue
        if dataset:
            out[key] = max(out.get(key, 0.0), secs)
    return out


def cheapest_packs(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Per (data set, method), the measured pack (size, eager or compiled) with the cheapest run-epoch
    among ``rows`` (``bench_epoch.py --pack``'s); packs that failed are left out."""
    best: dict[tuple[str, str], Mapping[str, Any]] = {}
    for r in rows:
        key = (r.get("name", ""), r.get("method", ""))
        if "error" not in r and (key not in best or r["run_epoch_seconds"] < best[key]["run_epoch_seconds"]):
            best[key] = r
    return list(best.values())


def _pack_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The benchmark's rows of runs trained at once, as ``stack`` and ``run_epoch_seconds``: per method
    its cheapest measured pack (:func:`cheapest_packs`: the engine's way, eager or compiled) if the
    benchmark has packs, else the stacked rows of older benchmarks (``torch.func.vmap``,
    channels_last), which only count where they paid."""
    best = cheapest_packs(results.get("packed") or [])
    if best:
        return [dict(r, stack=r["pack"]) for r in best]
    rows = list(results.get("stacked") or [])
    return [r for r in rows if r.get("channels_last")] or rows


def bench(
    results: Mapping[str, Any] | None = None,
    source: str = "",
    runs: Mapping[tuple[str, str, int, int], float] | None = None,
    device: str | None = None,
) -> Bench:
    """The committed CUDA epoch benchmark of ``device`` (a GPU's name, as ``bench_epoch.py`` names
    its file) if there is one, else the last by name, else the CPU one; or the given ``results`` (a
    ``bench/bench_epoch.py`` JSON). Its stacked figures count where they pay (:data:`STACK_GAIN`);
    ``runs`` (default: :func:`measured_runs` of a CUDA benchmark's device) correct the estimates."""
    if results is None:
        folder = repo_root() / "bench" / "results"
        own = folder / f"epoch_cuda-{(device or '').replace(' ', '_')}.json"
        files = [own] if device and own.exists() else []
        files = files or sorted(folder.glob("epoch_cuda*.json")) or sorted(folder.glob("epoch_cpu*.json"))
        if not files:
            return Bench({}, 1, "no benchmark", True)
        results, source = json.loads(files[-1].read_text()), files[-1].name
    cpu = not str(results.get("device", "")).lower().startswith(("nvidia", "cuda")) and "cuda" not in source
    stacked = _pack_rows(results)
    per: dict[tuple[str, str], float] = {}
    stack = 1
    for r in stacked:
        per.setdefault((r["name"], r["method"]), float(r["run_epoch_seconds"]))
        stack = max(stack, int(r.get("stack", 1)))
    alone = {(r["name"], r["method"]): float(r["epoch_seconds"]) for r in results.get("results", [])}
    if runs is None:
        runs = {} if cpu else measured_runs(str(results.get("device", "")))
    # a stacked run must be clearly cheaper than one alone (a measured whole run, else the benchmark's)
    real = {(d, m): secs / e for (d, m, e, w), secs in runs.items() if w == 0 and e > 0}
    if any(v > STACK_GAIN * (real.get(k) or alone.get(k, math.inf)) for k, v in per.items()):
        per, stack = {}, 1
    for k, v in alone.items():
        per.setdefault(k, v)
    b = Bench(per, stack, f"{source} ({results.get('device', '?')})", cpu, alone)
    b.pack_seconds = max((float(r.get("compile_seconds", 0.0)) for r in stacked if stack > 1), default=0.0)
    b.compiled = stack > 1 and all(r.get("compiled") for r in stacked)  # where compiled packs won for every method
    ratios = [
        secs / est
        for (d, m, e, w), secs in runs.items()
        if (est := run_seconds(b, d, SimpleNamespace(method=m, epochs=e, warmup=w), 1))
    ]
    b.runs, b.factor = dict(runs), max(ratios, default=1.0 if cpu else UNMEASURED_FACTOR)
    for r in results.get("workers") or []:
        if "error" in r:  # these processes could not train at once
            continue
        n = int(r["workers"])
        b.slowdowns[n] = max(b.slowdowns.get(n, 0.0), float(r["seconds_per_step"]) / float(r["alone_seconds_per_step"]))
    paying = [n for n, slow in b.slowdowns.items() if n / slow >= WORKER_GAIN]
    b.workers = max(paying, key=lambda n: n / b.slowdowns[n], default=1)
    return b


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


def run_seconds(b: Bench, dataset: str, cfg: Any, k: int | None = None) -> float | None:
    """Seconds one run of ``cfg`` adds to its stack of ``k``: a run alone as long as the same run
    took on this device; else the benchmark's estimate (robust/FGR: warmup epochs at Vanilla's step)
    times ``b.factor``."""
    if (k or b.stack) <= 1 and (took := b.runs.get((dataset, cfg.method, cfg.epochs, cfg.warmup))):
        return took * b.slowdown
    v = member_epoch_seconds(b, dataset, cfg.method, k)
    if v is None:
        return None
    erm = member_epoch_seconds(b, dataset, "vanilla", k) or v
    return (cfg.warmup * erm + (cfg.epochs - cfg.warmup) * v) * b.factor * b.slowdown


def page_minutes(items: Sequence[Any], b: Bench) -> float | None:
    """Training minutes of the runs ``items`` (one page) on the benchmark's device, stacked as measured
    and in ``b.workers`` processes at once; ``None`` when the benchmark covers none of them (the WRN
    and text pages)."""
    total, known = 0.0, False
    for it in items:
        dataset = get_page(it.page).bench  # the benchmark data set the page's epochs are measured on
        if not dataset or not hasattr(it.config, "warmup"):
            continue
        sec = run_seconds(b, dataset, it.config)
        if sec is not None:
            total, known = total + sec, True
    return total / 60 / b.workers if known else None


def batch_seconds(b: Bench, dataset: str, configs: Sequence[Any], stack: int) -> float | None:
    """Seconds the packed engine takes for ``configs`` in packs of at most ``stack``, trained one
    pack after another (each as long as its slowest run times its size, plus what building and
    compiling a pack costs, :attr:`Bench.pack_seconds`); ``None`` unmeasured."""
    total = 0.0
    for group in stack_groups(configs, stack):
        secs = [run_seconds(b, dataset, c, len(group)) for c in group]
        if any(s is None for s in secs):
            return None
        total += len(group) * max(secs) + (b.pack_seconds if len(group) > 1 else 0.0)  # type: ignore[type-var]
    return total


def fit_batch(
    items: Sequence[Any], b: Bench, dataset: str, seconds: float, cap: int | None = None
) -> tuple[list[Any], int, float] | None:
    """The runs of ``items`` taken in plan order, each that still lets the stacks (at most ``cap``
    runs, else as many as taken) end within ``seconds``, a
    run that would not skipped: (runs, stack size, seconds), with no runs when none fits; ``None``
    when the benchmark does not cover them."""
    best: tuple[list[Any], int, float] = ([], 1, 0.0)
    for it in items:
        take = [*best[0], it]
        n = min(len(take), cap or len(take))
        secs = batch_seconds(b, dataset, [t.config for t in take], n)
        if secs is None:
            return None
        if secs <= seconds:
            best = (take, n, secs)
    return best


def sessions(minutes: float) -> int:
    """GPU sessions needed for ``minutes`` of training (:data:`SESSION_TRAIN_MINUTES` training minutes each)."""
    return math.ceil(max(minutes, 0.0) / SESSION_TRAIN_MINUTES - 1e-9)


def describe(items: Sequence[Any], b: Bench | None = None, unplanned: Mapping[str, str] | None = None) -> str:
    """The plan as text: one line per page with runs done and left, minutes left and GPU sessions
    (``unplanned``: pages that could not be planned here, and why)."""
    b = b or bench()
    unit = "CPU-minutes, cpu-extrapolated" if b.cpu_extrapolated else "GPU-minutes"
    lines = [
        f"projected from {b.source}: {unit}; packs of up to {b.stack} run(s) as measured"
        + (f", {b.workers} processes at once (each run {b.slowdown:.2f} x as long)" if b.workers > 1 else "")
        + "; "
        f"{SESSION_TRAIN_MINUTES:g} training minutes per {SESSION_MINUTES:g}-minute GPU session "
        "(its training calls together; results/README.md)"
    ]
    grand = 0.0
    for page in dict.fromkeys(it.page for it in items):
        its = [it for it in items if it.page == page]
        left = [it for it in its if not it.done]
        mins = page_minutes(left, b)
        how = "packed" if get_page(page).bench else "one at a time"  # the benchmarked pages train packed
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
