"""What paper 1's engine needs of a data set: the :class:`Bundle` protocol.

:class:`lib.data.images.ImageBundle` and :class:`lib.data.text.TextBundle` satisfy it; :func:`check_bundle`
rejects anything else with a ``ValueError`` naming what is missing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, Self, runtime_checkable

import torch

__all__ = ["Bundle", "Splits", "TensorSplits", "check_bundle", "strided"]

Pair = tuple[torch.Tensor, torch.Tensor]  # (x, y) of one split


@runtime_checkable
class Bundle(Protocol):
    """A train/validation/test split with labels, a "hard" test subset, ``kind`` ("images" or "text"),
    ``num_classes``, ``sizes()`` (train, validation, test and hard examples) and a content hash
    (``fingerprint()``, part of every run key)."""

    name: str
    kind: str
    source: str
    classes: tuple[str, ...]
    train_y: torch.Tensor
    val_y: torch.Tensor
    test_y: torch.Tensor
    hard_mask: torch.Tensor
    num_classes: int

    def sizes(self) -> dict[str, int]: ...

    def fingerprint(self) -> str: ...


def strided(x: torch.Tensor) -> bytes:
    """The bytes of a strided sample of about 4096 of ``x``'s values (a fingerprint's view of its data)."""
    flat = x.reshape(-1)
    return flat[:: max(1, flat.numel() // 4096)].cpu().numpy().tobytes()


class Splits:
    """The counts and content hash shared by the bundles (:class:`TensorSplits`,
    :class:`lib.data.text.TextBundle`), from their ``classes``, labels and masks."""

    @property
    def num_classes(self) -> int:
        """Number of classes."""
        return len(self.classes)

    def sizes(self) -> dict[str, int]:
        """Number of train, validation, test and hard test examples (and "all": the test examples of
        the natural-proportion sample, when a subclass's ``all_mask`` marks one)."""
        out = {split: int(getattr(self, f"{split}_y").shape[0]) for split in ("train", "val", "test")}
        out["hard"] = int(self.hard_mask.sum())
        if (all_mask := getattr(self, "all_mask", None)) is not None:
            out["all"] = int(all_mask.sum())
        return out

    def digest(self, header: str, samples: Iterable[bytes]) -> str:
        """12 hex digits of the SHA-256 of ``header``, the labels, the hard mask, ``all_mask`` (where one
        is set) and ``samples`` (bytes of the data, e.g. :func:`strided`): a bundle's fingerprint."""
        h = hashlib.sha256(header.encode())
        masks = () if (all_mask := getattr(self, "all_mask", None)) is None else (all_mask,)
        for t in (self.train_y, self.val_y, self.test_y, self.hard_mask, *masks):
            h.update(t.cpu().numpy().tobytes())
        for sample in samples:
            h.update(sample)
        return h.hexdigest()[:12]


@dataclass
class TensorSplits(Splits):
    """The fields shared by the tensor bundles (:class:`lib.data.images.ImageBundle`,
    :class:`lib.features.frozen.FeatureBundle`), which add their own fields, ``kind`` and ``fingerprint``."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    hard_mask: torch.Tensor
    classes: tuple[str, ...]
    source: str

    @classmethod
    def from_pairs(cls, name: str, train: Pair, val: Pair, test: Pair, **fields: Any) -> Self:
        """A bundle from its (x, y) pairs of ``train``, ``val`` and ``test`` and its other ``fields``."""
        (tx, ty), (vx, vy), (sx, sy) = train, val, test
        return cls(name=name, train_x=tx, train_y=ty, val_x=vx, val_y=vy, test_x=sx, test_y=sy, **fields)


_FIELDS = (*Bundle.__annotations__, "sizes", "fingerprint")


def check_bundle(data: Any, name: str = "data") -> Bundle:
    """Return ``data`` if it satisfies :class:`Bundle`; else ``ValueError`` naming the missing members."""
    missing = [f for f in _FIELDS if not hasattr(data, f)]
    if missing:
        raise ValueError(
            f"{name}: expected a data bundle (ImageBundle or TextBundle); "
            f"{type(data).__name__} lacks {', '.join(missing)}"
        )
    return data
