"""Paper 1's grids: many runs (methods x seeds x lambdas) trained together as packed models.

:func:`run_grid` is what every paper-1 page and the paper-scale queue call: finished runs are loaded
(committed results first), the rest are grouped by architecture and optimizer settings and trained
``stack`` at a time as one packed model on one device (:func:`lib.engine.loop.fit_packed`); each is
evaluated and saved as its own run, exactly as :func:`lib.moe.train.train_run` would save it (the
same key: a run made packed and made alone is one record). A run that diverges, alone or in a
pack, is reported and not published; the others go on.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from filelock import Timeout

from lib.data.bundle import Bundle, check_bundle
from lib.engine import progress as live
from lib.engine.cache import Run, RunMissing, open_run, training
from lib.engine.device import autocast, resolve_device
from lib.engine.loop import Diverged
from lib.moe.methods import FGR_METHODS
from lib.moe.config import TrainConfig
from lib.moe.train import GROUP, compute_run, finish_run, fit_runs, prepare_run, run_config, train_run
from lib.validation import check_bool, check_int, check_positive

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


#: Stack size where no device memory can be measured (the CPU) -- stacking there saves little.
CPU_STACK = 8
#: Largest stack tried on a GPU (beyond it the step is compute-bound and checkpoints grow).
MAX_STACK = 64


def fit_count(free_bytes: float, member_bytes: float) -> int:
    """How many members of ``member_bytes`` each fit in ``free_bytes`` of device memory keeping 20%
    free (for the allocator's fragmentation and evaluation): at least 1, at most :data:`MAX_STACK`."""
    check_positive(free_bytes, "free_bytes")
    check_positive(member_bytes, "member_bytes")
    return max(1, min(MAX_STACK, int(free_bytes * (1 - 0.2) // member_bytes)))


def member_bytes(cfg: TrainConfig, data: Bundle) -> float:
    """Device memory one member of ``cfg``'s stack needs, measured on the device: weights, gradients and
    AdamW's two moments (4 copies of the parameters) plus the peak activation memory of one
    training step (forward and backward of a batch; FGR's B + m rows)."""
    pr = prepare_run(cfg.replace(progress=False), data)
    dev = pr.device
    if dev.type != "cuda":
        raise ValueError(f"cfg: device memory is measured on a CUDA device, this run gets {dev}")
    n_params = sum(p.numel() * p.element_size() for p in pr.runner.parameters())
    x = pr.prep.train[0][: cfg.batch_size].to(dev)
    rows = int(x.shape[0] * (1.06 if cfg.method in FGR_METHODS else 1.0)) + 1
    xb = pr.transform(x, torch.Generator()) if pr.transform is not None else x
    xb = torch.cat([xb, xb[: rows - xb.shape[0]]]) if rows > xb.shape[0] else xb
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    base = torch.cuda.memory_allocated(dev)
    with autocast(dev, cfg.amp):
        out = pr.runner(xb)
    out.probs.float().sum().backward()
    peak = torch.cuda.max_memory_allocated(dev) - base
    pr.runner.zero_grad(set_to_none=True)
    if cfg.method in FGR_METHODS:  # FGR's backward is batched over its two losses (lib.moe.fgr.two_gradients):
        peak *= 2  # about twice the activation gradients of the plain backward measured here
    return float(4 * n_params + peak)


def auto_stack(cfg: TrainConfig, data: Bundle) -> int:
    """Stack size for ``cfg``'s runs: on CUDA from free device memory (``torch.cuda.mem_get_info``)
    and the measured :func:`member_bytes`; elsewhere :data:`CPU_STACK`."""
    dev = resolve_device(cfg.device)
    if dev.type != "cuda":
        return CPU_STACK
    free, _ = torch.cuda.mem_get_info(dev)
    try:
        need = member_bytes(cfg, data)
    except (RuntimeError, ValueError) as err:  # e.g. out of memory while measuring: a stack that surely fits
        warnings.warn(f"auto_stack: could not measure one member ({err}); stacking {CPU_STACK}", stacklevel=2)
        return CPU_STACK
    finally:
        torch.cuda.empty_cache()
    return fit_count(free, need)


def train_stacked(
    configs: Sequence[TrainConfig],
    data: Bundle,
    stack: int | None = None,
    on_done: Callable[[TrainConfig, dict[str, Any]], None] | None = None,
    log: Callable[[str], None] | None = None,
    compile: bool = False,
    on_diverged: Callable[[Run], None] | None = None,
) -> list[TrainConfig]:
    """Train the unfinished ``configs`` (no ``mocae``) and return those it trained: runs of one
    :func:`stack_groups` key and checkpointed epoch train together, ``stack`` at a time (``None``:
    :func:`auto_stack`; text runs one at a time); runs another process holds the lock of are skipped;
    ``on_done(cfg, record)`` follows each save, ``on_diverged(run)`` each run that diverged. Inside :func:`lib.engine.deadline.deadline` training
    stops at the epoch boundary that would cross it (:class:`lib.engine.deadline.DeadlineReached`
    propagates; runs resume from checkpoints). ``compile``: packs under ``torch.compile``."""
    stack = 1 if getattr(data, "kind", "images") == "text" else stack
    by_start: dict[int, list[TrainConfig]] = {}
    for c in configs:
        run = open_run(GROUP, run_config(c, data))
        if not run.done:
            ckpt = run.load_checkpoint()
            by_start.setdefault(int(ckpt["epoch"]) if ckpt is not None else 0, []).append(c)
    trained: list[TrainConfig] = []

    def train_group(group: list[TrainConfig]) -> None:
        with contextlib.ExitStack() as locks:
            runs, ready = [], []
            for c in group:
                run = open_run(GROUP, run_config(c, data))
                try:
                    locks.enter_context(run.lock().acquire(timeout=0))
                except Timeout:
                    continue  # another process trains it
                if not run.done:
                    runs.append(run)
                    ready.append(c)
            if not ready:
                return
            if log is not None:
                names = ", ".join(f"{c.method}/s{c.seed}" for c in ready)
                log(f"{data.name}: training {len(ready)} run(s) as one pack: {names}")
            if len(ready) == 1:  # alone: train_run's computation (we hold its lock already)
                try:
                    records = [compute_run(ready[0], data, runs[0])]
                except Diverged as err:
                    _diverged(ready[0], data, err.epoch, log)
                    records = [None]
            else:
                records = _train_pack(ready, runs, data, log, compile)
            for run, c, record in zip(runs, ready, records):
                if record is None:  # diverged: reported, its last good checkpoint kept, nothing published
                    if on_diverged is not None:
                        on_diverged(run)
                    continue
                rec = run.save_result(record)
                run.clear_checkpoint()
                trained.append(c)
                live.run_done()
                if on_done is not None:
                    on_done(c, rec)

    sizes: dict[tuple[Any, ...], int] = {}
    todo = [c for cfgs in by_start.values() for c in cfgs]
    left = sum(c.epochs - e for e, cfgs in by_start.items() for c in cfgs)
    with live.session(f"{data.name}: {len(todo)} runs", left, runs=len(todo), enabled=any(c.progress for c in todo)):
        for cfgs in by_start.values():
            groups = []
            for key in dict.fromkeys(map(_stack_key, cfgs)):
                same = [c for c in cfgs if _stack_key(c) == key]
                if stack is None and key not in sizes:
                    sizes[key] = auto_stack(same[0], data)
                groups += stack_groups(same, stack or sizes[key])
            for group in groups:
                train_group(group)
    return trained


def _train_pack(
    ready: list[TrainConfig], runs: list[Run], data: Bundle, log: Callable[[str], None] | None, compile: bool = False
) -> Iterator[dict[str, Any] | None]:
    """Train ``ready`` (their ``runs`` locked) as one pack, then yield their records one by one as each
    is evaluated, so each is saved before the next is made (``None`` for a run that diverged). A pack
    out of device memory raises; the GPU queue (calibook.gpu.queue) trains its runs in packs half the size,
    resuming from their checkpoints."""
    prs = [prepare_run(c, data, packed=True) for c in ready]
    fits = fit_runs(prs, runs, f"{data.name} pack of {len(ready)}", compile=compile)
    for pr, c, run, fitted in zip(prs, ready, runs, fits):
        yield None if _diverged(c, data, fitted.diverged_at, log) else finish_run(pr, data, run, fitted)


def _diverged(c: TrainConfig, data: Bundle, epoch: int | None, log: Callable[[str], None] | None) -> bool:
    """Whether ``c``'s run diverged (in ``epoch``, 1-based; ``None``: it did not); if so it is said
    (``log``, else a warning) and not published."""
    if epoch is None:
        return False
    msg = f"{data.name}: {c.method}/s{c.seed} diverged in epoch {epoch}; not published"
    log(msg) if log is not None else warnings.warn(msg, stacklevel=2)
    return True


def run_grid(
    configs: Sequence[TrainConfig], data: Bundle, stack: int | None = 8, train: bool = True
) -> list[dict[str, Any]]:
    """The records of ``configs`` on one dataset, in order: unfinished runs trained by
    :func:`train_stacked` (``stack=1`` or text data: one by one), ``mocae`` made from its ``vanilla``
    run. ``train=False`` trains nothing: only the runs committed in ``results/`` or cached are returned.
    A run that diverged here (said by the grid, not published) has no record: it is left out, with its
    MoCaE, and not trained again for it."""
    configs = list(configs)
    for c in configs:
        if not isinstance(c, TrainConfig):
            raise ValueError(f"configs: expected TrainConfig items, got {type(c).__name__}")
    if stack is not None:
        check_int(stack, "stack")
    check_bool(train, "train")
    check_bundle(data)
    trained_as = [c.replace(method="vanilla") if c.method == "mocae" else c for c in configs]  # MoCaE: its Vanilla's
    keys = [open_run(GROUP, run_config(t, data)).key for t in trained_as]
    diverged: set[str] = set()  # the keys of the runs that diverged here
    if train:
        runs: dict[str, TrainConfig] = {}
        for key, t in zip(keys, trained_as):
            runs.setdefault(key, t)
        train_stacked(list(runs.values()), data, stack=stack, on_diverged=lambda run: diverged.add(run.key))
    out, missing = [], (Diverged,) if train else (RunMissing,)  # diverged elsewhere (said), or not committed nor cached
    with contextlib.nullcontext() if train else training(False):
        for c, key in zip(configs, keys):
            with contextlib.suppress(*missing):  # left out
                if key not in diverged:  # not trained again for its record
                    out.append(train_run(c, data))
    return out
