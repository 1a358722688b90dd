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
The one training loop, :func:`lib.engine.loop.fit_packed`, trains a pack (a run alone is its G = 1
case): each run keeps its seed, initial weights, batch order, augmentation, optimizer moments,
checkpoint (one format, so a packed run resumes alone and the reverse) and record.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["OwnStep", "Packed", "PackedLinear", "pack_inputs", "run_slice", "take_rows"]


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


# --------------------------------------------------------------------------- a method's own step in a pack

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
