"""lib.engine.stack: N runs trained as one stacked model equal the same runs trained one by one."""

from __future__ import annotations

import numpy as np
import pytest

from lib.data.synthetic import synthetic_images
from lib.engine.runs import Run
from lib.moe.grid import run_grid, stack_groups
from lib.moe.config import TrainConfig, tiny_config
from lib.moe.train import GROUP, load_predictions, run_config, train_run


@pytest.fixture(scope="module")
def data():
    return synthetic_images(n_train=64, n_val=32, n_test=48, size=8, num_classes=3, seed=2, hard_frac=0.3)


def tiny(method: str, seed: int = 0, **kw) -> TrainConfig:
    return tiny_config(method, seed, **kw)


CONFIGS = [tiny("vanilla", 0), tiny("robust", 1), tiny("fgr", 0), tiny("robust_filtered", 2), tiny("fgr_robust", 3)]


def _probs(records):
    return [load_predictions(r)["probs"].astype(np.float64) for r in records]


def test_stacked_runs_equal_separate_runs(data, tmp_path, monkeypatch):
    """Same predictions (float tolerance) whether five runs (ERM, robust, filtered, two FGR) train
    alone or as one stacked model; each stacked run is cached as its own run."""
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "alone"))
    alone = [train_run(c, data) for c in CONFIGS]
    alone_probs = _probs(alone)  # (the same keys in another cache hold the stacked runs' predictions)
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "stacked"))
    stacked = run_grid(CONFIGS, data, stack=8)
    # FGR runs stack only with FGR runs: a stack of the three others and one of the two FGR runs.
    assert [r["history"][0].get("stacked") for r in stacked] == [3, 3, 2, 3, 2]
    for a, b, c in zip(alone_probs, _probs(stacked), CONFIGS):
        np.testing.assert_allclose(a, b, atol=2e-3, err_msg=c.method)  # float16-stored probabilities
    for a, b in zip(alone, stacked):
        assert a["history"][-1]["loss"] == pytest.approx(b["history"][-1]["loss"], rel=1e-4)
        assert a["metrics"]["all"]["accuracy"] == b["metrics"]["all"]["accuracy"]
    assert [h["objective"] for h in stacked[2]["history"]] == ["erm", "fgr"]


def test_one_run_of_a_stack_resumes_alone(data, tmp_path, monkeypatch):
    """Interrupt a stack after its first epoch; each member's checkpoint resumes in a plain run and
    ends where the uninterrupted run ends."""
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "full"))
    full = _probs([train_run(CONFIGS[2], data)])[0]
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cut"))
    from lib.moe.grid import train_stacked
    import lib.moe.train as mt

    class Stop(Exception):
        pass

    real = mt.PreparedRun.mark

    def mark(self, epoch, entry, m):
        real(self, epoch, entry, m)
        if epoch == 1:
            raise Stop

    monkeypatch.setattr(mt.PreparedRun, "mark", mark)
    with pytest.raises(Stop):
        train_stacked([CONFIGS[2], CONFIGS[4]], data, stack=2)  # the two FGR runs, stacked
    monkeypatch.setattr(mt.PreparedRun, "mark", real)
    run = Run(GROUP, run_config(CONFIGS[2], data))
    assert run.load_checkpoint()["epoch"] == 1
    resumed = train_run(CONFIGS[2], data)
    assert resumed["resumed_from"] == 1
    np.testing.assert_allclose(_probs([resumed])[0], full, atol=2e-3)


def test_stack_groups_split_by_architecture_and_size():
    cfgs = [
        tiny("single", 0),
        tiny("vanilla", 0),
        tiny("fgr", 0),
        tiny("vanilla", 1),
        tiny("single", 1),
        tiny("vanilla", 2, epochs=3),
    ]
    groups = stack_groups(cfgs, stack=2)
    assert [[c.method for c in g] for g in groups] == [
        ["single", "single"],
        ["vanilla", "vanilla"],
        ["fgr"],
        ["vanilla"],
    ]
    fgr = [tiny("fgr", 0), tiny("fgr_robust", 1), tiny("fgr", 2, warmup_epochs=0), tiny("fgr_robust", 3)]
    assert [[c.seed for c in g] for g in stack_groups(fgr, stack=4)] == [[0, 1, 3], [2]]  # FGR with FGR, same warmup
    with pytest.raises(ValueError, match="stack"):
        stack_groups(cfgs, 0)


def test_the_engine_knows_no_paper():
    """lib.engine imports only the shared layers (config, validation, augmentation, the engine itself)
    and names no paper's method: a method's own step comes in through StackStep (issue 24)."""
    import ast
    from pathlib import Path

    import lib.engine

    shared = ("lib.engine", "lib.config", "lib.validation", "lib.data.augment")
    for path in sorted(Path(lib.engine.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
        names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        outside = [m for m in names if m.startswith("lib") and not m.startswith(shared) and m != "lib"]
        assert not outside, f"{path.name} imports {outside}"
        idents = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        idents |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        idents |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
        assert not [i for i in idents if "fgr" in i.lower()], f"{path.name} names a paper's method in its code"
