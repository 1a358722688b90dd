"""Paper 4's pages, one module per notebook (``lib/rr/pages/<notebook>.py``)."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any


@functools.cache
def paper_data() -> dict[str, Any]:
    """The paper's numbers and quoted statements, ``lib/rr/paper.toml`` (one section per page), read once."""
    with open(Path(__file__).parents[1] / "paper.toml", "rb") as fh:
        return tomllib.load(fh)
