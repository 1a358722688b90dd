"""lib.moe.grid: a whole grid (methods x seeds x lambdas x warmups) in one stack of CIFAR ResNet-18s
under bf16 autocast equals its runs trained alone; a member resumes alone; stack sizes; a deadline."""

from __future__ import annotations

import numpy as np
import pytest

from lib.data.synthetic import synthetic_images
from lib.engine import deadline
from calibook.runs import Run
from lib.moe.grid import CPU_STACK, auto_stack, fit_count, run_grid, stack_groups, train_stacked
from lib.moe.config import TrainConfig, tiny_config
from lib.moe.train import GROUP, load_predictions, run_config, train_run


@pytest.fixture(scope="module")
def data():
    return synthetic_images(n_train=32, n_val=16, n_test=24, size=8, num_classes=3, seed=4, hard_frac=0.3)


@pytest.fixture()
def bf16(monkeypatch):
    monkeypatch.setenv("CALIBOOK_CPU_BF16", "1")  # lib.engine.device.autocast: bf16 on the CPU too


def resnet(method: str, seed: int, **kw) -> TrainConfig:
    return tiny_config(method, seed, **{"backbone": "cifar_resnet18", **kw})


# 8 members of one stack: three methods x seeds, another lambda, another warmup (all the plain step)
GRID = [
    resnet("vanilla", 0),
    resnet("vanilla", 1),
    resnet("robust", 0),
    resnet("robust", 1),
    resnet("robust_filtered", 0),
    resnet("robust_filtered", 2),
    resnet("robust", 2, lam=0.5),
    resnet("robust", 3, warmup_epochs=0),
]


def _probs(records):
    return [load_predictions(r)["probs"].astype(np.float64) for r in records]


def test_a_grid_of_eight_mixed_members_in_one_bf16_stack_equals_each_run_alone(data, tmp_path, monkeypatch, bf16):
    assert [len(g) for g in stack_groups(GRID, 8)] == [8]
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "alone"))
    alone = [train_run(c, data) for c in GRID]
    alone_probs = _probs(alone)  # read before the cache moves
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "stacked"))
    stacked = run_grid(GRID, data, stack=None)  # CPU: the default stack size holds the whole grid
    assert [r["history"][0]["packed"] for r in stacked] == [8] * 8
    for a, b, c in zip(alone_probs, _probs(stacked), GRID):
        # bf16 convolutions batched under vmap round differently from one model's: a loose tolerance
        np.testing.assert_allclose(a, b, atol=0.03, err_msg=f"{c.method} s{c.seed}")
    for a, b in zip(alone, stacked):
        assert a["history"][-1]["loss"] == pytest.approx(b["history"][-1]["loss"], rel=0.02)
    assert [h["objective"] for h in stacked[2]["history"]] == ["erm", "robust"]
    assert [h["objective"] for h in stacked[7]["history"]] == ["robust", "robust"]


def test_a_member_resumes_alone_from_the_stacks_checkpoint(data, tmp_path, monkeypatch, bf16):
    """A deadline stops the stack after its first epoch; one member then finishes alone in the
    plain loop and ends where its uninterrupted run ends."""
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "full"))
    full = _probs([train_run(GRID[3], data)])[0]
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cut"))
    clock = FakeClock()
    import lib.moe.train as mt

    real = mt.PreparedRun.mark

    def mark(self, epoch, entry, m):  # every epoch of the stack "takes" 100 s on the fake clock
        real(self, epoch, entry, m)
        if self.cfg is GRID[0]:
            clock.t += 100.0

    monkeypatch.setattr(mt.PreparedRun, "mark", mark)
    with deadline.deadline(150.0, clock), pytest.raises(deadline.DeadlineReached):
        train_stacked(GRID[:4], data, stack=4)
    monkeypatch.setattr(mt.PreparedRun, "mark", real)
    for c in GRID[:4]:
        assert Run(GROUP, run_config(c, data)).load_checkpoint()["epoch"] == 1
    resumed = train_run(GRID[3], data)
    assert resumed["resumed_from"] == 1 and resumed["history"][0]["packed"] == 4
    np.testing.assert_allclose(_probs([resumed])[0], full, atol=0.03)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_stack_size_from_device_memory():
    gib = 2.0**30
    assert fit_count(80 * gib, 2 * gib) == 32  # 80% of 80 GiB in 2 GiB members
    assert fit_count(80 * gib, 0.1 * gib) == 64  # capped
    assert fit_count(1 * gib, 4 * gib) == 1  # at least one
    with pytest.raises(ValueError, match="member_bytes"):
        fit_count(1.0, 0.0)
    assert auto_stack(resnet("vanilla", 0, device="cpu"), None) == CPU_STACK


def test_a_stack_cut_after_its_last_epoch_is_only_evaluated_on_the_next_call(data, tmp_path, monkeypatch):
    """The last epoch's checkpoints stand when the evaluation is cut; the next call trains nothing
    and publishes what the uninterrupted stack would have."""
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "full"))
    full = _probs(run_grid(GRID[:2], data, stack=2))
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "cut"))
    import lib.moe.grid as grid

    real = grid.finish_run

    def cut(*a, **k):
        raise KeyboardInterrupt  # the call's time limit, during the evaluation

    monkeypatch.setattr(grid, "finish_run", cut)
    with pytest.raises(KeyboardInterrupt):
        train_stacked(GRID[:2], data, stack=2)
    assert Run(GROUP, run_config(GRID[0], data)).load_checkpoint()["epoch"] == 2
    monkeypatch.setattr(grid, "finish_run", real)
    clock = FakeClock()
    with deadline.deadline(0.0, clock):  # no time left to train: but nothing is left to train
        done = train_stacked(GRID[:2], data, stack=2)
    assert done == GRID[:2]
    for a, b in zip(full, _probs([train_run(c, data) for c in GRID[:2]])):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_runs_trained_one_by_one_share_one_progress_line(data, tmp_path, monkeypatch):
    """stack=1 (the PACS cpu page): one line counts every run's epochs and the runs done, instead of
    a line per run; a grid that is all cached opens a line that stays silent."""
    from lib.engine import progress

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    lines: list[progress.Line] = []
    real = progress.Line.__init__

    def spy(self, *a, **k):  # type: ignore[no-untyped-def]
        real(self, *a, **k)
        lines.append(self)

    monkeypatch.setattr(progress.Line, "__init__", spy)
    grid_ = [resnet("vanilla", 0, progress=True), resnet("mocae", 0, progress=True), resnet("robust", 1, progress=True)]
    run_grid(grid_, data, stack=1)
    assert len(lines) == 1  # MoCaE trains nothing: its Vanilla run is counted once
    line = lines[0]
    assert (line.epochs, line.runs, line.done_epochs, line.done_runs) == (4, 2, 4, 2)
    run_grid(grid_, data, stack=1)
    assert len(lines) == 2 and (lines[1].epochs, lines[1].done_epochs, lines[1].done_runs) == (0, 0, 0)
