"""Packed runs: G runs of one architecture trained as ONE module, each run exactly what it is alone.

A CIFAR ResNet-18 at batch 128 fills a few percent of an H100. :class:`Packed` turns G models of one
architecture into one module whose every layer holds the G runs side by side (the packed ensembles of
torch-uncertainty's ``PackedConv2d``, with no sharing between runs):

* a convolution becomes one grouped convolution (G x the channels, G x the groups: a depthwise one
  stays depthwise), batch norm runs over G x C channels (each run its own statistics), a linear layer
  becomes a batched matmul over G weight matrices;
* the input is the runs' batches side by side along the channel dimension, ``(B, G*C, H, W)``
  (:func:`pack_inputs`), so every channel-wise operation (ReLU, pooling, residual sums) acts on each
  run's channels alone; a submodule that declares ``packed_layout = "leading"`` (a head with a softmax
  over its last dimension, say) takes flat features, receives ``(G, B, d)`` instead of ``(B, G*d)``
  and returns outputs with a leading run dimension, which is what :class:`Packed` returns (without
  such a module the output ``(B, G*C)`` is turned into ``(G, B, C)``).

Each tensor of the packed state is the runs' tensors stacked run-major (its first dimension is G
times the run's, or G), so :meth:`Packed.run_state` / :meth:`Packed.load_runs` convert to and from
the single-run ``state_dict`` format exactly, and so do the optimizer states (:meth:`Packed.run_optimizer_state`,
:meth:`Packed.optimizer_state`): AdamW is elementwise, so one optimizer over packed weights is G optimizers.
Nothing is shared, so a run whose loss turns NaN changes no other run's numbers.
:func:`fit_packed` trains a pack: each run keeps its seed, initial weights, batch order, augmentation,
optimizer moments, checkpoint (in the single-run format of :func:`lib.engine.loop.fit`, so a packed
run resumes alone and the reverse) and record.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from lib.data.augment import BatchIterator, epoch_generator
from lib.engine import deadline
from lib.engine import progress as live
from lib.engine.device import autocast
from lib.engine.loop import FitResult, checkpoint
from lib.engine.cache import Run
from lib.validation import check_int

__all__ = ["Member", "OwnStep", "Packed", "PackedLinear", "fit_packed", "pack_inputs", "run_slice", "take_rows"]


class PackedLinear(nn.Module):
    """G linear layers as one batched matmul: ``weight`` (G, out, in), ``bias`` (G, out).

    ``leading``: inputs are ``(G, ..., in)`` (a run's rows under its index); else the runs' features
    sit side by side in the last dimension, ``(..., G*in)``, and so do the outputs."""

    def __init__(self, runs: int, in_features: int, out_features: int, bias: bool, leading: bool) -> None:
        super().__init__()
        self.runs, self.in_features, self.out_features, self.leading = runs, in_features, out_features, leading
        self.weight = nn.Parameter(torch.empty(runs, out_features, in_features))
        self.bias = nn.Parameter(torch.empty(runs, out_features)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = self.runs
        if self.leading:  # (G, ..., in) -> (G, ..., out)
            flat = x.reshape(g, -1, self.in_features)
            out = torch.bmm(flat, self.weight.transpose(1, 2).to(flat.dtype))
            if self.bias is not None:
                out = out + self.bias[:, None, :].to(out.dtype)
            return out.reshape(*x.shape[:-1], self.out_features)
        xs = x.unflatten(-1, (g, self.in_features))  # (..., G, in)
        out = torch.einsum("...gi,goi->...go", xs, self.weight.to(xs.dtype))
        if self.bias is not None:
            out = out + self.bias.to(out.dtype)
        return out.flatten(-2)


def _pack_leaf(module: nn.Module, runs: int, leading: bool) -> nn.Module | None:
    """The packed form of ``module`` (a new module, or ``module`` changed in place), or ``None`` when it
    has no parameters or buffers of its own (a container, or an operation on each run's channels alone)."""
    if isinstance(module, nn.Linear):
        new = PackedLinear(runs, module.in_features, module.out_features, module.bias is not None, leading)
        return new.to(device=module.weight.device, dtype=module.weight.dtype)
    own = list(module.named_parameters(recurse=False)) + list(module.named_buffers(recurse=False))
    if not own:
        return None
    if leading:
        raise ValueError(f"models: cannot pack {type(module).__name__} inside a leading-layout module (Linear only)")
    if isinstance(module, nn.modules.conv._ConvNd) and not module.transposed:
        module.in_channels, module.out_channels, module.groups = (
            runs * v for v in (module.in_channels, module.out_channels, module.groups)
        )
    elif isinstance(module, nn.modules.batchnorm._BatchNorm):
        module.num_features *= runs
    elif isinstance(module, nn.GroupNorm):
        module.num_groups, module.num_channels = runs * module.num_groups, runs * module.num_channels
    else:
        raise ValueError(
            f"models: cannot pack {type(module).__name__} (packs hold convolutions, batch and group norm, "
            "linear layers and parameter-free modules)"
        )
    for name, t in own:  # placeholders of the packed shape; load_runs fills them
        if name == "num_batches_tracked":
            continue
        packed = torch.empty((runs * t.shape[0], *t.shape[1:]), dtype=t.dtype, device=t.device)
        if isinstance(t, nn.Parameter):
            setattr(module, name, nn.Parameter(packed, requires_grad=t.requires_grad))
        else:
            setattr(module, name, packed)
    return module


def _to_leading(runs: int):
    """A forward pre-hook: flat features of the runs side by side (B, G*d) -> one row block per run
    (G, B, d); an input with more dimensions already has the leading layout (an earlier leading
    module's output) and passes as it is. Stateless, so it traces under ``torch.compile``."""

    def hook(_module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        h, *rest = args
        if h.ndim != 2:
            return args
        return (h.unflatten(-1, (runs, -1)).movedim(-2, 0), *rest)

    return hook


class Packed(nn.Module):
    """``models`` (G of one architecture, same state_dict keys and shapes) as one module; see the
    module docstring. ``forward(x)`` takes :func:`pack_inputs` of the runs' inputs and returns the
    model's output with a leading run dimension (every tensor, or every field of a dataclass output)."""

    def __init__(self, models: Sequence[nn.Module]) -> None:
        super().__init__()
        models = list(models)
        if not models or not all(isinstance(m, nn.Module) for m in models):
            raise ValueError("models: expected a non-empty sequence of nn.Modules")
        states = [m.state_dict() for m in models]
        shapes = {k: tuple(v.shape) for k, v in states[0].items()}
        if any(type(m) is not type(models[0]) for m in models) or any(
            {k: tuple(v.shape) for k, v in s.items()} != shapes for s in states
        ):
            raise ValueError("models: a pack needs models of one architecture (same state_dict keys and shapes)")
        self.runs = g = len(models)
        self._shapes = shapes
        net = copy.deepcopy(models[0])
        leading = {n for n, m in net.named_modules() if getattr(m, "packed_layout", None) == "leading"}
        self.leading_output = bool(leading)
        for name, module in list(net.named_modules()):
            inside = any(name == p or name.startswith(p + ".") for p in leading)
            new = _pack_leaf(module, g, inside)  # a module with parameters or buffers of its own
            if new is not None and new is not module:
                parent, _, attr = name.rpartition(".")
                setattr(net.get_submodule(parent) if parent else net, attr, new)
            if name in leading:
                (new or module).register_forward_pre_hook(_to_leading(g))
        self.net = net
        self.load_runs(states)

    def forward(self, x: Any) -> Any:
        out = self.net(x)
        if self.leading_output:
            return out
        if not isinstance(out, torch.Tensor):
            raise ValueError("models: an output other than a tensor needs a module with packed_layout 'leading'")
        return out.unflatten(1, (self.runs, -1)).movedim(1, 0)

    def load_runs(self, states: Sequence[Mapping[str, torch.Tensor]]) -> None:
        """Set run g's weights and buffers from ``states[g]``, a single-run ``state_dict``."""
        if len(states) != self.runs:
            raise ValueError(f"states: expected {self.runs} state dicts, got {len(states)}")
        own = self.net.state_dict()
        packed = {
            k: (states[0][k] if v.ndim == 0 else torch.stack([s[k] for s in states]).reshape(v.shape))
            for k, v in own.items()
        }
        self.net.load_state_dict(packed)

    def run_state(self, g: int) -> dict[str, torch.Tensor]:
        """Run ``g``'s ``state_dict`` in the single-run format (copies, on the pack's device)."""
        return {k: run_slice(v, g, self.runs, self._shapes[k]) for k, v in self.net.state_dict().items()}

    def run_optimizer_state(self, opt_state: Mapping[str, Any], g: int) -> dict[str, Any]:
        """Run ``g``'s optimizer ``state_dict`` (single-run format) from that of an optimizer over
        ``parameters()`` of this pack, in their order."""
        shapes = [self._shapes[n] for n, p in self.net.named_parameters() if p.requires_grad]
        state = {
            p: {k: (run_slice(v, g, self.runs, shapes[int(p)]) if torch.is_tensor(v) else v) for k, v in s.items()}
            for p, s in opt_state["state"].items()
        }
        return {"state": state, "param_groups": copy.deepcopy(opt_state["param_groups"])}

    def optimizer_state(self, states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The pack's optimizer ``state_dict`` from its runs' (the inverse of :meth:`run_optimizer_state`)."""
        shapes = [tuple(p.shape) for p in self.net.parameters() if p.requires_grad]

        def packed(p: Any, k: str, v: Any) -> Any:
            if not torch.is_tensor(v) or v.ndim == 0:
                return v
            return torch.stack([st["state"][p][k] for st in states]).reshape(shapes[int(p)])

        first = states[0]
        state = {p: {k: packed(p, k, v) for k, v in s.items()} for p, s in first["state"].items()}
        return {"state": state, "param_groups": copy.deepcopy(first["param_groups"])}


def run_slice(t: torch.Tensor, g: int, runs: int, shape: Sequence[int]) -> torch.Tensor:
    """Run ``g``'s part of a packed tensor ``t`` (its rows block ``g`` of ``runs``) as ``shape``;
    a 0-dim tensor (a shared step or batch count) is copied whole."""
    if t.ndim == 0:
        return t.detach().clone()
    return t.detach().reshape(runs, -1)[g].reshape(tuple(shape)).clone()


def pack_inputs(xs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The runs' input batches (each ``(B, C, ...)``, one per run) side by side: ``(B, G*C, ...)``."""
    return torch.cat(list(xs), dim=1)


# --------------------------------------------------------------------------- training a pack

#: ``gradients(out, aux, ys, losses, params)`` -> (one update per packed parameter, per-run loss (G,))
Gradients = Callable[..., tuple[list[torch.Tensor], torch.Tensor]]


@dataclass(frozen=True)
class OwnStep:
    """A method's own step inside a pack, supplied by the method's code (the engine knows none).

    From epoch ``start`` (0-based) on, each run's batch goes through ``inputs(x, generator)``, which
    returns the forward's input and whatever ``gradients`` needs to read it (e.g. rows), the runs'
    inputs are forwarded as one pack, and ``gradients(out, aux, ys, losses, params)`` (the one
    function of the step ``kind``, called with every run's ``loss``) returns the update of every
    packed parameter (per run: its own, computed from its own rows) and the per-run losses; the
    engine sets them as ``.grad`` and steps the optimizer. Runs pack only with runs of equal ``kind``
    and ``start``."""

    kind: Hashable
    start: int
    loss: Callable[[Any, torch.Tensor], torch.Tensor]
    gradients: Gradients
    inputs: Callable[[torch.Tensor, torch.Generator], tuple[torch.Tensor, Any]] | None = None


def take_rows(out: Any, rows: Any) -> Any:
    """Rows ``rows`` (an index tensor, an int or a slice) of a model output: a tensor, or a dataclass
    of tensors (every field indexed along its first dimension: a run of a pack's output, say)."""
    if isinstance(out, torch.Tensor):
        return out[rows]
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        return type(out)(**{f.name: take_rows(getattr(out, f.name), rows) for f in dataclasses.fields(out)})
    raise ValueError(f"out: expected a tensor or a dataclass of tensors, got {type(out).__name__}")


@dataclass
class Member:
    """One run inside a pack.

    ``loss_fn(out, y, epoch)`` is its per-batch loss; runs with the same ``loss_key`` (not ``None``)
    have one loss function and get one call for all of them, with a leading run dimension on ``out``
    and ``y`` (returning one loss per run): the formula written once, one run its G = 1 case.
    ``transform(x_batch, generator)`` is its augmentation; ``step`` its method's own step
    (:class:`OwnStep`), if any. ``callbacks(epoch, entry, None)`` run after each epoch's checkpoint
    (no model: the weights are packed); one that raises interrupts the pack, which resumes from the
    checkpoints."""

    model: nn.Module
    loss_fn: Callable[[Any, torch.Tensor, int], torch.Tensor]
    seed: int = 0
    transform: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None
    run: Run | None = None
    step: OwnStep | None = None
    callbacks: Sequence[Callable[..., Any]] = field(default_factory=tuple)
    loss_key: Hashable | None = None


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


def _losses(groups: Sequence[tuple[Any, Member]], n: int, out: Any, y: torch.Tensor, epoch: int) -> torch.Tensor:
    """The per-run losses (G,) of one packed forward ``out`` with labels ``y`` (G, B)."""
    loss = torch.empty(n, device=y.device)
    for rows, member in groups:
        loss[rows] = member.loss_fn(take_rows(out, rows), y[rows], epoch).float()
    return loss


@dataclass
class PackedResult(FitResult):
    """:class:`lib.engine.loop.FitResult` of one run of a pack, with the epoch (1-based) whose mean
    loss was not finite when the run diverged (its checkpoint of the epoch before stands)."""

    diverged_at: int | None = None


def fit_packed(
    members: Sequence[Member],
    data: tuple[torch.Tensor, torch.Tensor],
    epochs: int,
    optimizer_factory: Callable[[Sequence[torch.Tensor]], torch.optim.Optimizer],
    scheduler_factory: Callable[[torch.optim.Optimizer], Any] | None = None,
    *,  # the scheduler steps once per epoch
    batch_size: int = 128,
    device: torch.device | str = "cpu",
    amp: bool = True,
    compile: bool = False,
    channels_last: bool = False,
    progress: bool = True,
    desc: str = "pack",
) -> list[PackedResult]:
    """Train ``members`` (one architecture, one optimizer setting) as one :class:`Packed` module.

    Each run sees the batches and augmentations it would see alone (order and generators from its own
    seed) and ends with the weights it would reach alone, up to float rounding. Its checkpoint is
    written after every epoch in :func:`lib.engine.loop.fit`'s format; all runs start from the same
    epoch (none, or checkpoints of one epoch). A run whose epoch loss is not finite is reported
    (``diverged_at``) and no longer checkpointed while the others go on (nothing is shared between
    runs, so its NaNs reach no other run). ``compile``: ``torch.compile`` the pack (CUDA only; the
    CPU runs the same code eagerly). The members' models end holding their trained weights. Image
    or feature tensors only (text runs train alone)."""
    members = list(members)
    if not members:
        raise ValueError("members: need at least one")
    check_int(epochs, "epochs", minimum=1)
    check_int(batch_size, "batch_size", minimum=1)
    if not isinstance(data[0], torch.Tensor):
        raise ValueError("data: packed training takes image or feature tensors (train text runs one at a time)")
    if len({m.step and (m.step.kind, m.step.start) for m in members}) != 1:
        raise ValueError("members: runs with a step of their own pack only with runs of the same step kind and start")
    n, dev = len(members), torch.device(device)
    ckpts = [m.run.load_checkpoint() if m.run is not None else None for m in members]
    starts = {int(c["epoch"]) if c is not None else 0 for c in ckpts}
    if len(starts) != 1:
        raise ValueError(f"members: checkpoints at different epochs {sorted(starts)}; pack runs that start together")
    start = starts.pop()
    for m, c in zip(members, ckpts):
        if c is not None:
            m.model.load_state_dict(c["model"])
    packed = Packed([m.model for m in members]).to(dev).train()
    if channels_last:
        packed = packed.to(memory_format=torch.channels_last)
    forward = torch.compile(packed) if compile and dev.type == "cuda" else packed
    plist = [p for p in packed.parameters() if p.requires_grad]
    optimizer = optimizer_factory(plist)
    scheduler = scheduler_factory(optimizer) if scheduler_factory is not None else None
    if ckpts[0] is not None:
        optimizer.load_state_dict(packed.optimizer_state([c["optimizer"] for c in ckpts]))
        if scheduler is not None and ckpts[0].get("scheduler") is not None:
            scheduler.load_state_dict(ckpts[0]["scheduler"])
    if start and progress:
        live.note(f"{desc}: {n} run{'s' * (n > 1)} resumed from their checkpoints after epoch {start} of {epochs}")
    histories = [list(c["history"]) if c is not None else [] for c in ckpts]
    elapsed = [float(c.get("elapsed", 0.0)) if c is not None else 0.0 for c in ckpts]
    diverged: list[int | None] = [None] * n
    x_dev, y_dev = data[0].to(dev), data[1].to(dev)
    iters = [BatchIterator(x_dev, y_dev, batch_size, shuffle=True, seed=m.seed, device=dev) for m in members]
    groups = _loss_groups(members, dev)

    spans = [float(h["seconds"]) * int(h.get("packed", h.get("stacked", n))) for h in histories[0]]
    step0 = members[0].step
    with live.session(desc, n * (epochs - start), enabled=progress) as line:  # n runs' epochs
        for epoch in range(start, epochs):
            with deadline.epoch(spans, desc):
                t0 = time.perf_counter()
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
                    y = torch.stack([yb for _, yb in batches])
                    optimizer.zero_grad(set_to_none=True)
                    with autocast(dev, amp):
                        if own:
                            inputs = [
                                m.step.inputs(x, g) if m.step.inputs is not None else (x, None)
                                for m, x, g in zip(members, xs, gens)
                            ]
                            out = forward(pack_inputs([x for x, _ in inputs]))
                            grads, loss = step0.gradients(
                                out, [a for _, a in inputs], list(y), [m.step.loss for m in members], plist
                            )
                            for p, g in zip(plist, grads):
                                p.grad = g
                        else:
                            loss = _losses(groups, n, forward(pack_inputs(xs)), y, epoch)
                            loss.sum().backward()
                    optimizer.step()
                    totals += loss.detach().float() * int(y.shape[1])
                    count += int(y.shape[1])
                if scheduler is not None:
                    scheduler.step()
                seconds = time.perf_counter() - t0
                mean_loss = (totals / max(count, 1)).tolist()  # the one host read of the epoch
                opt_state = optimizer.state_dict() if any(m.run is not None for m in members) else None
                for i, m in enumerate(members):
                    if diverged[i] is not None:
                        continue
                    if not math.isfinite(mean_loss[i]):
                        diverged[i] = epoch + 1
                        warnings.warn(
                            f"{desc}: run {i + 1} of {n} diverged in epoch {epoch + 1} (the others go on)", stacklevel=2
                        )
                        continue
                    elapsed[i] += seconds / n
                    entry = {"epoch": epoch + 1, "loss": mean_loss[i], "lr": lr, "seconds": seconds / n, "packed": n}
                    histories[i].append(entry)
                    if m.run is not None:
                        state = packed.run_optimizer_state(opt_state, i)
                        m.run.save_checkpoint(
                            checkpoint(epoch + 1, packed.run_state(i), state, scheduler, histories[i], elapsed[i])
                        )
                for i, m in enumerate(members):
                    if diverged[i] is None:
                        for cb in m.callbacks:
                            cb(epoch + 1, histories[i][-1], None)
            line.update(n)  # n runs' epochs
    results = []
    for i, m in enumerate(members):
        if diverged[i] is None:
            m.model.load_state_dict(packed.run_state(i))
        results.append(
            PackedResult(
                history=histories[i], wall_time=elapsed[i], resumed_from=start or None, diverged_at=diverged[i]
            )
        )
    return results
