"""Tests of calibook.gpu.selftest on the CPU: the four stacked runs predict what each run alone predicts
(float32 on CPU: well inside the bf16 tolerance), the pass is remembered per machine and torch, and
a member beyond the tolerance is named."""

from __future__ import annotations

import pytest
import torch

import calibook.gpu.selftest as st


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_selftest_passes_once_then_remembers(cache) -> None:
    cpu = torch.device("cpu")
    assert st.marker(cpu).parent == cache and torch.__version__.replace("/", "_") in st.marker(cpu).name
    line = st.run_selftest("cpu")
    assert line.startswith("self-test: 4 runs packed = alone on cpu")
    worst = float(line.split("largest difference ")[1].split(")")[0])
    # float32 on the CPU: only the order of batched sums differs (FGR's batched backward), so the
    # gap is rounding, at least ten times inside the tolerance made for bf16
    assert worst < st.TOLERANCE / 10
    assert st.marker(cpu).exists()
    assert "passed before" in st.run_selftest("cpu")


def test_a_member_beyond_the_tolerance_is_named(cache, monkeypatch) -> None:
    monkeypatch.setattr(st, "TOLERANCE", -1.0)  # every difference, even 0, is now too large
    with pytest.raises(RuntimeError, match=r"vanilla \(seed 0\) packed differs"):
        st.run_selftest("cpu", force=True)
    assert not st.marker(torch.device("cpu")).exists()  # no pass remembered


def test_a_call_without_stacks_checks_the_runs_alone_and_remembers_that_apart(cache, monkeypatch) -> None:
    cpu = torch.device("cpu")
    monkeypatch.setattr(st, "fit_runs", None)  # no pack may train: calling it would raise TypeError
    line = st.run_selftest("cpu", stacked=False)
    assert line.startswith("self-test: 4 runs alone on cpu predict probabilities")
    assert st.marker(cpu, stacked=False).exists() and not st.marker(cpu).exists()


def test_a_run_alone_without_probabilities_is_named(cache, monkeypatch) -> None:
    real = st.predict
    monkeypatch.setattr(st, "predict", lambda *a, **k: real(*a, **k) * float("nan"))
    with pytest.raises(RuntimeError, match=r"vanilla \(seed 0\) alone predicts no probabilities"):
        st.run_selftest("cpu", stacked=False)
    assert not st.marker(torch.device("cpu"), stacked=False).exists()
