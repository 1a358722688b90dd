"""Shared fixtures: offline hub settings, and the smoke-scale notebook runs and book build (each made
once per session, two at a time: :class:`SmokeRuns`)."""

from __future__ import annotations

import calibook  # noqa: F401 - installs the run store (calibook.runs) that lib's experiments ask for runs

import ast
import contextlib
import functools
import inspect
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One thread per process: the session runs two at a time (SmokeRuns) on CI's two cores, and two-thread
# processes beside a busy core wait at every parallel region (tiny tests ran 10-20 times slower).
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"

BOOK = "<the strict smoke book build>"


@functools.cache
def _book_copies(name: str) -> dict[str, dict[str, Any]]:
    """The executed copies the book build stages of notebook ``name`` (:func:`calibook.pages.copies`)."""
    from calibook.pages import copies

    return dict(copies(name))


def _tag(name: str, params: dict[str, Any]) -> str:
    """One key per distinct run: ``pacs`` for the default page (``-p target photo`` included, photo
    being its default), the book's name for its other copies (``pacs-sketch``), ``pacs-target=art``
    for another, :data:`BOOK` for the book build."""
    if name == BOOK:
        return BOOK
    params = {k: v for k, v in params.items() if not _is_default(name, k, v)}
    copy = [c for c, p in _book_copies(name).items() if p == params]
    return copy[0] if copy else name + "".join(f"-{k}={v}" for k, v in sorted(params.items()))


def _is_default(name: str, key: str, value: Any) -> bool:
    """Whether ``value`` is the default of parameter ``key`` in the notebook's parameters cell."""
    from calibook.notebooks import parameter_default

    try:
        return parameter_default(name, key) == value
    except (ValueError, SyntaxError):  # no such parameter, or a default that is not a literal
        return False


def _is_page(tag: str, job: _Job) -> bool:
    """Whether this run is a page the book build stages (a notebook at its defaults, or a copy)."""
    return tag != BOOK and tag in _book_copies(job.name)


@dataclass
class _Job:
    """One smoke run (a notebook at smoke scale, or the book build) and how far it is."""

    name: str
    params: dict[str, Any]
    state: str = "pending"  # pending; running (in the background) -> done | failed; taken (by a test)
    result: Path | None = None  # the executed notebook, or the book's HTML folder
    log: str = ""  # the background run's output


class SmokeRuns:
    """The session's smoke-scale notebook runs and strict book build, each made once, two at a time.

    The tests ask for runs one by one (:meth:`get`). A background worker makes, each in its own
    process, the runs the collected tests will ask for (:func:`planned_runs`): the default pages
    from the last, then the book, then the other runs from the last, so the two cores of a CI
    machine both work. A test that asks for a run the worker has not started makes it itself; one
    that asks for a run in progress waits for it; a run the worker failed is made again by the test,
    which so sees the notebook's own error.
    """

    def __init__(self, plan: list[tuple[str, dict[str, Any]]]) -> None:
        self.env = dict(os.environ)  # the session's environment, not a test's monkeypatched one
        self.jobs = {_tag(name, params): _Job(name, params) for name, params in plan}
        self.cond = threading.Condition()
        self.child: subprocess.Popen[str] | None = None
        self.stopped = False
        if self.jobs:
            threading.Thread(target=self._work, name="smoke-runs", daemon=True).start()

    def get(self, name: str, params: dict[str, Any]) -> Path:
        """The executed notebook (or, for :data:`BOOK`, the built book's HTML folder) of this run."""
        tag = _tag(name, params)
        with self.cond:
            job = self.jobs.setdefault(tag, _Job(name, params))
            while job.state == "running":
                self.cond.wait()
            if job.result is not None:
                return job.result
            if job.state == "failed":
                warnings.warn(
                    f"smoke run {tag} failed in the background; the test runs it:\n{job.log[-3000:]}", stacklevel=2
                )
            job.state = "taken"
        result = self._make(job.name, job.params, tag)
        with self.cond:
            job.result = result
            self.cond.notify_all()
        return result

    def stop(self) -> None:
        """End the background worker at the end of the session; a run in progress is killed."""
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
            if self.child is not None:
                with contextlib.suppress(ProcessLookupError):  # it may have ended a moment ago
                    os.killpg(self.child.pid, signal.SIGKILL)  # the run and its notebook kernel

    @staticmethod
    def _make(name: str, params: dict[str, Any], tag: str) -> Path:
        from calibook import book

        if name == BOOK:
            return book.build_book("smoke", strict=True)
        output = book.executed_path(name, "smoke").with_name(f"{tag}.ipynb") if tag != name else None
        return book.execute_notebook(name, "smoke", params, output=output, progress=False)

    def _next(self) -> tuple[str, _Job] | None:
        """The worker's next run, or None when none is left. It waits while only the book is left
        and a test is still making a page the book needs."""
        with self.cond:
            while not self.stopped:
                pending = [(tag, job) for tag, job in self.jobs.items() if job.state == "pending"]
                if not pending:
                    return None
                pages_made = all(job.result is not None for tag, job in self.jobs.items() if _is_page(tag, job))
                order = [(tag, job) for tag, job in pending if _is_page(tag, job)][::-1]
                order += [(tag, job) for tag, job in pending if tag == BOOK and pages_made]
                order += [(tag, job) for tag, job in pending if tag != BOOK and not _is_page(tag, job)][::-1]
                if order:
                    order[0][1].state = "running"
                    return order[0]
                self.cond.wait()
        return None

    def _work(self) -> None:
        code = (
            "import json, sys\n"
            "from pathlib import Path\n"
            f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "from conftest import SmokeRuns\n"
            "print(SmokeRuns._make(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]))\n"
        )
        while (nxt := self._next()) is not None:
            tag, job = nxt
            with self.cond:
                if self.stopped:
                    return
                self.child = child = _POPEN(  # not subprocess.Popen: a test may monkeypatch that
                    [sys.executable, "-c", code, job.name, json.dumps(job.params), tag],
                    env=self.env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    start_new_session=True,
                )
            log, _ = child.communicate()
            with self.cond:
                self.child = None
                lines = log.strip().splitlines()
                job.state, job.log = ("done", log) if child.returncode == 0 and lines else ("failed", log)
                job.result = Path(lines[-1]) if job.state == "done" else None
                self.cond.notify_all()


