"""lib.engine.progress: one line for a whole grid; in a kernel one output updated in place."""

from __future__ import annotations

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
            progress.epoch_done()
            progress.epoch_done()
        progress.run_done()
        line.update(4, runs=2)
    lines = capsys.readouterr().err.splitlines()
    # captured stderr (not a terminal): the first update, none more within the minute, the final line
    assert len(lines) == 2 and lines[0].startswith("grid: epoch 1/6, 0/3 runs, ")
    assert lines[1].startswith("grid: epoch 6/6, 3/3 runs, ")
    with progress.session("quiet", epochs=1, enabled=False):
        progress.epoch_done()
    assert capsys.readouterr().err == ""


def test_in_a_kernel_the_line_is_one_display_updated_in_place(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    shown: list[tuple[str, str]] = []

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
    with progress.session("page", epochs=3):
        for _ in range(3):
            progress.epoch_done()
    assert [k for k, _ in shown].count("display") == 1  # one output; the rest are in-place updates
    assert shown[-1][1].startswith("page: epoch 3/3, ")
    with pytest.raises(ZeroDivisionError):  # an error inside a session still ends it
        with progress.session("boom", epochs=1):
            raise ZeroDivisionError("boom")
    assert progress._ACTIVE == []
