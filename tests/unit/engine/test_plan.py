"""lib.engine.plan: a published record is the planned run only with the same id and config."""

from __future__ import annotations

from dataclasses import dataclass

from lib.engine.plan import Item, coverage, coverage_text, matches, plain


@dataclass(frozen=True)
class Cfg:
    lam: float
    seeds: tuple[int, ...]

    def key(self) -> dict:
        return {"lam": self.lam, "seeds": self.seeds}


def test_plain_is_what_json_gives_back() -> None:
    assert plain({"b": (1, 2), "a": 0.5}) == {"a": 0.5, "b": [1, 2]}


def test_matches_by_id_and_config() -> None:
    it = Item("p", "p/a", 0, 1, "m", config=Cfg(2.0, (0, 1)))
    rec = {"queue": {"id": "p/a"}, "config": {"train": {"lam": 2.0, "seeds": [0, 1]}}}
    assert matches(it, rec)
    assert not matches(it, {**rec, "queue": {"id": "p/b"}})  # another run's id
    assert not matches(it, {**rec, "config": {"train": {"lam": 4.0, "seeds": [0, 1]}}})  # another config
    d = Item("p", "p/d", 0, 1, "m", config={"loss": "xe", "nu": 0.1})
    assert matches(d, {"queue": {"id": "p/d"}, "config": {"loss": "xe", "nu": 0.1, "data": "tag"}})  # extra keys ok
    assert not matches(d, {"queue": {"id": "p/d"}, "config": {"loss": "xe", "nu": 1.0}})
    assert matches(Item("p", "p/n", 0, 1, "m"), {"queue": {"id": "p/n"}})  # no config to compare


def test_coverage_counts_by_hand() -> None:
    items = [Item("p", f"p/{m}/{s}", s, 1, m) for m in ("a", "b") for s in range(3)]
    got = {"p/a/0": {}, "p/a/2": {}, "p/b/1": {}}
    assert coverage(items, got) == {"a": (2, 3), "b": (1, 3)}
    assert coverage_text(coverage(items, got), "seeds") == {"a": "2 of 3 seeds", "b": "1 of 3 seeds"}
    assert not Item("p", "x", 0, 1, "m").done
