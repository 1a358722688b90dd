"""Where runs are kept: the seam between lib's experiments and the machinery that caches them.

lib computes a run as ``compute(run)``: ``run`` is where it checkpoints (``save_checkpoint`` /
``load_checkpoint``) and saves large arrays (``save_arrays``), and ``compute`` returns the run's
record. Whether a finished run is served instead of computed, where it is stored and how its key
follows the config and the code is the business of a *run store*, installed by the book's machinery
(``calibook``, which keys runs by config and code and verifies every read) with :func:`install`. The
functions below hand each call to the installed store; lib imports nothing of the machinery.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

__all__ = [
    "Run",
    "RunMissing",
    "cached_run",
    "install",
    "is_committed",
    "load_artifact",
    "open_run",
    "provenance",
    "training",
]


class RunMissing(LookupError):
    """A run is neither published nor cached, and training is off (:func:`training`)."""


class Run(Protocol):
    """What a computation sees of its run: its key, checkpoints and saved arrays."""

    key: str

    def save_checkpoint(self, state: Mapping[str, Any]) -> None: ...
    def load_checkpoint(self) -> dict[str, Any] | None: ...
    def save_arrays(self, name: str, **arrays: Any) -> Any: ...


_STORE: Any = None


def install(store: Any) -> None:
    """Make ``store`` (a module or object with the functions below) the run store."""
    global _STORE
    _STORE = store


def _store() -> Any:
    if _STORE is None:
        raise RuntimeError("runs: no run store is installed; import calibook (the book's machinery) first")
    return _STORE


def cached_run(group: str, config: Mapping[str, Any], compute: Callable[[Run], Mapping[str, Any]]) -> dict[str, Any]:
    """The finished record of run ``(group, config)``: the stored one, or ``compute(run)``'s, stored."""
    return _store().cached_run(group, config, compute)


def open_run(group: str, config: Mapping[str, Any]) -> Any:
    """The run ``(group, config)`` itself (its key, stored record, lock and checkpoints), for code that
    trains several runs at once (packed runs)."""
    return _store().Run(group, config)


def load_artifact(record: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The arrays a finished run saved under ``name`` (``run.save_arrays``)."""
    return _store().load_artifact(record, name)


def is_committed(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` was published (read from ``results/``) rather than computed here."""
    return _store().is_committed(record)


def provenance(device: Any = None) -> dict[str, Any]:
    """Where and with what a run was computed (device, versions), for its record."""
    return _store().provenance(device)


def training(allowed: bool) -> AbstractContextManager[None]:
    """Within ``with training(False):`` no run is computed: missing ones raise :class:`RunMissing`."""
    return _store().training(allowed)
