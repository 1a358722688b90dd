"""One live progress line for long work: epochs (or images), runs, time left; one final line stays.

Every training loop of the engine reports finished epochs here instead of drawing a bar per epoch.
A grid of runs (:func:`lib.moe.grid.train_stacked`) opens one :func:`session` for all its epochs, so
the whole grid is one line; feature extraction (:mod:`lib.features.frozen`) counts images the same way.
Where the line goes:

* in a Jupyter kernel: one output updated in place (``IPython.display`` with a ``display_id``), so
  the saved page keeps one final line; and also the terminal that started the kernel, through the
  ``fileno()`` of ipykernel's ``sys.stderr`` (a copy of the kernel's original standard error, which
  never reaches the saved page);
* in a terminal: one line on stderr rewritten in place (``\\r``, then erase to the end of the line)
  at most every ``INTERVAL`` seconds, ended with a newline;
* into a file or a pipe (a GPU machine's captured output, ``papermill ... 2> log``): a whole line at
  most once a minute.

``CALIBOOK_PROGRESS=terminal`` (what the book runner, :mod:`calibook.book`, sets in its kernels) keeps the
line out of the page and sends it to the terminal only, after the text of
``CALIBOOK_PROGRESS_PREFIX`` (the runner's "[3/15 cifar10h] ": which page, where in the list).
``CALIBOOK_PROGRESS=off``, ``TQDM_DISABLE=1`` (without ``CALIBOOK_PROGRESS=terminal``) or
``enabled=False`` switches it off. :func:`note` tells the same watcher one line of news (a run resumed
from its checkpoint, a run another process holds, a damaged file).

The time left is the mean time of the epochs after the first one this session counted (the first
also pays for data on the device, compilation and warm-up), times the epochs still to go.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["Line", "format_eta", "note", "run_done", "session", "INTERVAL", "LOG_INTERVAL", "MODE", "PREFIX"]

INTERVAL = 2.0  # seconds between redraws in place
LOG_INTERVAL = 60.0  # seconds between lines written to a file or a pipe
_ERASE = "\x1b[K"  # ANSI: erase to the end of the line (what a longer line drawn before left)
MODE = "CALIBOOK_PROGRESS"  # environment: "terminal" (never in a page) or "off"; unset: page and terminal
PREFIX = "CALIBOOK_PROGRESS_PREFIX"  # environment: text before the line on the terminal


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


def _kernel_terminal_fd() -> int | None:
    """Inside a kernel: the file descriptor of the kernel's original standard error (ipykernel's
    ``OutStream.fileno()``, a copy made before it redirected fd 2 into the notebook), where the
    terminal that launched the kernel reads; None when there is none (``sys.stderr`` is the
    process's own, or ipykernel does not watch the descriptors, e.g. under pytest)."""
    stream = sys.stderr
    if stream is None or stream is sys.__stderr__:
        return None
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    return fd if isinstance(fd, int) and not isinstance(fd, bool) and fd >= 0 else None


class _Terminal:
    """Where the line is written as text: a file descriptor (the kernel's terminal) or a stream
    (``sys.stderr`` outside a kernel); a terminal is rewritten in place, anything else gets whole
    lines at most every :data:`LOG_INTERVAL` seconds."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        try:
            self.tty = os.isatty(fd) if fd is not None else bool(getattr(sys.stderr, "isatty", lambda: False)())
        except OSError:
            self.tty = False
        self.shown = -1e9

    def due(self, final: bool) -> bool:
        """Whether a line should be written now (``INTERVAL`` for a terminal, a minute otherwise)."""
        return final or time.monotonic() - self.shown >= (INTERVAL if self.tty else LOG_INTERVAL)

    def write(self, line: str, final: bool) -> None:
        self.shown = time.monotonic()
        text = ("\r" + line + _ERASE + ("\n" if final else "")) if self.tty else line + "\n"
        try:
            if self.fd is not None:
                os.write(self.fd, text.encode("utf-8", "replace"))
            else:
                sys.stderr.write(text)
                sys.stderr.flush()
        except (OSError, ValueError):  # a closed terminal: the line only goes missing there
            self.fd, self.tty = None, False


class Line:
    """The progress of ``epochs`` units (``unit``, "epoch" by default) over ``runs`` runs, shown as
    one line (see the module docstring)."""

    def __init__(self, desc: str, epochs: int, runs: int = 1, enabled: bool = True, unit: str = "epoch") -> None:
        self.desc, self.epochs, self.runs, self.unit = desc, max(int(epochs), 0), max(int(runs), 1), unit
        mode, quiet = os.environ.get(MODE, ""), os.environ.get("TQDM_DISABLE", "") in ("1", "True", "true")
        self.enabled = enabled and mode != "off" and (mode == "terminal" or not quiet)
        self.prefix = os.environ.get(PREFIX, "")
        self.done_epochs, self.done_runs, self.start, self.shown = 0, 0, time.monotonic(), -1e9
        self.first: tuple[int, float] | None = None  # (units done, time) when the first unit ended
        kernel = _kernel_display() if self.enabled else None
        self._display = kernel if mode != "terminal" else None
        self._handle: Any = None
        self._terminal: _Terminal | None = None
        if self.enabled:
            fd = _kernel_terminal_fd() if kernel is not None else None
            self._terminal = _Terminal(fd) if kernel is None or fd is not None else None

    def text(self) -> str:
        """The line: what, units done of all, runs done of all, elapsed and time left."""
        now = time.monotonic()
        spent, (n0, t0) = now - self.start, self.first or (0, self.start)
        pace = (now - t0) / (self.done_epochs - n0) if self.done_epochs > n0 else None
        pace = spent / self.done_epochs if pace is None and self.done_epochs else pace
        eta = pace * (self.epochs - self.done_epochs) if pace is not None else None
        left = f", ~{format_eta(eta)} left" if eta is not None and self.done_epochs < self.epochs else ""
        runs = f", {self.done_runs}/{self.runs} runs" if self.runs > 1 else ""
        return f"{self.desc}: {self.unit} {self.done_epochs}/{max(self.epochs, 1)}{runs}, {format_eta(spent)}{left}"

    def update(self, epochs: int = 1, runs: int = 0, final: bool = False) -> None:
        """Count ``epochs`` more units and ``runs`` more finished runs; redraw if due (always when ``final``)."""
        self.done_epochs = min(self.done_epochs + int(epochs), self.epochs)
        if self.first is None and self.done_epochs:
            self.first = (self.done_epochs, time.monotonic())
        self.done_runs = min(self.done_runs + int(runs), self.runs)
        if not self.enabled:
            return
        line = None
        if self._display is not None and (final or time.monotonic() - self.shown >= INTERVAL):
            self.shown = time.monotonic()
            line = self.text()
            if self._handle is None:
                self._handle = self._display.display({"text/plain": line}, raw=True, display_id=True)
            else:
                self._handle.update({"text/plain": line}, raw=True)
        if self._terminal is not None and self._terminal.due(final):
            self._terminal.write(self.prefix + (line or self.text()), final)

    def close(self, quiet_if_idle: bool = False) -> None:
        """Draw the final line (the one that stays); none with ``quiet_if_idle`` when nothing was counted."""
        if quiet_if_idle and not self.done_epochs and not self.done_runs:
            return
        self.update(0, final=True)


_ACTIVE: list[Line] = []


def note(text: str, *, warned: bool = False) -> None:
    """Tell whoever watches the work ``text``, one line: outside a kernel on stderr; in a kernel on the
    terminal that launched it and, unless the book runner keeps progress out of pages
    (``CALIBOOK_PROGRESS=terminal``), in the page. ``warned``: ``text`` repeats a warning Python has
    shown already (stderr outside a kernel, the page inside one), so only a kernel's terminal gets it.
    Nothing with ``CALIBOOK_PROGRESS=off``."""
    mode = os.environ.get(MODE, "")
    if mode == "off":
        return
    kernel = _kernel_display() is not None
    fd = _kernel_terminal_fd() if kernel else None
    if fd is not None or not (kernel or warned):
        _Terminal(fd).write(os.environ.get(PREFIX, "") + text, final=True)
    if kernel and not warned and mode != "terminal":
        print(text, file=sys.stderr, flush=True)


@contextlib.contextmanager
def session(
    desc: str, epochs: int, runs: int = 1, enabled: bool = True, unit: str = "epoch", quiet_if_idle: bool = False
) -> Iterator[Line]:
    """One line for ``epochs`` units (``unit``) of ``runs`` runs; loops inside report to it (nested
    sessions report to the outermost one). ``quiet_if_idle``: no final line if nothing was counted
    (all of it was cached, say)."""
    if _ACTIVE:
        yield _ACTIVE[0]
        return
    line = Line(desc, epochs, runs, enabled=enabled, unit=unit)
    _ACTIVE.append(line)
    try:
        yield line
    finally:
        _ACTIVE.pop()
        line.close(quiet_if_idle)


def run_done() -> None:
    """Report a finished run to the open session (no-op without one)."""
    if _ACTIVE:
        _ACTIVE[0].update(0, runs=1)
