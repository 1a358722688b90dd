"""Many runs at once on one device: N models of one architecture trained as one stacked model.

A CIFAR ResNet-18 at batch 128 fills a few percent of an H100; N of them side by side fill much more.
:func:`fit_stack` stacks the members' weights with ``torch.func.stack_module_state`` and runs the
forward with ``torch.func.vmap`` over ``functional_call`` (PyTorch's model-ensembling recipe), so each
member keeps its own weights, BatchNorm statistics, optimizer moments (AdamW is elementwise, so one
optimizer over stacked weights is N independent ones), seed, batch order, augmentation and
checkpoint. The per-member losses are summed before the backward pass, so member i's gradient is the
gradient of its own loss. A method with a step of its own (e.g. paper 1's FGR, whose forward takes
B + m rows and whose update is a projection of two gradients) supplies it as a :class:`StackStep`:
members stack only with members of the same step kind and start epoch, and the engine hands the
stacked forward to the step's ``gradients``. The engine knows no paper. Each member's checkpoint has
the single-run format of :func:`lib.engine.loop.fit`, so one run of a stack can resume alone.
Inside :func:`lib.engine.deadline.deadline` an epoch that would end after the deadline is not
started (every member's checkpoint of the epoch before stands).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from lib.data.augment import BatchIterator, epoch_generator
from lib.engine import deadline
from lib.engine import progress as live
from lib.engine.device import autocast
from lib.engine.loop import FitResult, checkpoint
from lib.engine.runs import Run
from lib.validation import check_int

__all__ = ["Member", "StackStep", "fit_stack", "step_key", "take_rows"]

#: ``gradients(out, aux, ys, losses, params)`` -> (one update per stacked parameter, per-member loss (N,))
Gradients = Callable[
    [
        Any,
        Sequence[Any],
        Sequence[torch.Tensor],
        Sequence[Callable[[Any, torch.Tensor], torch.Tensor]],
        Sequence[torch.Tensor],
    ],
    tuple[list[torch.Tensor], torch.Tensor],
]


@dataclass(frozen=True)
class StackStep:
    """A method's own step inside a stack, supplied by the method's code (the engine knows none).

    From epoch ``start`` (0-based) on, each member's batch goes through ``inputs(x, generator)``,
    which returns the forward's input and whatever ``gradients`` needs to read it (e.g. rows), the
    members' inputs are forwarded as one stacked model, and ``gradients(out, aux, ys, losses,
    params)`` (the one function of the step ``kind``, called with every member's ``loss``) returns the
    update of every stacked parameter and the per-member losses; the engine sets them as ``.grad``
    and steps the optimizer. Members stack only with members of equal ``kind`` and ``start``."""

    kind: Hashable
    start: int
    loss: Callable[[Any, torch.Tensor], torch.Tensor]
    gradients: Gradients
    inputs: Callable[[torch.Tensor, torch.Generator], tuple[torch.Tensor, Any]] | None = None


def step_key(step: StackStep | None) -> tuple[Any, ...]:
    """What members of one stack must share about their step: nothing (plain), or kind and start."""
    return ("plain",) if step is None else ("step", step.kind, step.start)


def take_rows(out: Any, rows: Any) -> Any:
    """Rows ``rows`` (an index tensor, an int or a slice) of a model output: a tensor, or a dataclass
    of tensors (every field indexed along its first dimension)."""
    if isinstance(out, torch.Tensor):
        return out[rows]
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        return type(out)(**{f.name: take_rows(getattr(out, f.name), rows) for f in dataclasses.fields(out)})
    raise ValueError(f"out: expected a tensor or a dataclass of tensors, got {type(out).__name__}")


@dataclass
class Member:
    """One run inside a stack.

    ``loss_fn(out, y, epoch)`` is its per-batch loss; ``transform(x_batch, generator)`` its
    augmentation; ``step`` its method's own step (:class:`StackStep`), if any.
    ``callbacks(epoch, entry, None)`` run after each epoch's checkpoint (no model: the weights are
    stacked); one that raises interrupts the stack, which resumes from the checkpoints.
    """

    model: nn.Module
    loss_fn: Callable[[Any, torch.Tensor, int], torch.Tensor]
    seed: int = 0
    transform: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None
    run: Run | None = None
    step: StackStep | None = None
    callbacks: Sequence[Callable[..., Any]] = field(default_factory=tuple)


def _register(out_type: type) -> None:
    """Let vmap return a dataclass of tensors (e.g. lib.moe.heads.MoEOutput) as a pytree."""
    if out_type not in pytree.SUPPORTED_NODES and dataclasses.is_dataclass(out_type):
        pytree.register_dataclass(out_type)


def _slice_state(opt_state: dict[str, Any], i: int, n: int) -> dict[str, Any]:
    state = {
        p: {k: (v[i].clone() if torch.is_tensor(v) and v.ndim > 0 and v.shape[0] == n else v) for k, v in s.items()}
        for p, s in opt_state["state"].items()
    }
    return {"state": state, "param_groups": copy.deepcopy(opt_state["param_groups"])}


def _stack_states(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    first = states[0]
    state = {
        p: {
            k: (torch.stack([st["state"][p][k] for st in states]) if torch.is_tensor(v) and v.ndim > 0 else v)
            for k, v in s.items()
        }
        for p, s in first["state"].items()
    }
    return {"state": state, "param_groups": first["param_groups"]}


def fit_stack(
    members: Sequence[Member],
    data: tuple[torch.Tensor, torch.Tensor],
    epochs: int,
    optimizer_factory: Callable[[Sequence[torch.Tensor]], torch.optim.Optimizer],
    scheduler_factory: Callable[[torch.optim.Optimizer], Any] | None = None,
    *,  # the scheduler steps once per epoch
    batch_size: int = 128,
    device: torch.device | str = "cpu",
    amp: bool = True,
    progress: bool = True,
    desc: str = "stack",
) -> list[FitResult]:
    """Train ``members`` (same architecture, same optimizer settings) together for ``epochs`` epochs.

    Each member sees the batches and augmentations it would see alone (order and generators from its
    own seed), and ends with the weights it would reach alone, up to float rounding. A member's
    checkpoint is written after every epoch in :func:`lib.engine.loop.fit`'s format; all members must
    start from the same epoch (none, or checkpoints of one epoch). The members' models end holding
    their trained weights. Image tensors only (not dicts of text tensors).
    """
    members = list(members)
    if not members:
        raise ValueError("members: need at least one")
    check_int(epochs, "epochs", minimum=1)
    check_int(batch_size, "batch_size", minimum=1)
    if not isinstance(data[0], torch.Tensor):
        raise ValueError("data: stacked training takes image tensors (train text runs one at a time)")
    types = {type(m.model) for m in members}
    shapes = {tuple((k, tuple(v.shape)) for k, v in m.model.state_dict().items()) for m in members}
    if len(types) != 1 or len(shapes) != 1:
        raise ValueError("members: all models of a stack need the same architecture")
    n, dev = len(members), torch.device(device)
    if len({step_key(m.step) for m in members}) != 1:
        raise ValueError(
            "members: runs with a step of their own stack only with runs of the same step kind "
            "and start epoch (see lib.engine.stack.step_key)"
        )

    ckpts = [m.run.load_checkpoint() if m.run is not None else None for m in members]
    starts = {int(c["epoch"]) if c is not None else 0 for c in ckpts}
    if len(starts) != 1:
        raise ValueError(f"members: checkpoints at different epochs {sorted(starts)}; stack runs that start together")
    start = starts.pop()
    for m, c in zip(members, ckpts):
        m.model.to(dev)
        if c is not None:
            m.model.load_state_dict(c["model"])
    params, buffers = stack_module_state([m.model for m in members])
    names = list(params)
    base = copy.deepcopy(members[0].model).to("meta")
    first, x0 = members[0], data[0][:2].to(dev)
    with torch.no_grad():  # the output type (a dataclass of tensors) must be a pytree before vmap
        x0 = x0.float() if first.transform is None else first.transform(x0, torch.Generator())
        _register(type(first.model.eval()(x0)))
    for m in members:
        m.model.train()

    def f(p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], x: torch.Tensor) -> Any:
        return functional_call(base, (p, b), (x,))

    optimizer = optimizer_factory([params[k] for k in names])
    scheduler = scheduler_factory(optimizer) if scheduler_factory is not None else None
    if ckpts[0] is not None:
        optimizer.load_state_dict(_stack_states([c["optimizer"] for c in ckpts]))
        if scheduler is not None and ckpts[0].get("scheduler") is not None:
            scheduler.load_state_dict(ckpts[0]["scheduler"])
    histories = [list(c["history"]) if c is not None else [] for c in ckpts]
    elapsed = [float(c.get("elapsed", 0.0)) if c is not None else 0.0 for c in ckpts]
    x_dev, y_dev = data[0].to(dev), data[1].to(dev)
    iters = [BatchIterator(x_dev, y_dev, batch_size, shuffle=True, seed=m.seed, device=dev) for m in members]
    plist = [params[k] for k in names]

    spans = [float(h["seconds"]) * int(h.get("stacked", n)) for h in histories[0]]
    step0 = members[0].step
    with live.session(desc, n * (epochs - start), enabled=progress) as line:  # n runs' epochs
        for epoch in range(start, epochs):
            deadline.check(deadline.epoch_estimate(spans), desc)
            t0, c0 = time.perf_counter(), deadline.now()
            for it in iters:
                it.set_epoch(epoch)
            gens = [epoch_generator(m.seed, epoch, stream=2) for m in members]
            own = step0 is not None and epoch >= step0.start
            totals, count = torch.zeros(n, device=dev), 0
            lr = optimizer.param_groups[0]["lr"]
            for batches in zip(*iters):
                deadline.check_step(desc)
                xs = [
                    m.transform(xb, g) if m.transform is not None else xb
                    for m, (xb, _), g in zip(members, batches, gens)
                ]
                ys = [yb for _, yb in batches]
                optimizer.zero_grad(set_to_none=True)
                with autocast(dev, amp):
                    if own:
                        inputs = [
                            m.step.inputs(x, g) if m.step.inputs is not None else (x, None)
                            for m, x, g in zip(members, xs, gens)
                        ]
                        out = vmap(f, randomness="different")(params, buffers, torch.stack([x for x, _ in inputs]))
                        grads, loss = step0.gradients(
                            out, [a for _, a in inputs], ys, [m.step.loss for m in members], plist
                        )
                        for p, g in zip(plist, grads):
                            p.grad = g
                    else:
                        out = vmap(f, randomness="different")(params, buffers, torch.stack(xs))
                        loss = torch.stack([m.loss_fn(take_rows(out, i), ys[i], epoch) for i, m in enumerate(members)])
                        loss.sum().backward()
                optimizer.step()
                totals += loss.detach().float() * int(ys[0].shape[0])
                count += int(ys[0].shape[0])
            if scheduler is not None:
                scheduler.step()
            seconds = time.perf_counter() - t0
            mean_loss = (totals / max(count, 1)).tolist()  # the one host read of the epoch
            for i, m in enumerate(members):
                elapsed[i] += seconds / n
                entry = {"epoch": epoch + 1, "loss": mean_loss[i], "lr": lr, "seconds": seconds / n, "stacked": n}
                histories[i].append(entry)
                if m.run is not None:
                    weights = {k2: t[i].detach().clone() for k2, t in {**params, **buffers}.items()}
                    state = _slice_state(optimizer.state_dict(), i, n)
                    m.run.save_checkpoint(checkpoint(epoch + 1, weights, state, scheduler, histories[i], elapsed[i]))
            for i, m in enumerate(members):
                for cb in m.callbacks:
                    cb(epoch + 1, histories[i][-1], None)
            spans.append(deadline.now() - c0)  # the whole epoch: steps, checkpoints, callbacks
            deadline.note(spans[-1])
            line.update(n)  # n runs' epochs
    results = []
    for i, m in enumerate(members):
        m.model.load_state_dict({k2: t[i].detach() for k2, t in {**params, **buffers}.items()})
        results.append(FitResult(history=histories[i], wall_time=elapsed[i], resumed_from=start or None))
    return results
