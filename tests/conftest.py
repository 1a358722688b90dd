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
        params = {k: v for k, v in params.items() if not _is_default(name, k, v)}  # one run per distinct page
        tag = name + "".join(f"-{k}={v}" for k, v in sorted(params.items()))
        if tag not in _EXECUTED:
            output = None
            if params:
                output = book.executed_path(name, "smoke").with_name(f"{tag}.ipynb")
            _EXECUTED[tag] = book.execute_notebook(name, "smoke", params, output=output, progress=False)
        return _EXECUTED[tag]

    return run


def _is_default(name: str, key: str, value: Any) -> bool:
    """Whether ``value`` is the default of parameter ``key`` in the notebook's parameters cell (a
    run with it is the default run: ``-p target photo`` on the PACS page, whose default is photo)."""
    import ast

    from lib.notebooks import notebook_parameters

    declared = notebook_parameters(name).get(key)
    if declared is None:
        return False
    try:
        return ast.literal_eval(declared["default"]) == value
    except (ValueError, SyntaxError):
        return False


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
