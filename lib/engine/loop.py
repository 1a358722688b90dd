"""The book's one training loop and one batched predict (d2l's single Trainer is the model).

Every trained model of the book goes through :func:`fit`: paper 1's MoE runs (lib.moe.train, and
many runs at once through lib.engine.packed), paper 2's learning-to-defer heads and CIFAR-10 networks
(lib.l2d.experiment) and paper 4's reweighted-loss networks and heads (lib.rr.experiment).
Model selection and early stopping are callbacks (:class:`SelectBest`, :class:`EarlyStopping`) whose
state is checkpointed with the run, so a resumed run ends exactly like an uninterrupted one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from lib.data.augment import BatchIterator, epoch_generator
from lib.engine import deadline
from lib.engine import progress as live
from lib.engine.device import autocast, resolve_device, rng_state, set_rng_state
from lib.engine.cache import Run
from lib.validation import check_int

__all__ = ["Diverged", "EarlyStopping", "FitResult", "SelectBest", "finite_outputs", "fit", "predict"]

Inputs = Any  # a tensor or a dict of tensors (tokenized text)
LossFn = Callable[[Any, torch.Tensor, int], torch.Tensor]
StepFn = Callable[[nn.Module, Inputs, torch.Tensor, torch.optim.Optimizer, int, torch.Generator], "torch.Tensor | None"]


class Diverged(ArithmeticError):
    """Training produced non-finite outputs at epoch ``epoch`` (1-based): the weights are lost, so
    the run has no result to report but the fact (raised by :func:`finite_outputs`)."""

    def __init__(self, epoch: int) -> None:
        super().__init__(f"training diverged: non-finite outputs in epoch {epoch}")
        self.epoch = epoch


def finite_outputs(loss_fn: LossFn) -> LossFn:
    """``loss_fn`` that first raises :class:`Diverged` when any model output is NaN or infinite. One
    boolean read per step (a device sync on CUDA): meant for CPU-scale runs whose divergence is a result."""

    def checked(out: Any, y: torch.Tensor, epoch: int) -> torch.Tensor:
        if isinstance(out, torch.Tensor) and not bool(torch.isfinite(out).all()):
            raise Diverged(epoch + 1)
        return loss_fn(out, y, epoch)

    return checked


@dataclass
class FitResult:
    """What :func:`fit` returns: per-epoch history, wall time (summed over resumed sessions), the
    epoch a run resumed from (``None`` if it started fresh) and the epoch early stopping ended it."""

    history: list[dict[str, Any]]
    wall_time: float
    resumed_from: int | None = None
    stopped_at: int | None = None


class SelectBest:
    """Keep the weights of the epoch with the lowest ``score(model)`` after ``after`` epochs and
    restore them when training ends (model selection on validation data). ``entry[name]`` records
    each epoch's score."""

    def __init__(self, score: Callable[[nn.Module], float], after: int = 0, name: str = "val_loss") -> None:
        self.score, self.after, self.name = score, int(after), name
        self.best, self.state, self.epoch = math.inf, None, None

    def __call__(self, epoch: int, entry: dict[str, Any], model: nn.Module) -> None:
        was = model.training
        with torch.no_grad():
            v = float(self.score(model))
        model.train(was)
        entry[self.name] = v
        if epoch > self.after and v < self.best:
            self.best, self.epoch = v, epoch
            self.state = {k: t.detach().clone() for k, t in model.state_dict().items()}

    def restore(self, model: nn.Module) -> None:
        if self.state is not None:
            model.load_state_dict(self.state)

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "state": self.state, "epoch": self.epoch}

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        self.best, self.state, self.epoch = float(d["best"]), d["state"], d["epoch"]


class EarlyStopping:
    """Stop when ``entry[monitor]`` has not improved by more than ``min_delta`` for ``patience``
    epochs (the learning-to-defer paper's look-ahead, Sec. 5.1). Put it after the callback that
    writes ``monitor`` into the entry."""

    def __init__(self, monitor: str = "val_loss", patience: int = 20, min_delta: float = 1e-6) -> None:
        check_int(patience, "patience", minimum=1)
        self.monitor, self.patience, self.min_delta = monitor, patience, float(min_delta)
        self.best, self.since = math.inf, 0

    def __call__(self, epoch: int, entry: dict[str, Any], model: nn.Module) -> bool:
        v = entry[self.monitor]
        if v < self.best - self.min_delta:
            self.best, self.since = v, 0
        else:
            self.since += 1
        return self.since >= self.patience

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "since": self.since}

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        self.best, self.since = float(d["best"]), int(d["since"])


