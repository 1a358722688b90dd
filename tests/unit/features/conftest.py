"""Shared fixtures of the feature tests."""

import pytest


@pytest.fixture
def progress_totals(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The total of every progress line opened while the test runs (lib.engine.progress.session's
    count), in order; the lines themselves still run."""
    from lib.engine import progress

    totals: list[int] = []
    real = progress.session

    def spy(desc: str, epochs: int, *args: object, **kw: object):  # type: ignore[no-untyped-def]
        totals.append(epochs)
        return real(desc, epochs, *args, **kw)

    monkeypatch.setattr(progress, "session", spy)
    return totals
