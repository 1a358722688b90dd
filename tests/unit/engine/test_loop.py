"""lib.engine.loop and lib.engine.deadline: a hard deadline stops fit at the epoch boundary that
would cross it (fake clock), the checkpoint stands, and the resumed run ends like an uninterrupted one."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lib.engine import deadline
from lib.engine.loop import Diverged, finite_outputs, fit
from calibook.runs import Run


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _train(run: Run | None, epochs: int = 5, callbacks=(), progress: bool = False) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(40, 4, generator=g), torch.randint(0, 3, (40,), generator=g)
    fit(
        model,
        lambda out, yb, e: nn.functional.cross_entropy(out, yb),
        (x, y),
        epochs,
        optimizer_factory=lambda p: torch.optim.AdamW(p, lr=0.05),
        run=run,
        batch_size=8,
        device="cpu",
        amp=False,
        progress=progress,
        callbacks=callbacks,
    )
    return model


def test_fit_stops_before_the_epoch_that_would_cross_the_deadline_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    full = _train(None)
    clock, run = FakeClock(), Run("test", {"what": "deadline"})

    def tick(epoch, entry, model):  # every epoch "takes" 10 s
        clock.t += 10.0

    with deadline.deadline(35.0, clock), pytest.raises(deadline.DeadlineReached, match="epoch boundary"):
        _train(run, callbacks=[tick])
    assert clock.t == 30.0 and run.load_checkpoint()["epoch"] == 3  # a 4th epoch would end at 40 s
    monkeypatch.delenv("CALIBOOK_PROGRESS", raising=False)
    capsys.readouterr()
    resumed = _train(run, progress=True)
    assert "train: resumed from its checkpoint after epoch 3 of 5" in capsys.readouterr().err.splitlines()
    for a, b in zip(full.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b)


def test_an_epoch_that_runs_past_the_deadline_is_dropped_between_steps(tmp_path, monkeypatch):
    """The first epoch of a fresh run has no estimate and may run past the deadline: fit stops at the
    next step, keeps the last epoch's checkpoint (not the half-trained model), and the resumed run
    still ends like an uninterrupted one."""
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    full = _train(None)
    clock, run = FakeClock(), Run("test", {"what": "deadline mid-epoch"})
    steps = []

    def slow_epoch(epoch, entry, model):  # epochs 1-2 take 10 s; then the clock jumps mid-epoch 3
        clock.t += 10.0

    with deadline.deadline(35.0, clock):  # epoch 3 starts (20 s + ~10 s < 35 s) but runs long
        real = deadline.check_step

        def check_step(what="training"):
            steps.append(clock.t)
            if len(steps) == 13:  # the 3rd step of the 3rd epoch (5 steps an epoch)
                clock.t = 36.0
            real(what)

        monkeypatch.setattr(deadline, "check_step", check_step)
        with pytest.raises(deadline.DeadlineReached, match="during an epoch"):
            _train(run, callbacks=[slow_epoch])
    assert run.load_checkpoint()["epoch"] == 2  # the unfinished third epoch left no trace
    monkeypatch.setattr(deadline, "check_step", real)
    resumed = _train(run)
    for a, b in zip(full.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b)


def test_deadline_rules():
    deadline.check(1e9)  # no deadline: nothing happens
    assert deadline.remaining() == math.inf and deadline.epoch_estimate([]) == 0.0
    clock = FakeClock()
    with deadline.deadline(100.0, clock):
        assert deadline.epoch_estimate([5.0, 9.0, 7.0, 6.0]) == 9.0  # the largest of the last three
        assert deadline.epoch_estimate([]) == 0.0
        deadline.note(12.0)
        assert deadline.epoch_estimate([]) == 12.0  # a fresh run's prior: the window's latest epoch
        deadline.check(100.0)  # ends exactly at the deadline: allowed
        with pytest.raises(deadline.DeadlineReached):
            deadline.check(100.5)
        clock.t = 100.0
        with pytest.raises(deadline.DeadlineReached):
            deadline.check(0.0)  # the deadline has passed
    with pytest.raises(ValueError, match="at"):
        with deadline.deadline(float("nan")):
            pass


def test_select_best_and_early_stopping_as_callbacks(tmp_path, monkeypatch):
    """Validation scores 3, 1, 2, 4, 5, ...: early stopping with patience 2 ends after epoch 4 and the
    model ends with its epoch-2 weights (the lowest score); a run resumed from the checkpoint of the
    stopped run trains nothing more."""
    from lib.engine.loop import EarlyStopping, SelectBest

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    scores = iter([3.0, 1.0, 2.0, 4.0, 5.0, 6.0])
    snapshots = {}

    def snap(epoch, entry, model):
        snapshots[epoch] = {k: v.clone() for k, v in model.state_dict().items()}

    def build():
        torch.manual_seed(0)
        return nn.Linear(4, 3)

    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(40, 4, generator=g), torch.randint(0, 3, (40,), generator=g)
    run = Run("test", {"what": "early stopping"})
    kw = dict(
        optimizer_factory=lambda p: torch.optim.AdamW(p, lr=0.05),
        run=run,
        batch_size=8,
        device="cpu",
        amp=False,
        progress=False,
    )
    loss = lambda out, yb, e: nn.functional.cross_entropy(out, yb)  # noqa: E731
    model = build()
    best = SelectBest(lambda m: next(scores))
    result = fit(model, loss, (x, y), 10, callbacks=[best, EarlyStopping(patience=2), snap], **kw)
    assert result.stopped_at == 4 and [h["val_loss"] for h in result.history] == [3.0, 1.0, 2.0, 4.0]
    assert best.epoch == 2
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, snapshots[2][k])
    again = fit(build(), loss, (x, y), 10, callbacks=[SelectBest(lambda m: 0.0), EarlyStopping(patience=2)], **kw)
    assert again.resumed_from == 4 and again.stopped_at == 4 and len(again.history) == 4


def test_finite_outputs_passes_finite_losses_through_and_names_the_diverging_epoch():
    """A model whose weights blow up (SGD with a huge learning rate on a quadratic) turns its outputs
    infinite after the first step; the guarded loss then raises Diverged for epoch 1 (1-based),
    instead of the loss's own error. Finite outputs give the plain loss's value."""

    def square(out, yb, e):
        return (out**2).mean()

    out, yb = torch.tensor([[1.0, -2.0]]), torch.zeros(1)
    assert float(finite_outputs(square)(out, yb, 0)) == pytest.approx(2.5)
    with pytest.raises(Diverged, match="epoch 3") as err:
        finite_outputs(square)(torch.tensor([[1.0, math.nan]]), yb, 2)
    assert err.value.epoch == 3
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    x = torch.randn(32, 4)
    with pytest.raises(Diverged) as err:
        fit(model, finite_outputs(square), (x, torch.zeros(32)), 3,
            optimizer_factory=lambda p: torch.optim.SGD(p, lr=1e30), batch_size=8, device="cpu", amp=False,
            progress=False)  # fmt: skip
    assert err.value.epoch == 1


def test_fit_names_a_bad_model_or_data() -> None:
    """fit's public inputs: a model that is not an nn.Module, data that is not a pair (x, y)."""
    loss = lambda out, yb, e: out.sum()  # noqa: E731
    opt = lambda p: torch.optim.SGD(p, lr=0.1)  # noqa: E731
    with pytest.raises(ValueError, match="^model: expected an nn.Module, got str"):
        fit("linear", loss, (torch.zeros(2, 4), torch.zeros(2)), 1, optimizer_factory=opt, progress=False)
    with pytest.raises(ValueError, match="^data"):
        fit(nn.Linear(4, 3), loss, torch.zeros(2, 4), 1, optimizer_factory=opt, progress=False)


