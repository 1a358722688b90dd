"""calibook.notebook_errors: errors lib raises on purpose become one line; everything else keeps its traceback."""

import sys

import pytest

from calibook import notebook_errors
from lib.validation import check_choice


def _caught(fn):
    try:
        fn()
    except BaseException:  # noqa: BLE001 - the test inspects whatever was raised
        return sys.exc_info()
    raise AssertionError("nothing raised")


def test_a_lib_validation_error_is_one_line(monkeypatch) -> None:
    monkeypatch.delenv("CALIBOOK_DEBUG", raising=False)
    out = notebook_errors.one_line(*_caught(lambda: check_choice("mars", ("photo", "sketch"), "target")))
    assert out is not None and len(out) == 1
    assert out[0].startswith("ValueError: target:") and "photo" in out[0]


def test_other_errors_keep_their_traceback(monkeypatch) -> None:
    monkeypatch.delenv("CALIBOOK_DEBUG", raising=False)

    def raise_here():
        raise ValueError("a bug in the page itself")

    assert notebook_errors.one_line(*_caught(raise_here)) is None  # not raised by lib
    assert notebook_errors.one_line(*_caught(lambda: [][1])) is None  # IndexError is a LookupError, but not lib's
    monkeypatch.setenv("CALIBOOK_DEBUG", "1")
    assert notebook_errors.one_line(*_caught(lambda: check_choice("mars", ("photo",), "target"))) is None


def test_install_outside_ipython_does_nothing() -> None:
    if "IPython" in sys.modules and sys.modules["IPython"].get_ipython() is not None:
        pytest.skip("running inside IPython")
    assert notebook_errors.install() is False
