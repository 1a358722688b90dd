"""Paper 1's grids: many runs (methods x seeds x lambdas) trained together as stacked models.

:func:`run_grid` is what every paper-1 page and the paper-scale queue call: finished runs are loaded
(committed results first), the rest are grouped by architecture and optimizer settings and trained
``stack`` at a time as one stacked model on one device (:func:`lib.engine.stack.fit_stack`); each is
evaluated and saved as its own run, exactly as :func:`lib.moe_train.train_run` would save it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from filelock import Timeout

from lib.data.bundle import Bundle, check_bundle
from lib.engine.runs import Run, RunMissing, training
from lib.engine.stack import fit_stack
from lib.moe_methods import FGR_METHODS
from lib.moe_train import GROUP, TrainConfig, compute_run, finish_run, prepare_run, run_config, train_run
from lib.validation import check_int

__all__ = ["run_grid", "stack_groups", "train_stacked"]

def _available(configs: Sequence[TrainConfig], data: Bundle) -> list[dict[str, Any]]:
    out = []
    with training(False):
        for c in configs:
            try:
                out.append(train_run(c, data))
            except RunMissing:
                continue
    return out


# Fields that may differ inside one stack (each member has its own); all others must agree.
_PER_MEMBER = ("method", "seed", "lam", "warmup_epochs")


def _stack_key(cfg: TrainConfig) -> tuple[Any, ...]:
    shared = {k: v for k, v in cfg.key().items() if k not in _PER_MEMBER}
    arch = "single" if cfg.method == "single" else "moe"
    step = ("fgr", cfg.warmup) if cfg.method in FGR_METHODS else ("plain",)  # FGR forwards B + m rows
    return (arch, step, tuple(sorted((k, str(v)) for k, v in shared.items())))


def stack_groups(configs: Sequence[TrainConfig], stack: int) -> list[list[TrainConfig]]:
    """Split ``configs`` into stacks of at most ``stack`` runs that can train together (same
    architecture, optimizer settings and epochs; FGR runs only with FGR runs of the same warmup), in
    the order given."""
    check_int(stack, "stack", minimum=1)
    groups: dict[tuple[Any, ...], list[list[TrainConfig]]] = {}
    for c in configs:
        chunks = groups.setdefault(_stack_key(c), [])
        if not chunks or len(chunks[-1]) >= stack:
            chunks.append([])
        chunks[-1].append(c)
    return [chunk for chunks in groups.values() for chunk in chunks]


def _checkpoint_epoch(run: Run) -> int:
    ckpt = run.load_checkpoint()
    return int(ckpt["epoch"]) if ckpt is not None else 0


def train_stacked(configs: Sequence[TrainConfig], data: Bundle, stack: int = 8, deadline: float | None = None,
                  on_done: Callable[[TrainConfig, dict[str, Any]], None] | None = None) -> list[TrainConfig]:
    """Train the unfinished ``configs`` (no ``mocae``) in stacks; return those it trained.

    Runs another process is computing (its lock is held) are skipped. A stack starts only before
    ``deadline`` (``time.monotonic()``). ``on_done(cfg, record)`` is called as each run is saved.
    """
    by_start: dict[int, list[TrainConfig]] = {}
    for c in configs:
        run = Run(GROUP, run_config(c, data))
        if not run.done:
            by_start.setdefault(_checkpoint_epoch(run), []).append(c)
    trained: list[TrainConfig] = []
    for cfgs in by_start.values():
        for group in stack_groups(cfgs, stack):
            if deadline is not None and time.monotonic() >= deadline:
                return trained
            with contextlib.ExitStack() as locks:
                runs, ready = [], []
                for c in group:
                    run = Run(GROUP, run_config(c, data))
                    try:
                        locks.enter_context(run.lock().acquire(timeout=0))
                    except Timeout:
                        continue  # another process trains it
                    if not run.done:
                        runs.append(run)
                        ready.append(c)
                if not ready:
                    continue
                if len(ready) == 1:  # alone: the plain loop (we hold its lock already)
                    rec = runs[0].save_result(compute_run(ready[0], data, runs[0]))
                    runs[0].clear_checkpoint()
                    trained.append(ready[0])
                    if on_done is not None:
                        on_done(ready[0], rec)
                    continue
                prs = [prepare_run(c, data) for c in ready]
                c0, dev = ready[0], prs[0].device
                fits = fit_stack(
                    [pr.member(run) for pr, run in zip(prs, runs)], prs[0].prep.train, c0.epochs,
                    optimizer_factory=prs[0].optimizer, scheduler_factory=prs[0].scheduler,
                    batch_size=c0.batch_size, device=dev, amp=c0.amp, progress=c0.progress,
                    desc=f"{data.name} stack of {len(ready)}",
                )
                for pr, run, fitted, c in zip(prs, runs, fits, ready):
                    rec = run.save_result(finish_run(pr, data, run, fitted))
                    run.clear_checkpoint()
                    trained.append(c)
                    if on_done is not None:
                        on_done(c, rec)
    return trained


def run_grid(configs: Sequence[TrainConfig], data: Bundle, stack: int = 8, train: bool = True) -> list[dict[str, Any]]:
    """Run ``configs`` on one dataset and return their records in order (finished runs are loaded).

    Unfinished runs are trained ``stack`` at a time as stacked models (``stack=1``: one by one);
    ``mocae`` configs reuse their ``vanilla`` run. Text data trains one run at a time.
    ``train=False`` trains nothing: only the runs committed in ``results/`` or cached are returned
    (in order; MoCaE, post hoc, is derived from a Vanilla run that is there).
    """
    configs = list(configs)
    for c in configs:
        if not isinstance(c, TrainConfig):
            raise ValueError(f"configs: expected TrainConfig items, got {type(c).__name__}")
    check_int(stack, "stack", minimum=1)
    if not isinstance(train, bool):
        raise ValueError(f"train: expected True or False, got {train!r}")
    check_bundle(data)
    if not train:
        return _available(configs, data)
    trained = {}
    for c in configs:
        t = c.replace(method="vanilla") if c.method == "mocae" else c
        trained[Run(GROUP, run_config(t, data)).key] = t
    if stack > 1 and getattr(data, "kind", "images") != "text":
        train_stacked(list(trained.values()), data, stack=stack)
    return [train_run(c, data) for c in configs]
