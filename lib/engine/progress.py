"""One live progress line for long training: epochs, runs, time left; one final line stays.

Every training loop of the engine reports finished epochs here instead of drawing a bar per epoch.
A grid of runs (:func:`lib.moe.grid.train_stacked`) opens one :func:`session` for all its epochs, so
the whole grid is one line. Where the line goes:

* in a Jupyter kernel (a page run by papermill or in JupyterLab): one output updated in place
  (``IPython.display`` with a ``display_id``), so the saved page keeps one final line, not hundreds
  of updates;
* in a terminal: one line on stderr rewritten in place (``\\r``) at most every ``interval`` seconds,
  ended with a newline;
* into a file or a pipe (a GPU machine's captured output): a whole line at most once a minute.

``TQDM_DISABLE=1`` (what the book runner sets in its kernels) or ``enabled=False`` switches it off.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["Line", "epoch_done", "format_eta", "run_done", "session"]


def format_eta(seconds: float) -> str:
    """``seconds`` as ``1h02m``, ``3m05s`` or ``42s``."""
    s = max(int(round(seconds)), 0)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _kernel_display() -> Any | None:
    """``IPython.display`` when running inside a Jupyter kernel, else None (never imports IPython)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "kernel"):
        return None
    import IPython.display

    return IPython.display


class Line:
    """The progress of ``epochs`` epochs over ``runs`` runs, shown as one line (see the module docstring)."""

    def __init__(self, desc: str, epochs: int, runs: int = 1, interval: float = 2.0, enabled: bool = True) -> None:
        self.desc, self.epochs, self.runs, self.interval = desc, max(int(epochs), 1), max(int(runs), 1), interval
        self.enabled = enabled and os.environ.get("TQDM_DISABLE", "") not in ("1", "True", "true")
        self.done_epochs, self.done_runs, self.start, self.shown = 0, 0, time.monotonic(), -1e9
        self._display = _kernel_display() if self.enabled else None
        self._handle: Any = None
        self._tty = bool(getattr(sys.stderr, "isatty", lambda: False)())
        if self._display is None and not self._tty:
            self.interval = max(self.interval, 60.0)  # captured output: a line a minute, not hundreds

    def text(self) -> str:
        """The line: what, epochs done of all, runs done of all, elapsed and time left."""
        spent = time.monotonic() - self.start
        eta = spent / self.done_epochs * (self.epochs - self.done_epochs) if self.done_epochs else None
        left = f", ~{format_eta(eta)} left" if eta is not None and self.done_epochs < self.epochs else ""
        runs = f", {self.done_runs}/{self.runs} runs" if self.runs > 1 else ""
        return f"{self.desc}: epoch {self.done_epochs}/{self.epochs}{runs}, {format_eta(spent)}{left}"

    def update(self, epochs: int = 1, runs: int = 0, final: bool = False) -> None:
        """Count ``epochs`` more epochs and ``runs`` more finished runs; redraw if due (always when ``final``)."""
        self.done_epochs = min(self.done_epochs + int(epochs), self.epochs)
        self.done_runs = min(self.done_runs + int(runs), self.runs)
        if not self.enabled or (not final and time.monotonic() - self.shown < self.interval):
            return
        self.shown = time.monotonic()
        line = self.text()
        if self._display is not None:
            if self._handle is None:
                self._handle = self._display.display({"text/plain": line}, raw=True, display_id=True)
            else:
                self._handle.update({"text/plain": line}, raw=True)
        elif self._tty:
            sys.stderr.write("\r" + line + ("\n" if final else ""))
            sys.stderr.flush()
        else:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def close(self) -> None:
        """Draw the final line (the one that stays)."""
        self.update(0, final=True)


_ACTIVE: list[Line] = []


@contextlib.contextmanager
def session(desc: str, epochs: int, runs: int = 1, enabled: bool = True) -> Iterator[Line]:
    """One line for ``epochs`` epochs of ``runs`` runs; training loops inside report to it (nested
    sessions report to the outermost one)."""
    if _ACTIVE:
        yield _ACTIVE[0]
        return
    line = Line(desc, epochs, runs, enabled=enabled)
    _ACTIVE.append(line)
    try:
        yield line
    finally:
        _ACTIVE.pop()
        line.close()


def epoch_done(n_epochs: int = 1) -> None:
    """Report finished epochs to the open session (no-op without one)."""
    if _ACTIVE:
        _ACTIVE[0].update(n_epochs)


def run_done() -> None:
    """Report a finished run to the open session (no-op without one)."""
    if _ACTIVE:
        _ACTIVE[0].update(0, runs=1)
