"""One-line errors in notebooks: a bad parameter or missing data stops a page with its message alone.

A ``ValueError``, ``FileNotFoundError`` or ``LookupError`` raised by ``lib`` itself already says what is
wrong; :func:`install` shows it as ``<Type>: <message>`` without the traceback that would hide it. Other
errors, or any with ``CALIBOOK_DEBUG=1`` (``python -m calibook --debug``), keep IPython's full traceback.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

#: the packages whose deliberate errors are shown in one line: ``lib`` and ``calibook``.
ROOTS = (Path(__file__).resolve().parents[1] / "lib", Path(__file__).resolve().parent)
QUIET: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, LookupError)

__all__ = ["QUIET", "install", "one_line"]


def one_line(etype: type[BaseException], value: BaseException, tb: TracebackType | None) -> list[str] | None:
    """The error as one line (``["ValueError: train: ..."]``) when ``lib`` raised it on purpose
    (one of ``QUIET``, raised inside ``lib/``, ``CALIBOOK_DEBUG`` unset); else ``None``."""
    frames = traceback.extract_tb(tb)
    if os.environ.get("CALIBOOK_DEBUG") or not issubclass(etype, QUIET) or not frames:
        return None
    if not any(Path(frames[-1].filename).resolve().is_relative_to(r) for r in ROOTS):
        return None
    return [f"{etype.__name__}: {value}"]


def install() -> bool:
    """Register the handler in the running IPython kernel; ``False`` outside IPython (where IPython
    is not imported, so ``import lib`` stays cheap)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False

    def handler(
        self: Any,
        etype: type[BaseException],
        value: BaseException,
        tb: TracebackType | None,
        tb_offset: int | None = None,
    ) -> list[str]:
        stb = one_line(etype, value, tb) or self.InteractiveTB.structured_traceback(
            etype, value, tb, tb_offset=tb_offset
        )
        self._showtraceback(etype, value, stb)  # the kernel's error output (IPython leaves display to us)
        return stb

    shell.set_custom_exc(QUIET, handler)
    return True