def planned_runs(items: list[pytest.Item]) -> list[tuple[str, dict[str, Any]]]:
    """The smoke runs the collected tests will ask for, in the order they ask: each call
    ``smoke_notebook("name", key=value)`` or ``smoke_published(...)`` in a test's source whose
    arguments are literals or the test's parameters, the runs its ``smoke_runs`` marks list, and
    every default page then the book for tests of the strict build (``smoke_book``). Tests that
    monkeypatch their environment make their runs themselves (those runs see that environment)."""
    from calibook.notebooks import notebook_names

    plan: list[tuple[str, dict[str, Any]]] = []
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "smoke_book" in fixtures:
            plan += [(name, p) for name in notebook_names() for p in _book_copies(name).values()] + [(BOOK, {})]
        if "monkeypatch" in fixtures or not fixtures & {"smoke_notebook", "smoke_published"}:
            continue
        for mark in item.iter_markers("smoke_runs"):
            plan += list(mark.args)
        given = getattr(getattr(item, "callspec", None), "params", {})
        tree = ast.parse(textwrap.dedent(inspect.getsource(item.function)))
        failing = {  # runs the test expects to fail (``with pytest.raises(...)``) stay with the test
            id(node)
            for w in ast.walk(tree)
            if isinstance(w, ast.With) and any("raises" in ast.dump(i.context_expr) for i in w.items)
            for node in ast.walk(w)
        }
        for call in ast.walk(tree):
            if id(call) in failing:
                continue
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") in ("smoke_notebook", "smoke_published"):
                try:
                    name = _literal(call.args[0], given)
                    plan.append((name, {k.arg: _literal(k.value, given) for k in call.keywords}))
                except (ValueError, TypeError, IndexError):  # not a literal: the test makes it itself
                    continue
    return plan


def _literal(node: ast.AST, given: dict[str, Any]) -> Any:
    return given[node.id] if isinstance(node, ast.Name) and node.id in given else ast.literal_eval(node)


_RUNS: list[SmokeRuns] = []
_POPEN = subprocess.Popen  # the worker's, taken before any test can monkeypatch the module


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the background smoke runs the collected tests will ask for."""
    if not session.config.option.collectonly:
        _RUNS.append(SmokeRuns(planned_runs(session.items)))


def pytest_sessionfinish(session: pytest.Session) -> None:
    for runs in _RUNS:
        runs.stop()


def _runs() -> SmokeRuns:
    if not _RUNS:
        _RUNS.append(SmokeRuns([]))
    return _RUNS[0]


@pytest.fixture(scope="session")
def smoke_notebook() -> Callable[..., Path]:
    """Execute a notebook at ``smoke`` scale once per session and return the executed copy.

    With default parameters the copy goes to ``build/smoke/notebooks/<name>.ipynb`` (what the
    strict book build stages); with extra parameters it goes to a separate file.
    """
    return lambda name, **params: _runs().get(name, params)


@pytest.fixture(scope="session")
def smoke_book() -> Path:
    """The strict book build (warnings are errors) of every page's smoke run: its HTML folder."""
    from calibook.notebooks import notebook_names

    for name in notebook_names():
        for params in _book_copies(name).values():
            _runs().get(name, params)
    return _runs().get(BOOK, {})


@pytest.fixture(scope="session")
def smoke_published(smoke_notebook: Callable[..., Path]) -> Callable[..., dict[str, Any]]:
    """The numbers a notebook published (``calibook.page.publish``) in its smoke-scale run."""
    from calibook.page import read_published

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
