"""Tests of lib.engine.device: device resolution, the autocast rule, and random state that
round-trips (the next draws after a restore equal the draws after the save)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from lib.engine.device import autocast, device_name, resolve_device, rng_state, seed_everything, set_rng_state


def test_resolve_device() -> None:
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    meta = torch.device("meta")
    assert resolve_device(meta) is meta
    with pytest.raises(ValueError, match="device"):
        resolve_device("not-a-device")


def test_device_name_of_the_cpu_says_cpu_and_threads() -> None:
    name = device_name("cpu")
    assert name.startswith("CPU (") and f"{torch.get_num_threads()} threads" in name


def test_autocast_is_off_on_cpu_unless_asked_and_a_no_op_on_meta(monkeypatch) -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    monkeypatch.delenv("CALIBOOK_CPU_BF16", raising=False)
    with autocast("cpu", bf16=True):  # bf16 on CPU only on request
        assert (a @ b).dtype == torch.float32
    monkeypatch.setenv("CALIBOOK_CPU_BF16", "1")
    with autocast("cpu", bf16=True):
        assert (a @ b).dtype == torch.bfloat16
    with autocast("cpu", bf16=False):
        assert (a @ b).dtype == torch.float32
    with autocast("meta", bf16=True):  # no autocast on meta: a plain context
        assert (a.to("meta") @ b.to("meta")).dtype == torch.float32


def _draws() -> tuple[float, float, list[float]]:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_seed_everything_makes_all_three_generators_repeat() -> None:
    seed_everything(123)
    first = _draws()
    seed_everything(123)
    assert _draws() == first
    seed_everything(124)
    assert _draws() != first


def test_rng_state_round_trips_and_loads_with_weights_only(tmp_path) -> None:
    seed_everything(7)
    _draws()
    state = rng_state()
    expected = _draws()
    torch.save(state, tmp_path / "rng.pt")
    seed_everything(99)  # move every generator elsewhere
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert _draws() == expected