def _linear_data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(40, 4, generator=g), torch.randint(0, 3, (40,), generator=g)


def _linear(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 3))  # a pack replaces layers inside a module


def test_a_run_stopped_early_in_a_pack_keeps_the_weights_it_had_then(tmp_path, monkeypatch):
    """Two runs of one pack (fit_packed, G = 2): a callback stops the first after epoch 2 while the
    second trains 4 epochs, and the pack is interrupted after epoch 3 and resumed. Each ends with the
    weights of its run alone (fit, G = 1, the model itself) trained that long; stopped_at says when;
    the stopped run's checkpoint keeps its epoch-2 weights while following the pack's epochs (so the
    pack resumes whole)."""
    from lib.engine.loop import Member, fit_packed

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    x, y = _linear_data()
    loss = lambda out, yb, e: nn.functional.cross_entropy(out, yb)  # noqa: E731
    kw = dict(optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1), batch_size=8, device="cpu", amp=False)
    stop_after_2 = EarlyAfter(2)

    class Interrupt(Exception):
        pass

    def interrupt_at_3(epoch, entry, model):
        if epoch == 3:
            raise Interrupt

    def members(second_callbacks):
        return [
            Member(_linear(0), loss, seed=0, callbacks=(stop_after_2,), run=Run("test", {"pack": 0})),
            Member(_linear(1), loss, seed=1, callbacks=second_callbacks, run=Run("test", {"pack": 1})),
        ]

    with pytest.raises(Interrupt):
        fit_packed(members((interrupt_at_3,)), (x, y), 4, progress=False, **kw)
    first = Run("test", {"pack": 0}).load_checkpoint()
    assert (first["epoch"], first["stopped_at"], len(first["history"])) == (3, 2, 2)
    resumed = members(())
    fits = fit_packed(resumed, (x, y), 4, progress=False, **kw)
    assert [f.stopped_at for f in fits] == [2, None] and [len(f.history) for f in fits] == [2, 4]
    assert [f.resumed_from for f in fits] == [3, 3] and [h["packed"] for h in fits[1].history] == [2] * 4
    for member, seed, epochs in ((resumed[0], 0, 2), (resumed[1], 1, 4)):
        alone = _linear(seed)
        result = fit(alone, loss, (x, y), epochs, seed=seed, progress=False, **kw)
        assert "packed" not in result.history[0]
        for k, v in alone.state_dict().items():
            torch.testing.assert_close(member.model.state_dict()[k], v, rtol=1e-5, atol=1e-6)