def checkpoint(
    epoch: int, model: Any, optimizer: Any, scheduler: Any, history: list[dict[str, Any]], elapsed: float
) -> dict[str, Any]:
    """The state saved after ``epoch`` epochs, which :func:`fit` (and a stack's member alone) resumes from."""
    return {
        "epoch": epoch,
        "model": model,
        "optimizer": optimizer,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "history": history,
        "rng": rng_state(),
        "elapsed": elapsed,
        "stopped_at": None,
        "callbacks": [],
    }


def fit(
    model: nn.Module,
    loss_fn: LossFn,
    data: tuple[Inputs, torch.Tensor],
    epochs: int,
    optimizer_factory: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer],
    scheduler_factory: Callable[[torch.optim.Optimizer], Any] | None = None,
    run: Run | None = None,
    *,
    batch_size: int = 128,
    seed: int = 0,
    device: str | torch.device = "auto",
    transform: Callable[[Inputs, torch.Generator], Inputs] | None = None,
    step_fn: StepFn | None = None,
    amp: bool = True,
    callbacks: Sequence[Callable[[int, dict[str, Any], nn.Module], Any]] = (),
    progress: bool = True,
    desc: str = "train",
    drop_last: bool = False,
) -> FitResult:
    """Train ``model`` for ``epochs`` epochs, checkpointing every epoch and resuming if ``run`` has one.

    * ``data = (x, y)``: inputs (uint8 images, float features, or a dict of tensors such as tokenized
      text) and targets (first dimension N). They are moved to the device once.
    * Epoch e draws its batch order from ``(seed, e)`` and passes a CPU generator seeded by
      ``(seed, e)`` to ``transform(x_batch, generator)``, so a resumed run sees the same batches.
    * Per step: ``loss = loss_fn(model(inputs), y, epoch)`` under bf16 autocast on CUDA when ``amp``;
      backward; ``optimizer.step()``. ``step_fn`` may take over a step (its own backward and
      ``optimizer.step()``, returning the detached loss) or return ``None`` for the default step. The
      scheduler steps once per epoch.
    * With ``run``, a checkpoint (model, optimizer, scheduler, history, RNG states, elapsed time,
      callback states) is written after every epoch; a later call resumes after the last epoch and
      ends with the same weights as an uninterrupted run.
    * Inside :func:`lib.engine.deadline.deadline`, an epoch that would end after the deadline is not
      started: :class:`lib.engine.deadline.DeadlineReached` is raised (the last checkpoint stands).
    * ``callbacks(epoch, entry, model)`` run after each epoch; one returning True stops training
      (early stopping). Callbacks with ``state_dict``/``load_state_dict`` run before the epoch's
      checkpoint, which saves their state; plain ones after it (one that raises interrupts a run that
      resumes from that checkpoint). :class:`SelectBest` restores its best weights at the end.

    The epoch loss is summed on the device and read once per epoch (no step waits for the device).
    """
    check_int(epochs, "epochs", minimum=1)
    if not isinstance(model, nn.Module):
        raise ValueError(f"model: expected an nn.Module, got {type(model).__name__}")
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise ValueError("data: expected a pair (x, y)")
    dev = resolve_device(device)
    model.to(dev)
    optimizer = optimizer_factory([p for p in model.parameters() if p.requires_grad])
    scheduler = scheduler_factory(optimizer) if scheduler_factory is not None else None
    batches = BatchIterator(data[0], data[1], batch_size, shuffle=True, seed=seed, device=dev, drop_last=drop_last)
    stateful = [cb for cb in callbacks if hasattr(cb, "state_dict")]

    history: list[dict[str, Any]] = []
    start, elapsed, resumed_from, stopped_at = 0, 0.0, None, None
    ckpt = run.load_checkpoint() if run is not None else None
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        if scheduler is not None and ckpt.get("scheduler") is not None:
            scheduler.load_state_dict(ckpt["scheduler"])
        history, elapsed = list(ckpt["history"]), float(ckpt.get("elapsed", 0.0))
        start = resumed_from = int(ckpt["epoch"])
        stopped_at = ckpt.get("stopped_at")
        for cb, st in zip(stateful, ckpt.get("callbacks", [])):
            cb.load_state_dict(st)
        set_rng_state(ckpt["rng"])
        if progress:
            live.note(f"{desc}: resumed from its checkpoint after epoch {start} of {epochs}")

    spans = [float(h.get("seconds", 0.0)) for h in history]
    with live.session(desc, (epochs - start) if stopped_at is None else 0, enabled=progress):
        for epoch in range(start, epochs if stopped_at is None else start):
            with deadline.epoch(spans, desc):
                t0 = time.perf_counter()
                model.train()
                batches.set_epoch(epoch)
                gen = epoch_generator(seed, epoch, stream=2)
                total, count = torch.zeros((), device=dev), 0
                lr = optimizer.param_groups[0]["lr"]
                for xb, yb in batches:
                    deadline.check_step(desc)
                    inputs = transform(xb, gen) if transform is not None else xb
                    loss = step_fn(model, inputs, yb, optimizer, epoch, gen) if step_fn is not None else None
                    if loss is None:
                        with autocast(dev, amp):
                            loss = loss_fn(model(inputs), yb, epoch)
                        optimizer.zero_grad(set_to_none=True)
                        loss.backward()
                        optimizer.step()
                    total += loss.detach().float() * int(yb.shape[0])
                    count += int(yb.shape[0])
                if scheduler is not None:
                    scheduler.step()
                seconds = time.perf_counter() - t0
                elapsed += seconds
                entry = {"epoch": epoch + 1, "loss": float(total.item()) / max(count, 1), "lr": lr, "seconds": seconds}
                history.append(entry)
                stop = False
                for cb in stateful:  # before the checkpoint, which saves their state
                    stop = bool(cb(epoch + 1, entry, model)) or stop
                if stop:
                    stopped_at = epoch + 1
                if run is not None:
                    states = [cb.state_dict() for cb in stateful]
                    run.save_checkpoint(
                        checkpoint(epoch + 1, model.state_dict(), optimizer.state_dict(), scheduler, history, elapsed)
                        | {"stopped_at": stopped_at, "callbacks": states}
                    )
                for cb in callbacks:  # plain callbacks after it: one that raises interrupts a resumable run
                    if cb not in stateful:
                        stop = bool(cb(epoch + 1, entry, model)) or stop
            live.epoch_done()
            if stop:
                stopped_at = stopped_at or epoch + 1
                break
    for cb in callbacks:
        if isinstance(cb, SelectBest):
            cb.restore(model)
    return FitResult(history=history, wall_time=elapsed, resumed_from=resumed_from, stopped_at=stopped_at)


