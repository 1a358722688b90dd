"""Shared fixtures: offline hub settings and smoke-scale notebook execution (once per session)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_EXECUTED: dict[str, Path] = {}


@pytest.fixture(scope="session")
def smoke_notebook() -> Callable[..., Path]:
    """Execute a notebook at ``smoke`` scale once per session and return the executed copy.

    With default parameters the copy goes to ``build/smoke/notebooks/<name>.ipynb`` (what the
    strict book build stages); with extra parameters it goes to a separate file.
    """
    from lib import book

    def run(name: str, **params: Any) -> Path:
        tag = name + "".join(f"-{k}={v}" for k, v in sorted(params.items()))
        if tag not in _EXECUTED:
            output = None
            if params:
                output = book.executed_path(name, "smoke").with_name(f"{tag}.ipynb")
            _EXECUTED[tag] = book.execute_notebook(name, "smoke", params, output=output, progress=False)
        return _EXECUTED[tag]

    return run


@pytest.fixture(scope="session")
def smoke_published(smoke_notebook: Callable[..., Path]) -> Callable[..., dict[str, Any]]:
    """The numbers a notebook published (``lib.report.publish``) in its smoke-scale run."""
    from lib.report import read_published

    return lambda name, **params: read_published(smoke_notebook(name, **params))


@pytest.fixture()
def float64():
    """Double precision for one test module's tests (restored afterwards for other modules)."""
    import torch

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.fixture()
def no_data(tmp_path, monkeypatch):
    """A machine with no data anywhere: empty $CALIBOOK_DATA and cache, no ../shared/data, hub off.
    Returns the empty data folder (error messages must name it)."""
    from lib.data import locate

    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("CALIBOOK_DATA", str(empty))
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(locate, "shared_data_dir", lambda: tmp_path / "no-shared")
    return empty