class EarlyAfter:
    """A stateful callback (saved in the checkpoint) that stops its run after ``epochs`` epochs."""

    def __init__(self, epochs: int) -> None:
        self.epochs = epochs

    def __call__(self, epoch, entry, model) -> bool:
        return epoch >= self.epochs

    def state_dict(self) -> dict:
        return {"epochs": self.epochs}

    def load_state_dict(self, d) -> None:
        self.epochs = d["epochs"]


def test_a_run_alone_whose_loss_turns_nan_ends_and_says_so(tmp_path, monkeypatch):
    """A run alone whose epoch-2 loss is NaN: the warning names the epoch, fit raises Diverged(2) as
    finite_outputs would (fit_packed returns diverged_at = 2 and the finite epoch's history) and its
    checkpoint stays at epoch 1."""
    from lib.engine.loop import Member, fit_packed

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    x, y = _linear_data()

    def loss(out, yb, epoch):
        return nn.functional.cross_entropy(out, yb) * (math.nan if epoch >= 1 else 1.0)

    run = Run("test", {"diverges": True})
    opt = lambda p: torch.optim.SGD(p, lr=0.1)  # noqa: E731
    with pytest.warns(UserWarning, match=r"^train: diverged in epoch 2$"), pytest.raises(Diverged) as err:
        fit(_linear(0), loss, (x, y), 4, optimizer_factory=opt, run=run, batch_size=8, device="cpu", amp=False,
            progress=False)  # fmt: skip
    assert err.value.epoch == 2 and run.load_checkpoint()["epoch"] == 1
    run.clear_checkpoint()
    with pytest.warns(UserWarning, match="diverged in epoch 2"):
        (result,) = fit_packed([Member(_linear(0), loss)], (x, y), 4, opt, batch_size=8, amp=False, progress=False)
    assert result.diverged_at == 2 and len(result.history) == 1


def test_fit_packed_names_bad_members() -> None:
    """fit_packed's public inputs: no members, a member that is not a Member, a step_fn inside a pack."""
    from lib.engine.loop import Member, fit_packed

    loss = lambda out, yb, e: out.sum()  # noqa: E731
    opt = lambda p: torch.optim.SGD(p, lr=0.1)  # noqa: E731
    data = (torch.zeros(8, 4), torch.zeros(8, dtype=torch.long))
    for members in ([], [nn.Linear(4, 3)]):
        with pytest.raises(ValueError, match="^members: need at least one Member"):
            fit_packed(members, data, 1, opt, progress=False)
    pack = [Member(nn.Linear(4, 3), loss, step_fn=lambda *a: None), Member(nn.Linear(4, 3), loss)]
    with pytest.raises(ValueError, match="^members: a step_fn is a run alone's"):
        fit_packed(pack, data, 1, opt, progress=False)
    from lib.engine.loop import SelectBest

    best = SelectBest(lambda m: 0.0)
    pack = [Member(nn.Linear(4, 3), loss, callbacks=(best,)), Member(nn.Linear(4, 3), loss)]
    with pytest.raises(ValueError, match="^members: SelectBest scores a model"):
        fit_packed(pack, data, 1, opt, progress=False)
