"""Tests of lib.engine.deadline with a fake clock: an epoch that would end after the deadline is
refused, one that ends before is allowed, nested windows use the innermost, and the estimate of the
next epoch is the largest of the last three (or the window's latest epoch before a run's first)."""

from __future__ import annotations

import math

import pytest

from lib.engine import deadline as dl


class Clock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_no_deadline_allows_everything() -> None:
    assert dl.remaining() == math.inf
    dl.check(1e9)  # no window: nothing raised
    with dl.deadline(None):
        assert dl.remaining() == math.inf
        dl.check(1e9)


def test_an_epoch_must_end_before_the_deadline() -> None:
    clock = Clock(100.0)
    with dl.deadline(160.0, clock):
        assert dl.now() == 100.0 and dl.remaining() == 60.0
        dl.check(60.0)  # ends exactly at the deadline: allowed
        with pytest.raises(dl.DeadlineReached, match="checkpoint of the last epoch stands"):
            dl.check(60.5)
        clock.t = 170.0  # past the deadline: even a zero-length epoch is refused
        with pytest.raises(dl.DeadlineReached):
            dl.check(0.0)
    assert dl.remaining() == math.inf  # the window closed with the block


def test_nested_deadlines_use_the_innermost_and_restore_the_outer() -> None:
    clock = Clock(0.0)
    with dl.deadline(100.0, clock):
        with dl.deadline(10.0, clock):
            assert dl.remaining() == 10.0
            with pytest.raises(dl.DeadlineReached):
                dl.check(20.0)
        assert dl.remaining() == 100.0
        dl.check(20.0)


def test_epoch_estimate_is_the_largest_of_the_last_three() -> None:
    assert dl.epoch_estimate([5.0, 1.0, 2.0, 3.0]) == 3.0  # 5 is older than the last three
    assert dl.epoch_estimate([1.0, 4.0]) == 4.0
    assert dl.epoch_estimate([]) == 0.0  # no window, no prior
    with dl.deadline(50.0, Clock()):
        dl.note(7.5)  # a run in this window took 7.5 s per epoch: the prior of the next run
        assert dl.epoch_estimate([]) == 7.5
        assert dl.epoch_estimate([2.0]) == 2.0  # a run's own epochs win over the prior


def test_invalid_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="at"):
        with dl.deadline(float("nan")):
            pass
    with pytest.raises(ValueError, match="at"):
        with dl.deadline("soon"):
            pass
    with pytest.raises(ValueError, match="clock"):
        with dl.deadline(10.0, clock=3):
            pass
