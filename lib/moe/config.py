"""The config of one paper-1 run (:class:`TrainConfig`): what it computes, and the fields that only
change how fast it goes (left out of its cache key)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from lib.moe.methods import METHODS, WARMUP_FRACTION, WARMUP_METHODS
from lib.validation import check_choice, check_int, check_positive

# Fields that change how fast a run goes but not what it computes: left out of the cache key.
_RUNTIME_FIELDS = ("compile", "threads", "progress", "eval_batch_size")


@dataclass
class TrainConfig:
    """One training run of paper 1 (section 5, App. D.4 and its Table 4). Defaults: the CIFAR-10H row.

    ``backbone``: "cifar_resnet18" (width ``width``), "imagenet_resnet18" (``pretrained``),
    "text:<hf name>" (lib.nets.backbones.text_encoder with ``text_fallback``) or "tiny_cnn" (smoke scale).
    ``warmup_epochs=None`` means 40% of ``epochs`` for robust methods and FGR, 0 otherwise.
    ``image_size=None`` takes the data's size; ``padding=None`` is size/8 (4 at 32 px, 28 at 224 px)."""

    dataset: str = "cifar10h"
    method: str = "vanilla"
    epochs: int = 50
    warmup_epochs: int | None = None
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 1e-4
    lam: float = 2.0
    num_experts: int = 4
    router_hidden: int = 128
    seed: int = 0
    backbone: str = "cifar_resnet18"
    width: int = 64
    pretrained: bool = False
    text_fallback: bool = True
    max_length: int = 128
    image_size: int | None = None
    padding: int | None = None
    augment: bool = True
    device: str = "auto"
    amp: bool = True
    channels_last: bool = True
    compile: bool = False
    threads: int | None = None
    eval_batch_size: int = 512
    progress: bool = True

    def __post_init__(self) -> None:
        check_choice(self.method, METHODS, "method")
        for name in ("epochs", "batch_size", "num_experts", "router_hidden", "width", "max_length", "eval_batch_size"):
            check_int(getattr(self, name), name)
        if self.warmup_epochs is not None and not 0 <= self.warmup_epochs <= self.epochs:
            raise ValueError(f"warmup_epochs: must lie in [0, epochs={self.epochs}], got {self.warmup_epochs!r}")
        check_positive(self.lr, "lr")
        check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        check_positive(self.lam, "lam", allow_zero=True)

    @property
    def warmup(self) -> int:
        """Number of ERM warmup epochs actually used."""
        if self.method not in WARMUP_METHODS:
            return 0
        return self.warmup_epochs if self.warmup_epochs is not None else int(round(WARMUP_FRACTION * self.epochs))

    def key(self) -> dict[str, Any]:
        """The config fields that determine the result (runtime-only fields dropped)."""
        d = {k: v for k, v in dataclasses.asdict(self).items() if k not in _RUNTIME_FIELDS}
        return {**d, "warmup_epochs": self.warmup}

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)


#: The fields every run of ``tiny_config`` starts from.
TINY: dict[str, Any] = dict(
    dataset="synthetic",
    epochs=2,
    warmup_epochs=1,
    batch_size=16,
    backbone="tiny_cnn",
    width=4,
    lr=3e-3,
    num_experts=2,
    router_hidden=8,
    progress=False,
)


def tiny_config(method: str = "vanilla", seed: int = 0, **changes: Any) -> TrainConfig:
    """A run that trains in seconds on a CPU: a 3-layer CNN of width 4 under 2 experts, 2 epochs (one of
    ERM warmup), batch 16 (``TINY``). The engine's self-test (:mod:`calibook.gpu.selftest`) and the unit
    tests use it; ``changes`` override any field."""
    return TrainConfig(**{**TINY, "method": method, "seed": seed, **changes})
