"""Fixtures of the paper-scale queue's tests."""

from __future__ import annotations

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
    import lib.gpu.queue as q

    real = q.get_page

    class WithoutData:
        """A page whose ``data`` is ``missing``; every other name is the page's own."""

        def __init__(self, page: Any, missing: Callable[..., Any]) -> None:
            self.page, self.data = page, missing

        def __getattr__(self, name: str) -> Any:
            return getattr(self.page, name)

    def patch(missing: Callable[..., Any]) -> None:
        monkeypatch.setattr(q, "get_page", lambda name: WithoutData(real(name), missing))

    return patch
