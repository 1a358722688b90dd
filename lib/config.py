"""Scales, paths and per-notebook settings: the one config that papermill, the CLI and tests read.

Every notebook has a ``scale`` parameter (``lib/scales.toml``): ``smoke`` (seconds, small data the
project makes itself; CI), ``cpu`` (the default: minutes on 2 cores, real data scaled down) or
``paper`` (the papers' settings, for a GPU).
"""

from __future__ import annotations

import os
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from lib.validation import check_choice

SCALES: tuple[str, ...] = ("smoke", "cpu", "paper")
SCALES_FILE = Path(__file__).with_name("scales.toml")


def paper_numbers(paper: str) -> dict[str, Any]:
    """A paper's numbers and quoted sentences, ``lib/<paper>/paper.toml`` (one section per page or
    table), a fresh dict on every call (pages read it at import), so no caller's edit reaches another's. ``paper``: ``"moe"``, ``"l2d"``, ``"ccc"`` or ``"rr"``."""
    check_choice(paper, ("moe", "l2d", "ccc", "rr"), "paper")
    return tomllib.loads((Path(__file__).with_name(paper) / "paper.toml").read_text(encoding="utf-8"))


def repo_root() -> Path:
    """The repository root (the folder holding ``lib/``, ``_toc.yml`` and ``notebooks/``)."""
    return Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    """Where finished runs, checkpoints and decoded data are cached (``CALIBOOK_CACHE`` overrides)."""
    path = Path(os.environ.get("CALIBOOK_CACHE", repo_root() / ".cache" / "calibook"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, dict[str, Any]]]:
    with SCALES_FILE.open("rb") as fh:
        return tomllib.load(fh)


def notebooks_with_settings() -> list[str]:
    """Names of the notebooks that have an entry in ``scales.toml``."""
    return sorted(_table())


def settings(notebook: str, scale: str, **overrides: Any) -> dict[str, Any]:
    """Settings of ``notebook`` at ``scale`` (its ``[name.common]`` table, the scale's table of its
    ``base`` notebook if it names one, then its own scale's) with the keyword ``overrides`` that are
    not ``None``."""
    table = _table()
    check_choice(notebook, sorted(table), "notebook")
    check_choice(scale, SCALES, "scale")
    entry = table[notebook]
    out: dict[str, Any] = dict(entry.get("common", {}))
    base = out.pop("base", None)
    out.update(table[base].get(scale, {}) if base else {})
    out.update(entry.get(scale, {}))
    for key, value in overrides.items():
        if value is None:
            continue
        check_choice(key, sorted(out), f"{notebook} setting")
        out[key] = value
    out["scale"] = scale
    return out
