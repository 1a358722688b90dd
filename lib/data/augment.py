"""Device-side image augmentation and batching on whole uint8 batches (no per-sample PIL).

The paper's training recipe (Table 4 of the MoE paper) uses random crop with zero padding (pad 4 at
32 px, pad 28 at 224 px) and a horizontal flip, then normalization. Here these are tensor ops on a
whole ``(B, C, H, W)`` uint8 batch on the training device; their random numbers come from CPU
``torch.Generator`` objects (the same on every device), copied to the device without a host sync.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch

from lib.validation import check_int, check_positive

# Channel statistics (RGB, of [0, 1] pixels). CIFAR-10 train-set statistics as used by most CIFAR
# code; ImageNet statistics for pretrained torchvision backbones.
CIFAR10_MEAN: tuple[float, float, float] = (0.4914, 0.4822, 0.4465)
CIFAR10_STD: tuple[float, float, float] = (0.2470, 0.2435, 0.2616)
IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)

__all__ = [
    "CIFAR10_MEAN",
    "CIFAR10_STD",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "Augment",
    "BatchIterator",
    "check_images",
    "default_padding",
    "epoch_generator",
    "to_device_async",
    "to_float",
]


def default_padding(size: int) -> int:
    """Crop padding of the paper's recipe: size/8 (4 at 32 px, 28 at 224 px)."""
    check_positive(size, "size")
    return max(1, int(size) // 8)


def epoch_generator(seed: int, epoch: int, stream: int = 0) -> torch.Generator:
    """A CPU generator determined by ``(seed, epoch, stream)`` (resumable without saved state)."""
    g = torch.Generator()
    g.manual_seed((int(seed) * 1_000_003 + int(epoch) * 9_176 + int(stream) * 101) % (2**63))
    return g


def to_device_async(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Copy a small CPU tensor to ``device`` without blocking the host (pinned memory on CUDA), for
    the per-step random numbers of augmentation and of FGR's filter (lib.moe.fgr, lib.data.jpeg)."""
    if device.type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def check_images(x: torch.Tensor, name: str = "x") -> None:
    """``ValueError`` naming ``name`` unless ``x`` is a torch tensor of shape (B, C, H, W)."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a torch tensor, got {type(x).__name__}")
    if x.ndim != 4:
        raise ValueError(f"{name}: expected a (B, C, H, W) batch, got shape {tuple(x.shape)}")


def crop_at(x: torch.Tensor, padding: int, dy: torch.Tensor, dx: torch.Tensor) -> torch.Tensor:
    """Zero-pad by ``padding`` and take, for image i, the window starting at (dy[i], dx[i])."""
    b, c, h, w = x.shape
    padded = torch.nn.functional.pad(x, (padding, padding, padding, padding))
    dev = x.device
    rows = to_device_async(dy, dev)[:, None] + torch.arange(h, device=dev)[None, :]  # (B, H)
    cols = to_device_async(dx, dev)[:, None] + torch.arange(w, device=dev)[None, :]  # (B, W)
    bi = torch.arange(b, device=dev)[:, None, None, None]
    ci = torch.arange(c, device=dev)[None, :, None, None]
    return padded[bi, ci, rows[:, None, :, None], cols[:, None, None, :]]


def to_float(x: torch.Tensor, mean: Sequence[float], std: Sequence[float], channels_last: bool = False) -> torch.Tensor:
    """uint8 (B, C, H, W) -> float (x/255 - mean)/std, optionally in channels_last memory format."""
    check_images(x)
    if len(mean) != x.shape[1] or len(std) != x.shape[1]:
        raise ValueError(f"mean/std: need {x.shape[1]} values each, got {len(mean)} and {len(std)}")
    if min(std) <= 0:
        raise ValueError(f"std: must be > 0, got {tuple(std)}")
    # built on the host and copied without a host sync (a tensor made from a list on CUDA blocks)
    m = to_device_async(torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1) * 255.0, x.device)
    s = to_device_async(torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1) * 255.0, x.device)
    out = (x.to(torch.float32) - m) / s
    return out.contiguous(memory_format=torch.channels_last) if channels_last else out


@dataclass(frozen=True)
class Augment:
    """A run's training transform, the paper's recipe on a uint8 ``(B, C, H, W)`` batch: crop with
    zero padding (``padding=None``: :func:`default_padding` of the image size, 4 at 32 px, 28 at
    224 px; torchvision's ``RandomCrop(size, padding)`` image by image, offsets uniform on
    {0, ..., 2 padding}), flip left-right with probability 1/2, normalize (``crop_flip=False``:
    normalization only). ``t(x, generator)`` for one run's batch, :meth:`many` for the batches of the
    G runs of a pack at once."""

    mean: tuple[float, ...]
    std: tuple[float, ...]
    padding: int | None = None  # None: default_padding of the image size
    channels_last: bool = False
    crop_flip: bool = True

    def __post_init__(self) -> None:
        if self.padding is not None and (not isinstance(self.padding, int) or self.padding < 0):
            raise ValueError(f"padding: must be a non-negative integer, got {self.padding!r}")

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return self.many([x], [generator])[0]

    def many(self, xs: Sequence[torch.Tensor], generators: Sequence[torch.Generator | None]) -> list[torch.Tensor]:
        """``[t(x, g) for x, g in zip(xs, generators)]`` as one crop, flip and normalization over all the
        runs' images (the same kernels whatever G): each run's random numbers come from its own
        generator in the same order as alone (crop offsets, then flips), so its images are exactly
        those of its call alone."""
        x = torch.cat(list(xs))
        if self.crop_flip:
            check_images(x)
            if pad := default_padding(x.shape[-1]) if self.padding is None else self.padding:
                offsets = torch.cat(
                    [torch.randint(0, 2 * pad + 1, (2, len(b)), generator=g) for b, g in zip(xs, generators)], 1
                )
                x = crop_at(x, pad, offsets[0], offsets[1])
            flip = torch.cat([torch.rand(len(b), generator=g) < 0.5 for b, g in zip(xs, generators)])
            x = torch.where(to_device_async(flip, x.device)[:, None, None, None], x.flip(-1), x)
        return list(to_float(x, self.mean, self.std, self.channels_last).split([len(b) for b in xs]))


Inputs = torch.Tensor | Mapping[str, torch.Tensor]


def _map(x: Inputs, fn: Callable[[torch.Tensor], torch.Tensor]) -> Inputs:
    """``fn`` applied to a tensor, or to each tensor of a dict input."""
    return {k: fn(v) for k, v in x.items()} if isinstance(x, Mapping) else fn(x)


class BatchIterator:
    """Mini-batches ``(x_batch, y_batch)`` of a tensor or a dict of tensors (tokenized text) kept on
    ``device``. With ``shuffle`` epoch e uses the permutation of :func:`epoch_generator` ``(seed, e)``,
    so a run resumed at epoch e sees exactly the batches an uninterrupted run would."""

    def __init__(
        self,
        x: Inputs,
        y: torch.Tensor,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        device: str | torch.device = "cpu",
        drop_last: bool = False,
    ) -> None:
        check_int(batch_size, "batch_size")
        lengths = {int(v.shape[0]) for v in x.values()} if isinstance(x, Mapping) else {int(x.shape[0])}
        if len(lengths) != 1:
            raise ValueError(f"x: all tensors of a dict input need the same length, got {sorted(lengths)}")
        n = lengths.pop()
        if int(y.shape[0]) != n:
            raise ValueError(f"x and y: lengths differ ({n} vs {int(y.shape[0])})")
        self.device = torch.device(device)
        self.x, self.y, self.n, self.epoch = _map(x, lambda v: v.to(self.device)), y.to(self.device), n, 0
        self.batch_size, self.shuffle, self.seed, self.drop_last = batch_size, shuffle, seed, drop_last

    def __len__(self) -> int:
        return self.n // self.batch_size if self.drop_last else -(-self.n // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose permutation the next iteration uses."""
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[tuple[Inputs, torch.Tensor]]:
        gen = epoch_generator(self.seed, self.epoch, stream=1)
        order = torch.randperm(self.n, generator=gen).to(self.device) if self.shuffle else None
        for i in range(len(self)):
            lo, hi = i * self.batch_size, min((i + 1) * self.batch_size, self.n)
            idx = slice(lo, hi) if order is None else order[lo:hi]
            yield _map(self.x, operator.itemgetter(idx)), self.y[idx]
