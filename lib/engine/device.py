"""Device, precision and random state: the one place every training loop of the book resolves them."""

from __future__ import annotations

import contextlib
import os
import platform
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["autocast", "device_name", "resolve_device", "rng_state", "seed_everything", "set_rng_state"]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; anything else is passed to ``torch.device``."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device: cannot be parsed ({err})") from None


def device_name(device: str | torch.device | None = None) -> str:
    """A readable name of the device a run used (GPU model or CPU description)."""
    dev = torch.device(device) if device is not None else None
    if dev is not None and dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def autocast(device: str | torch.device, bf16: bool = False) -> Any:
    """bf16 autocast on CUDA when ``bf16``; otherwise autocast switched off, which is a no-op context
    on device types without autocast (such as the meta device of the host-sync test). The paper-1
    runs use it with ``bf16`` around the backbone and without around the MoE head and losses; lib.data.jpeg
    filters in full precision inside a bf16 step."""
    dev = torch.device(device)
    if bf16 and (dev.type == "cuda" or (dev.type == "cpu" and os.environ.get("CALIBOOK_CPU_BF16") == "1")):
        return torch.autocast(dev.type, dtype=torch.bfloat16)  # CPU only on request (tests of the bf16 path)
    if torch.amp.is_autocast_available(dev.type):
        return torch.autocast(dev.type, enabled=False)
    return contextlib.nullcontext()


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA) global generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """The global generators' states as tensors and plain values, loadable with ``weights_only=True``."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    py_version, py_state, py_gauss = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": (kind, torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss), float(gauss)),
        "python": (py_version, torch.tensor(py_state, dtype=torch.int64), py_gauss),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    py_version, py_state, py_gauss = state["python"]
    random.setstate((py_version, tuple(int(v) for v in py_state.tolist()), py_gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
