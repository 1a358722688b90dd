"""A hard deadline for training: stop at the epoch boundary that would cross it (and, should an
epoch run past the deadline anyway, between two steps, dropping that epoch).

A lent GPU machine cuts a command at 10 minutes. Inside ``with deadline(at):`` every training loop
of the engine (:func:`lib.engine.loop.fit`, :func:`lib.engine.loop.fit_packed`) runs each epoch in
:func:`epoch`, which raises :class:`DeadlineReached` when the epoch it expects (measured on the epochs
done) would end after ``at``. The loops checkpoint after every epoch, so the run resumes from there.
The clock is injectable (tests use a fake one).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

__all__ = ["DeadlineReached", "check", "check_step", "deadline", "epoch", "epoch_estimate", "note", "now", "remaining"]


class DeadlineReached(Exception):
    """Training stopped before an epoch that would end after the deadline (its checkpoint is saved)."""


@dataclass
class _Window:
    at: float
    clock: Callable[[], float]
    last: float = 0.0  # the latest epoch's length seen in this window (a prior for a fresh run)


_WINDOWS: list[_Window] = []


@contextlib.contextmanager
def deadline(at: float | None, clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """Within the block, training loops stop before an epoch that would end after ``at`` (in the
    units of ``clock``; ``None``: no deadline). Nested deadlines: the innermost applies."""
    if at is not None and (not isinstance(at, (int, float)) or math.isnan(at)):
        raise ValueError(f"at: must be a number of seconds on the clock, got {at!r}")
    if not callable(clock):
        raise ValueError("clock: must be callable, returning seconds")
    if at is None:
        yield
        return
    _WINDOWS.append(_Window(float(at), clock))
    try:
        yield
    finally:
        _WINDOWS.pop()


def now() -> float:
    """The current deadline's clock (``time.monotonic`` when none is set)."""
    return _WINDOWS[-1].clock() if _WINDOWS else time.monotonic()


def remaining() -> float:
    """Seconds left before the current deadline (infinity when none is set)."""
    return _WINDOWS[-1].at - _WINDOWS[-1].clock() if _WINDOWS else math.inf


def epoch_estimate(seconds: Sequence[float]) -> float:
    """The expected length of the next epoch from the lengths of the epochs done: the largest of
    the last three (a pessimistic estimate). Before a run's first epoch: the length of the latest
    epoch trained in this window (:func:`note`), else 0."""
    if seconds:
        return max(seconds[-3:])
    return _WINDOWS[-1].last if _WINDOWS else 0.0


def note(seconds: float) -> None:
    """Record the length of an epoch just trained (the prior of the next run's first epoch)."""
    if _WINDOWS:
        _WINDOWS[-1].last = float(seconds)


@contextlib.contextmanager
def epoch(spans: list[float], what: str) -> Iterator[None]:
    """One epoch of a training loop: :func:`check` with the estimate from ``spans`` (the lengths of the
    epochs done) before it; after it (not after an error), its length on the deadline's clock appended
    to ``spans`` and :func:`note`\ d."""
    check(epoch_estimate(spans), what)
    c0 = now()
    yield
    spans.append(now() - c0)
    note(spans[-1])


def check(expected_seconds: float, what: str = "training") -> None:
    """Raise :class:`DeadlineReached` when an epoch of ``expected_seconds`` started now would end
    after the current deadline (always, once the deadline has passed); do nothing without one."""
    if not _WINDOWS:
        return
    left = remaining()
    if left <= 0 or expected_seconds > left:
        raise DeadlineReached(
            f"{what}: stopped at an epoch boundary, {max(left, 0):.0f} s before the deadline "
            f"(the next epoch takes ~{expected_seconds:.0f} s); its checkpoint of the last epoch stands"
        )


def check_step(what: str = "training") -> None:
    """Between two steps: raise :class:`DeadlineReached` once the current deadline has passed (an
    epoch that ran longer than expected, e.g. the first epoch of a fresh stack). The unfinished epoch
    is dropped and the run resumes from its last checkpoint, so the call returns in time and its
    finished work is still published and exported. A host clock read, no device sync."""
    if _WINDOWS and remaining() <= 0:
        raise DeadlineReached(
            f"{what}: the deadline passed during an epoch; the epoch is dropped and the run's last checkpoint stands"
        )
