"""The book's one training loop and one batched predict (d2l's single Trainer is the model).

Every trained model of the book goes through :func:`fit_packed`: G runs of one architecture as one
packed module (:mod:`lib.engine.packed`), and a run alone as its G = 1 case, :func:`fit`, the model
trained as it is. Paper 1's MoE runs (lib.moe.train alone, lib.moe.grid packed), paper 2's
learning-to-defer heads and CIFAR-10 networks (lib.l2d.experiment) and paper 4's reweighted-loss
networks and heads (lib.rr.experiment) all train here.
Model selection and early stopping are callbacks (:class:`SelectBest`, :class:`EarlyStopping`) whose
state is checkpointed with the run, so a resumed run ends exactly like an uninterrupted one.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from lib.data.augment import BatchIterator, epoch_generator
from lib.engine import deadline
from lib.engine import progress as live
from lib.engine.device import autocast, resolve_device, rng_state, set_rng_state
from lib.engine.cache import Run
from lib.engine.packed import OwnStep, Packed, pack_inputs, take_rows
from lib.validation import check_int

__all__ = [
    "Diverged",
    "EarlyStopping",
    "FitResult",
    "Member",
    "SelectBest",
    "finite_outputs",
    "fit",
    "fit_packed",
    "predict",
]

Inputs = Any  # a tensor or a dict of tensors (tokenized text)
LossFn = Callable[[Any, torch.Tensor, int], torch.Tensor]
StepFn = Callable[[nn.Module, Inputs, torch.Tensor, torch.optim.Optimizer, int, torch.Generator], "torch.Tensor | None"]


class Diverged(ArithmeticError):
    """Training produced non-finite outputs or a non-finite epoch loss at epoch ``epoch`` (1-based):
    the weights are lost, so the run has no result to report but the fact (raised by
    :func:`finite_outputs` and :func:`fit`)."""

    def __init__(self, epoch: int) -> None:
        super().__init__(f"training diverged in epoch {epoch}: non-finite outputs or loss")
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
    """What :func:`fit` returns for a run: per-epoch history, wall time (summed over resumed sessions),
    the epoch a run resumed from (``None`` if it started fresh), the epoch early stopping ended it and
    the epoch (1-based) whose mean loss was not finite when it diverged (its checkpoint of the epoch
    before stands)."""

    history: list[dict[str, Any]]
    wall_time: float
    resumed_from: int | None = None
    stopped_at: int | None = None
    diverged_at: int | None = None


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


@dataclass
class Member:
    """One run of :func:`fit_packed`: its model, per-batch ``loss_fn(out, y, epoch)``, seed (batch
    order and augmentation), ``transform(x_batch, generator)`` (augmentation), ``run`` (checkpoints)
    and ``callbacks(epoch, entry, model)`` (see :func:`fit`; in a pack, any member with a
    ``loss_key`` or ``step`` even alone, the model argument is ``None``: the weights are packed).
    Runs of a pack whose transforms are equal and have a ``many(xs, generators)`` (one call for all
    runs' batches, as :class:`lib.data.augment.Augment`) are augmented in that one call.

    Runs with one ``loss_key`` (not ``None``) share one loss function and get one call for all of
    them, with a leading run dimension on ``out`` and ``y`` (returning one loss per run): the formula
    written once, one run its G = 1 case. ``step`` is a method's own step inside a pack
    (:class:`lib.engine.packed.OwnStep`); ``step_fn`` one for a run alone (see :func:`fit`)."""

    model: nn.Module
    loss_fn: LossFn
    seed: int = 0
    transform: Callable[[Inputs, torch.Generator], Inputs] | None = None
    run: Run | None = None
    step: OwnStep | None = None
    callbacks: Sequence[Callable[..., Any]] = field(default_factory=tuple)
    loss_key: Hashable | None = None
    step_fn: StepFn | None = None


def _loss_groups(members: Sequence[Member], device: torch.device) -> list[tuple[Any, Member]]:
    """The runs computed by one loss call, with the run whose ``loss_fn`` computes them: runs sharing a
    ``loss_key`` (a slice when they are contiguous, else an index tensor on ``device``, made once),
    every other run alone (an int)."""
    keys: dict[Hashable, list[int]] = {}
    out: list[tuple[Any, Member]] = []
    for i, m in enumerate(members):
        if m.loss_key is None:
            out.append((i, m))
        else:
            keys.setdefault(m.loss_key, []).append(i)
    for idx in keys.values():
        contiguous = idx == list(range(idx[0], idx[-1] + 1))
        rows = slice(idx[0], idx[-1] + 1) if contiguous else torch.tensor(idx, device=device)
        out.append((rows, members[idx[0]]))
    return out


def fit_packed(
    members: Sequence[Member],
    data: tuple[Inputs, torch.Tensor],
    epochs: int,
    optimizer_factory: Callable[[Sequence[torch.Tensor]], torch.optim.Optimizer],
    scheduler_factory: Callable[[torch.optim.Optimizer], Any] | None = None,
    *,  # the scheduler steps once per epoch
    batch_size: int = 128,
    device: str | torch.device = "auto",
    amp: bool = True,
    compile: bool = False,
    channels_last: bool = False,
    progress: bool = True,
    desc: str = "train",
    drop_last: bool = False,
) -> list[FitResult]:
    """The book's one training loop: ``members`` (one architecture, one optimizer setting) trained
    together as one :class:`lib.engine.packed.Packed` module; one member without a ``loss_key`` or
    ``step`` is a run alone (:func:`fit`), its model trained as it is.

    Each run sees the batches and augmentations it would see alone (order and generators from its own
    seed) and ends with the weights it would reach alone, up to float rounding. Its checkpoint (one
    format, alone or packed) is written after every epoch; all runs start from the same epoch (none,
    or checkpoints of one epoch). A run whose epoch loss is not finite is reported (``diverged_at``)
    and no longer checkpointed while the others go on (nothing is shared between runs, so its NaNs
    reach no other run); a run whose callback stops it (early stopping) keeps the weights it had
    then (in a pack its checkpoint keeps them while following the pack's epochs, so the pack resumes
    whole). After each epoch: every run's history entry and stateful callbacks, then every run's
    checkpoint, then the plain callbacks (one that raises interrupts a pack that resumes from those
    checkpoints). ``compile``: ``torch.compile`` the model (CUDA only; the CPU runs the same code
    eagerly). The members' models end holding their trained weights. Text (dict) inputs train alone."""
    members = list(members)
    if not members or not all(isinstance(m, Member) for m in members):
        raise ValueError("members: need at least one Member")
    check_int(epochs, "epochs", minimum=1)
    check_int(batch_size, "batch_size", minimum=1)
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise ValueError("data: expected a pair (x, y)")
    n, dev = len(members), resolve_device(device)
    alone = n == 1 and members[0].loss_key is None and members[0].step is None
    if not alone:
        if not isinstance(data[0], torch.Tensor):
            raise ValueError("data: packed training takes image or feature tensors (train text runs one at a time)")
        if len({m.step and (m.step.kind, m.step.start) for m in members}) != 1:
            raise ValueError(
                "members: runs with a step of their own pack only with runs of the same step kind and start"
            )
        if any(m.step_fn is not None for m in members):
            raise ValueError("members: a step_fn is a run alone's; a pack takes an OwnStep")
        if any(isinstance(cb, SelectBest) for m in members for cb in m.callbacks):
            raise ValueError("members: SelectBest scores a model, which a pack does not hand to callbacks")
    ckpts = [m.run.load_checkpoint() if m.run is not None else None for m in members]
    starts = {int(c["epoch"]) if c is not None else 0 for c in ckpts}
    if len(starts) != 1:
        raise ValueError(f"members: checkpoints at different epochs {sorted(starts)}; pack runs that start together")
    start = starts.pop()
    for m, c in zip(members, ckpts):
        if c is not None:
            m.model.load_state_dict(c["model"])
    net = members[0].model.to(dev) if alone else Packed([m.model for m in members]).to(dev)
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
    forward = torch.compile(net) if compile and dev.type == "cuda" else net
    plist = [p for p in net.parameters() if p.requires_grad]
    optimizer = optimizer_factory(plist)
    scheduler = scheduler_factory(optimizer) if scheduler_factory is not None else None
    stateful = [[cb for cb in m.callbacks if hasattr(cb, "state_dict")] for m in members]
    plain = [[cb for cb in m.callbacks if not hasattr(cb, "state_dict")] for m in members]
    if ckpts[0] is not None:
        opt = ckpts[0]["optimizer"] if alone else net.optimizer_state([c["optimizer"] for c in ckpts])
        optimizer.load_state_dict(opt)
        if scheduler is not None and ckpts[0].get("scheduler") is not None:
            scheduler.load_state_dict(ckpts[0]["scheduler"])
        for cbs, c in zip(stateful, ckpts):
            for cb, st in zip(cbs, c.get("callbacks", [])):
                cb.load_state_dict(st)
        set_rng_state(ckpts[0]["rng"])
        if progress:
            who = "resumed from its checkpoint" if alone else f"{n} run{'s' * (n > 1)} resumed from their checkpoints"
            live.note(f"{desc}: {who} after epoch {start} of {epochs}")
    histories = [list(c["history"]) if c is not None else [] for c in ckpts]
    elapsed = [float(c.get("elapsed", 0.0)) if c is not None else 0.0 for c in ckpts]
    stopped: list[int | None] = [c.get("stopped_at") if c is not None else None for c in ckpts]
    diverged: list[int | None] = [None] * n
    final: dict[int, dict[str, torch.Tensor]] = {}  # packed runs stopped early: their weights then
    if not alone:
        final = {i: net.run_state(i) for i in range(n) if stopped[i] is not None}
    iters = [BatchIterator(data[0], data[1], batch_size, seed=members[0].seed, device=dev, drop_last=drop_last)]
    iters += [
        BatchIterator(iters[0].x, iters[0].y, batch_size, seed=m.seed, device=dev, drop_last=drop_last)
        for m in members[1:]
    ]
    groups = _loss_groups(members, dev)
    step0 = members[0].step
    model = net if alone else None  # what callbacks get: the model of a run alone

    shared = members[0].transform  # one augmentation for all runs of a pack: one call (its ``many``)
    shared = shared if not alone and hasattr(shared, "many") and all(m.transform == shared for m in members) else None

    def inputs(batches: Sequence[tuple[Inputs, torch.Tensor]], gens: list[torch.Generator]) -> list[Inputs]:
        """Each run's batch through its own augmentation (with its own generator)."""
        if shared is not None:
            return shared.many([xb for xb, _ in batches], gens)
        return [m.transform(xb, g) if m.transform is not None else xb for m, (xb, _), g in zip(members, batches, gens)]

    def step(batches: Sequence[tuple[Inputs, torch.Tensor]], gens: list[torch.Generator], epoch: int) -> torch.Tensor:
        """One optimizer step of every run, their detached losses (G,). A run alone steps its model
        itself: its own ``step_fn``, or loss, backward, step. A pack makes one forward and backward for
        all: the members' shared loss calls, or from its start epoch their method's own step."""
        xs = inputs(batches, gens)
        if alone:
            m, y = members[0], batches[0][1]
            loss = m.step_fn(net, xs[0], y, optimizer, epoch, gens[0]) if m.step_fn is not None else None
            if loss is None:
                with autocast(dev, amp):
                    loss = m.loss_fn(forward(xs[0]), y, epoch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            return loss.detach().float().reshape(1)
        y = torch.stack([yb for _, yb in batches])
        optimizer.zero_grad(set_to_none=True)
        with autocast(dev, amp):
            if step0 is not None and epoch >= step0.start:
                own = [
                    m.step.inputs(x, g) if m.step.inputs is not None else (x, None)
                    for m, x, g in zip(members, xs, gens)
                ]
                out = forward(pack_inputs([x for x, _ in own]))
                grads, loss = step0.gradients(out, [a for _, a in own], list(y), [m.step.loss for m in members], plist)
                for p, g in zip(plist, grads):
                    p.grad = g
            else:
                out, loss = forward(pack_inputs(xs)), torch.empty(n, device=dev)
                for rows, member in groups:
                    loss[rows] = member.loss_fn(take_rows(out, rows), y[rows], epoch).float()
                loss.sum().backward()
        optimizer.step()
        return loss.detach().float()

    # a run's weights and optimizer state in the one checkpoint format: the model's own, or its slice
    run_state = (lambda i: net.state_dict()) if alone else net.run_state
    run_optimizer = (lambda state, i: state) if alone else net.run_optimizer_state

    # an epoch's time from the history ("stacked": the older name of "packed")
    spans = [float(h.get("seconds", 0.0)) * int(h.get("packed", h.get("stacked", n))) for h in histories[0]]
    todo = sum(epochs - start for s in stopped if s is None)
    with live.session(desc, todo, enabled=progress) as line:  # the runs' epochs
        for epoch in range(start, epochs):
            active = [i for i in range(n) if stopped[i] is None and diverged[i] is None]
            if not active:
                break
            with deadline.epoch(spans, desc):
                t0 = time.perf_counter()
                net.train()
                for it in iters:
                    it.set_epoch(epoch)
                gens = [epoch_generator(m.seed, epoch, stream=2) for m in members]
                totals, count = torch.zeros(n, device=dev), 0
                lr = optimizer.param_groups[0]["lr"]
                for batches in zip(*iters):
                    deadline.check_step(desc)
                    b = int(batches[0][1].shape[0])
                    totals += step(batches, gens, epoch) * b
                    count += b
                if scheduler is not None:
                    scheduler.step()
                seconds = time.perf_counter() - t0
                mean_loss = [float(v.item()) / max(count, 1) for v in totals]  # the epoch's host reads
                for i in active:  # 1. each run's epoch: its entry and stateful callbacks, or its divergence
                    if not math.isfinite(mean_loss[i]):
                        diverged[i] = epoch + 1
                        who = f"{desc}:" if alone else f"{desc}: run {i + 1} of {n}"
                        others = "" if alone else " (the others go on)"
                        warnings.warn(f"{who} diverged in epoch {epoch + 1}{others}", stacklevel=2)
                        continue
                    elapsed[i] += seconds / n
                    entry = {"epoch": epoch + 1, "loss": mean_loss[i], "lr": lr, "seconds": seconds / n}
                    if not alone:
                        entry["packed"] = n
                    histories[i].append(entry)
                    if any([bool(cb(epoch + 1, entry, model)) for cb in stateful[i]]):  # saved below
                        stopped[i] = epoch + 1
                opt_state = optimizer.state_dict() if any(m.run is not None for m in members) else None
                for i, m in enumerate(members):  # 2. every run's checkpoint, before any plain callback
                    if m.run is not None and diverged[i] is None and (i in active or not alone):
                        m.run.save_checkpoint(  # a pack's stopped run: its weights at the stop, this epoch
                            {
                                "epoch": epoch + 1,
                                "model": final.get(i) or run_state(i),
                                "optimizer": run_optimizer(opt_state, i),
                                "scheduler": scheduler.state_dict() if scheduler is not None else None,
                                "history": histories[i],
                                "rng": rng_state(),
                                "elapsed": elapsed[i],
                                "stopped_at": stopped[i],
                                "callbacks": [cb.state_dict() for cb in stateful[i]],
                            }
                        )
                for i in active:  # 3. plain callbacks: one that raises interrupts a pack resumable from
                    if diverged[i] is None:  # the checkpoints above
                        for cb in plain[i]:
                            if cb(epoch + 1, histories[i][-1], model):
                                stopped[i] = epoch + 1
                        if stopped[i] is not None and not alone:
                            final[i] = net.run_state(i)  # 4. a pack's run that stopped keeps these weights
            ended = [i for i in active if stopped[i] is not None or diverged[i] is not None]
            line.update(len(active) + len(ended) * (epochs - epoch - 1))  # the ended runs' epochs too
    results = []
    for i, m in enumerate(members):
        if not alone and diverged[i] is None:
            m.model.load_state_dict(final.get(i) or net.run_state(i))
        for cb in m.callbacks:
            if isinstance(cb, SelectBest):
                cb.restore(m.model)
        results.append(FitResult(histories[i], elapsed[i], start or None, stopped[i], diverged[i]))
    return results


def fit(
    model: nn.Module,
    loss_fn: LossFn,
    data: tuple[Inputs, torch.Tensor],
    epochs: int,
    optimizer_factory: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer],
    scheduler_factory: Callable[[torch.optim.Optimizer], Any] | None = None,
    run: Run | None = None,
    *,
    seed: int = 0,
    transform: Callable[[Inputs, torch.Generator], Inputs] | None = None,
    step_fn: StepFn | None = None,
    callbacks: Sequence[Callable[[int, dict[str, Any], nn.Module], Any]] = (),
    **options: Any,
) -> FitResult:
    """Train ``model`` for ``epochs`` epochs, checkpointing every epoch and resuming if ``run`` has one:
    :func:`fit_packed` of one run (its G = 1 case, the model trained as it is), whose keyword
    ``options`` it takes (``batch_size`` 128, ``device`` "auto", ``amp``, ``progress``, ``drop_last``...).

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
    * An epoch whose mean loss is not finite ends the run and raises :class:`Diverged` (said in a
      warning too; the last finite epoch's checkpoint stands, the model's weights are not usable).

    The epoch loss is summed on the device and read once per epoch (no step waits for the device).
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model: expected an nn.Module, got {type(model).__name__}")
    member = Member(model, loss_fn, seed, transform, run, callbacks=tuple(callbacks), step_fn=step_fn)
    result = fit_packed([member], data, epochs, optimizer_factory, scheduler_factory, **options)[0]
    if result.diverged_at is not None:
        raise Diverged(result.diverged_at)
    return result


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
