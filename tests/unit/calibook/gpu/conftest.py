"""Fixtures of the paper-scale queue's tests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture()
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache and ``results/`` for the test; returns the results folder."""
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CALIBOOK_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


@pytest.fixture()
def without_data(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[..., Any]], None]:
    """``without_data(missing)``: the queue's pages load their data with ``missing`` (data absent
    from the machine, e.g. raising ``FileNotFoundError``)."""
    import calibook.gpu.queue as q

    real = q.get_page

    def patch(missing: Callable[..., Any]) -> None:
        def page(name: str) -> Any:
            out = copy.copy(real(name))
            out.data = missing  # an instance attribute shadows the page's method
            return out

        monkeypatch.setattr(q, "get_page", page)

    return patch
