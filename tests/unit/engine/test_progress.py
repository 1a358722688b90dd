"""lib.engine.progress: one line for a whole grid; in a kernel one output updated in place."""

from __future__ import annotations

import io
import os
import pty
import sys
import types

import pytest

from lib.engine import progress


def test_format_eta():
    assert [progress.format_eta(s) for s in (0, 42, 185, 3720)] == ["0s", "42s", "3m05s", "1h02m"]


def test_nested_sessions_report_to_one_line_that_ends_with_one_final_line(capsys, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    with progress.session("grid", epochs=6, runs=3) as line:
        with progress.session("run", epochs=2) as inner:
            assert inner is line
            inner.update()
            inner.update()
        progress.run_done()
        line.update(4, runs=2)
    lines = capsys.readouterr().err.splitlines()
    # captured stderr (not a terminal): the first update, none more within the minute, the final line
    assert len(lines) == 2 and lines[0].startswith("grid: epoch 1/6, 0/3 runs, ")
    assert lines[1].startswith("grid: epoch 6/6, 3/3 runs, ")
    with progress.session("quiet", epochs=1, enabled=False) as quiet:
        quiet.update()
    assert capsys.readouterr().err == ""


def test_in_a_kernel_the_line_is_one_display_updated_in_place(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    shown: list[tuple[str, str]] = []
    _fake_kernel(monkeypatch, shown)
    with progress.session("page", epochs=3) as line:
        for _ in range(3):
            line.update()
    assert [k for k, _ in shown].count("display") == 1  # one output; the rest are in-place updates
    assert shown[-1][1].startswith("page: epoch 3/3, ")
    with pytest.raises(ZeroDivisionError):  # an error inside a session still ends it
        with progress.session("boom", epochs=1):
            raise ZeroDivisionError("boom")
    assert progress._ACTIVE == []


def _fake_kernel(monkeypatch, shown):
    """A stand-in for IPython inside a kernel: ``display`` and its in-place updates are recorded."""

    class Handle:
        def update(self, obj, raw):
            shown.append(("update", obj["text/plain"]))

    def display(obj, raw, display_id):
        shown.append(("display", obj["text/plain"]))
        return Handle()

    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: types.SimpleNamespace(kernel=object())
    ipython.display = types.SimpleNamespace(display=display)
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", ipython.display)


class _KernelStderr:
    """What ipykernel makes of ``sys.stderr``: a stream into the notebook whose ``fileno()`` is the
    kernel's original standard error (here: the write end of a pipe or a pseudo-terminal)."""

    def __init__(self, fd):
        self.fd, self.text = fd, []

    def fileno(self):
        return self.fd

    def write(self, s):
        self.text.append(s)

    def flush(self):
        pass


def _read_all(fd):
    chunks = []
    while True:
        try:
            b = os.read(fd, 65536)
        except OSError:  # a pseudo-terminal whose other end closed
            break
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks).decode()


def test_in_a_kernel_the_line_also_reaches_the_terminal_that_started_it_not_the_page(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    shown: list[tuple[str, str]] = []
    _fake_kernel(monkeypatch, shown)
    master, slave = pty.openpty()  # papermill run from a terminal: the kernel's stderr is that terminal
    stream = _KernelStderr(slave)
    monkeypatch.setattr(sys, "stderr", stream)
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    with progress.session("page", epochs=3) as line:
        for _ in range(3):
            clock[0] += 5.0  # past the 2 s interval: every update is drawn
            line.update()
    os.close(slave)
    term = _read_all(master).replace("\r\n", "\n")  # the terminal shows a newline as \r\n
    os.close(master)
    assert stream.text == []  # nothing went into the notebook's stream
    assert [k for k, _ in shown].count("display") == 1 and shown[-1][1].startswith("page: epoch 3/3, ")
    # the terminal: each update rewrites the line in place (\r ... erase to end of line), one final newline
    draws = term.split("\r")[1:]
    assert len(draws) == 4 and all("\x1b[K" in d for d in draws)
    assert [d.split(":")[1].split(",")[0] for d in draws] == [" epoch 1/3", " epoch 2/3", " epoch 3/3", " epoch 3/3"]
    assert term.count("\n") == 1 and term.endswith("\n")


def test_in_a_kernel_a_captured_terminal_gets_a_line_a_minute(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    _fake_kernel(monkeypatch, [])
    r, w = os.pipe()  # papermill ... 2> log: not a terminal
    monkeypatch.setattr(sys, "stderr", _KernelStderr(w))
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    with progress.session("grid", epochs=100) as line:
        for _ in range(100):
            clock[0] += 3.0  # 300 s in all
            line.update(1)
    os.close(w)
    lines = _read_all(r).splitlines()
    os.close(r)
    assert "\r" not in "".join(lines)
    # at 3 s, 63 s, 123 s, 183 s, 243 s (a minute apart), then the final line
    assert len(lines) == 6 and lines[-1].startswith("grid: epoch 100/100, ")


def test_in_a_kernel_without_a_terminal_only_the_display_is_drawn(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    shown: list[tuple[str, str]] = []
    _fake_kernel(monkeypatch, shown)

    class NoFd(_KernelStderr):
        def fileno(self):
            raise io.UnsupportedOperation("fileno")  # ipykernel not watching the descriptors (pytest)

    monkeypatch.setattr(sys, "stderr", NoFd(-1))
    with progress.session("page", epochs=1) as line:
        line.update()
    assert sys.stderr.text == [] and shown[-1][1].startswith("page: epoch 1/1, ")


def test_a_line_counts_units_and_stays_silent_when_idle(capsys, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    with progress.session("features", 0, unit="image", quiet_if_idle=True):
        pass  # everything cached: nothing counted, nothing drawn
    assert capsys.readouterr().err == ""
    with progress.session("features", 500, unit="image", quiet_if_idle=True) as line:
        line.update(128)
        line.update(372)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("features: image 128/500, ") and lines[-1].startswith("features: image 500/500, ")


def test_terminal_mode_keeps_the_line_out_of_the_page_and_prefixes_it(monkeypatch):
    """CALIBOOK_PROGRESS=terminal (the book runner's kernels, which also set TQDM_DISABLE): no
    display in the page, the line on the kernel's terminal after the runner's prefix."""
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.setenv(progress.MODE, "terminal")
    monkeypatch.setenv(progress.PREFIX, "[3/15 pacs] ")
    shown: list[tuple[str, str]] = []
    _fake_kernel(monkeypatch, shown)
    r, w = os.pipe()
    stream = _KernelStderr(w)
    monkeypatch.setattr(sys, "stderr", stream)
    with progress.session("grid", epochs=2, runs=2) as line:
        line.update(2, runs=2)
    os.close(w)
    lines = _read_all(r).splitlines()
    os.close(r)
    assert shown == [] and stream.text == []  # nothing in the page
    assert len(lines) == 2 and all(x.startswith("[3/15 pacs] grid: epoch 2/2, 2/2 runs, ") for x in lines)


def test_terminal_mode_outside_a_kernel_and_off(capsys, monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.setenv(progress.MODE, "terminal")
    with progress.session("features", 3, unit="image") as line:
        line.update(3)
    assert capsys.readouterr().err.splitlines()[-1].startswith("features: image 3/3, ")
    monkeypatch.setenv(progress.MODE, "off")
    monkeypatch.delenv("TQDM_DISABLE")
    with progress.session("features", 3, unit="image") as line:
        line.update(3)
    assert capsys.readouterr().err == ""


def test_time_left_leaves_out_the_first_units_setup(capsys, monkeypatch):
    """The first epoch pays for setup (data to the device, compilation): the time left is the pace of
    the epochs after it, here 10 s each after a first epoch of 100 s."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    line = progress.Line("grid", epochs=10)
    for step in (100.0, 10.0, 10.0):
        clock[0] += step
        line.update(1, final=False)
    assert line.text() == "grid: epoch 3/10, 2m00s, ~1m10s left"  # 7 epochs of 10 s, not of 40 s
    first = progress.Line("grid", epochs=4)
    clock[0] += 30.0
    first.update(1)
    assert first.text().endswith("~1m30s left")  # one epoch done: its time is all there is to go by


def test_a_note_reaches_whoever_watches(capsys, monkeypatch):
    """Outside a kernel a note is a line on stderr (none when it repeats a warning Python printed
    there); in the book runner's kernels it goes to the terminal with the page's prefix, not the
    page; in an interactive kernel into the page too; nothing when progress is off."""
    monkeypatch.delenv(progress.MODE, raising=False)
    progress.note("run moe/abc: resumed")
    progress.note("warning: damaged", warned=True)
    assert capsys.readouterr().err == "run moe/abc: resumed\n"

    _fake_kernel(monkeypatch, [])
    for mode, page in (("terminal", []), ("", ["news\n"])):
        monkeypatch.setenv(progress.MODE, mode)
        monkeypatch.setenv(progress.PREFIX, "[2/15 cifar10h] ")
        r, w = os.pipe()
        stream = _KernelStderr(w)
        monkeypatch.setattr(sys, "stderr", stream)
        monkeypatch.setattr("builtins.print", lambda text, file, flush: file.write(text + "\n"))
        progress.note("news")
        progress.note("warning: damaged", warned=True)
        os.close(w)
        assert _read_all(r).splitlines() == ["[2/15 cifar10h] news", "[2/15 cifar10h] warning: damaged"]
        os.close(r)
        assert stream.text == page
    monkeypatch.setenv(progress.MODE, "off")
    progress.note("news")
    assert stream.text == page
