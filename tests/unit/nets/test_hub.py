"""lib.nets.hub: offline is offline, and an unreachable host is reported, not waited on."""

from __future__ import annotations

import socket

import pytest

from lib.nets import hub


@pytest.mark.parametrize("flag", ["1", "true", "YES", " on "])
def test_the_offline_flag_wins(monkeypatch: pytest.MonkeyPatch, flag: str) -> None:
    def connect(*args: object, **kwargs: object) -> None:
        raise AssertionError("tried the network although HF_HUB_OFFLINE is set")

    monkeypatch.setenv("HF_HUB_OFFLINE", flag)
    monkeypatch.setattr(socket, "create_connection", connect)
    assert hub.hub_reachable() is False


def test_a_failed_connection_is_unreachable_and_a_working_one_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    asked: list[tuple[object, float]] = []

    def refuse(address: object, timeout: float) -> None:
        asked.append((address, timeout))
        raise OSError("unreachable")

    monkeypatch.setattr(socket, "create_connection", refuse)
    assert hub.hub_reachable(timeout=0.5) is False
    assert asked == [(("huggingface.co", 443), 0.5)]

    class Conn:
        def __enter__(self) -> "Conn":
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(socket, "create_connection", lambda address, timeout: Conn())
    assert hub.hub_reachable() is True