@torch.no_grad()
def predict(
    model: nn.Module,
    x: Inputs,
    device: str | torch.device | None = None,
    batch_size: int = 512,
    prep: Callable[[Inputs], Inputs] | None = None,
    amp: bool = True,
    collect: Callable[[Any], Any] | None = None,
) -> Any:
    """``model`` in evaluation mode on ``x`` in batches, outputs gathered on the CPU in float32.

    ``prep(x_batch)`` runs on the device first (normalization). ``collect(output)`` picks what to
    keep: a tensor (the default: the output itself) or a dict of tensors, concatenated over batches.
    ``device`` defaults to the model's.
    """
    check_int(batch_size, "batch_size", minimum=1)
    dev = torch.device(device) if device is not None else next(model.parameters()).device
    model.eval()
    n = len(x["input_ids"]) if isinstance(x, Mapping) else len(x)
    parts: list[Any] = []
    for lo in range(0, n, batch_size):
        sl = slice(lo, lo + batch_size)
        xb = {k: v[sl].to(dev) for k, v in x.items()} if isinstance(x, Mapping) else x[sl].to(dev)
        if prep is not None:
            xb = prep(xb)
        with autocast(dev, amp):
            out = model(xb)
        out = collect(out) if collect is not None else out
        parts.append({k: v.float().cpu() for k, v in out.items()} if isinstance(out, Mapping) else out.float().cpu())
    if parts and isinstance(parts[0], dict):
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    return torch.cat(parts) if parts else torch.empty(0)
