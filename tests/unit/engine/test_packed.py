"""lib.engine.packed: G runs trained as one packed module equal the same runs trained one by one."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from lib.data.synthetic import synthetic_images
from lib.engine.loop import fit_packed
from lib.engine.packed import Packed, PackedLinear, pack_inputs
from calibook.runs import Run
from lib.moe.config import tiny_config
from lib.moe.grid import run_grid, stack_groups
from lib.moe.heads import MoEHead, MoEModel
from lib.moe.train import GROUP, fit_alone, load_predictions, prepare_run, run_config, train_run
from lib.nets import backbones


@pytest.fixture(scope="module")
def data():
    return synthetic_images(n_train=64, n_val=32, n_test=48, size=8, num_classes=3, seed=2, hard_frac=0.3)


CONFIGS = [
    tiny_config("vanilla", 0),
    tiny_config("robust", 1),
    tiny_config("fgr", 0),
    tiny_config("robust_filtered", 2),
    tiny_config("fgr_robust", 3),
    tiny_config("single", 4),
]


def _moe(seed: int, spec: str = "cifar_resnet18") -> nn.Module:
    torch.manual_seed(seed)
    body = backbones.build(spec, width=4)
    return MoEModel(body, MoEHead(body.out_features, 5, num_experts=3, router_hidden=8))


@pytest.mark.parametrize(
    ("spec", "size"), [("tiny_cnn", 16), ("cifar_resnet18", 16), ("imagenet_efficientnet_lite0", 64)]
)  # Lite0 at 64 px: at 16 px its last stages normalise 1 x 1 maps of 6 images, which amplifies rounding
def test_a_pack_forwards_each_run_as_alone(spec, size):
    """Run g of a pack computes what model g computes alone on its own batch (train mode: batch norm
    over its own batch), and its state comes back in the single-run format. PACS's EfficientNet-Lite0
    (timm: depthwise convolutions, squeeze-excitation, batch norm with its activation inside) too."""
    models = [_moe(s, spec).train() for s in range(3)]
    pack = Packed([copy.deepcopy(m) for m in models]).train()
    xs = [torch.randn(6, 3, size, size, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    out = pack(pack_inputs(xs))
    assert out.probs.shape == (3, 6, 5) and out.routing.shape == (3, 6, 3)
    for g, (m, x) in enumerate(zip(models, xs)):
        alone = m(x)
        torch.testing.assert_close(out.probs[g], alone.probs, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out.expert_logits[g], alone.expert_logits, rtol=1e-5, atol=1e-5)
        state = pack.run_state(g)
        assert state.keys() == m.state_dict().keys()
        for k, v in m.state_dict().items():  # running statistics updated by the same forward
            torch.testing.assert_close(state[k].float(), v.float(), rtol=1e-5, atol=1e-6, msg=k)


def test_depthwise_and_classifier_networks_pack():
    """A depthwise convolution stays depthwise (G x the groups) and a network ending in a linear
    classifier (no leading-layout head) returns (G, B, classes)."""
    nets = []
    for s in range(2):
        torch.manual_seed(s)
        nets.append(
            nn.Sequential(
                nn.Conv2d(3, 6, 3, padding=1),
                nn.BatchNorm2d(6),
                nn.Conv2d(6, 6, 3, padding=1, groups=6),
                nn.GroupNorm(2, 6),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(6, 4),
            ).train()
        )
    pack = Packed([copy.deepcopy(n) for n in nets])
    assert pack.net[2].groups == 12 and isinstance(pack.net[7], PackedLinear)
    xs = [torch.randn(5, 3, 8, 8) for _ in nets]
    out = pack(pack_inputs(xs))
    assert out.shape == (2, 5, 4)
    for g, (n, x) in enumerate(zip(nets, xs)):
        torch.testing.assert_close(out[g], n(x), rtol=1e-5, atol=1e-6)


def test_a_pack_traces_whole_under_torch_compile():
    """The pack's forward and backward trace without a graph break (its layout hooks are stateless),
    and the traced module computes what the eager one does (AOT-eager backend: no C compiler needed)."""
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    pack = Packed([_moe(s) for s in range(3)]).train()
    twin = copy.deepcopy(pack)  # a copy computes alone: its hooks hold no state of the original
    xs = pack_inputs([torch.randn(5, 3, 8, 8) for _ in range(3)])
    out = torch.compile(pack, backend="aot_eager")(xs)
    out.probs.sum().backward()
    torch.testing.assert_close(out.probs, twin(xs).probs, rtol=1e-5, atol=1e-6)
    assert not torch._dynamo.utils.counters["graph_break"]


def test_a_pack_refuses_what_it_cannot_hold():
    with pytest.raises(ValueError, match="models: cannot pack LayerNorm"):
        Packed([nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4)) for _ in range(2)])
    with pytest.raises(ValueError, match="models: a pack needs models of one architecture"):
        Packed([nn.Linear(3, 4), nn.Linear(3, 5)])
    with pytest.raises(ValueError, match="models"):
        Packed([])


def _alone(cfg, data):
    pr = prepare_run(cfg, data)
    fit_alone(pr)
    return pr


def _packed(cfgs, data, members=None):
    prs = [prepare_run(c, data, packed=True) for c in cfgs]
    fits = fit_packed(
        members or [pr.member(None) for pr in prs],
        prs[0].prep.train,
        cfgs[0].epochs,
        optimizer_factory=prs[0].optimizer,
        scheduler_factory=prs[0].scheduler,
        batch_size=cfgs[0].batch_size,
        device="cpu",
        progress=False,
    )
    return prs, fits


def _assert_same_weights(a: nn.Module, b: nn.Module, what: str, rtol: float = 1e-5, atol: float = 2e-6) -> None:
    """Every floating tensor of ``b`` within ``rtol`` of ``a``'s relative to its norm, plus ``atol`` per
    element (root mean square) for tensors near zero: float32 rounding of grouped against plain
    convolutions, which AdamW's m / sqrt(v) amplifies in components whose gradient is near zero."""
    for (k, v), w in zip(a.state_dict().items(), b.state_dict().values()):
        if v.is_floating_point():
            err, bound = float((w - v).norm()), rtol * float(v.norm()) + atol * v.numel() ** 0.5
            assert err <= bound, f"{what}: {k} differs by {err:.2g} > {bound:.2g}"


#: The equivalence tests' network: the CIFAR ResNet-18 at width 4 (seconds on a CPU). Not TinyCNN,
#: whose convolutions have a bias before batch norm: its gradient is zero in exact arithmetic, so
#: AdamW (m / sqrt(v)) turns float noise into steps of size lr there, and no two summation orders
#: (grouped or not, batched or not) agree on it beyond the noise.
NET = dict(backbone="cifar_resnet18", width=4)


def R(method: str, seed: int, **kw):
    return tiny_config(method, seed, **NET, **kw)


@pytest.mark.parametrize(
    "group",
    [
        [R("vanilla", 0), R("robust", 1), R("robust_filtered", 2), R("robust", 3, lam=0.5)],
        [R("fgr", 0), R("fgr_robust", 1), R("fgr", 5)],
        [R("single", 0), R("single", 7)],
    ],
    ids=["plain-methods", "fgr", "single"],
)
def test_packed_runs_reach_the_weights_and_losses_of_runs_alone(data, group):
    """Every method, different seeds (initialisation, batch order, augmentation) and lambdas in one
    pack: after two epochs (one of them the robust/FGR phase) each run's parameters, buffers and epoch
    losses equal its run alone (float32, relative 1e-5)."""
    alone = [_alone(c, data) for c in group]
    prs, fits = _packed(group, data)
    # Parameters: 1e-4 relative (plus 1e-5 per element near zero). Rounding of grouped against plain
    # convolutions is 1e-7, but AdamW's first steps are m / sqrt(v) = sign(g): a component whose gradient
    # is rounding noise moves by +-lr either way (measured: up to 4e-5 relative on a conv weight after 8
    # steps on one thread; FGR's division by ||g_c||^2 adds to it). The epoch losses agree at 1e-5.
    for c, a, p, fit in zip(group, alone, prs, fits):
        _assert_same_weights(a.runner, p.runner, f"{c.method} s{c.seed}", 1e-4, 1e-5)
        assert fit.diverged_at is None and [h["packed"] for h in fit.history] == [len(group)] * c.epochs
    losses_alone = [
        prepare_run(c, data) for c in group
    ]  # the epoch losses: fit_alone's history, recomputed to compare with the pack's
    for c, pr in zip(group, losses_alone):
        hist = fit_alone(pr).history
        fit = fits[group.index(c)]
        np.testing.assert_allclose([h["loss"] for h in fit.history], [h["loss"] for h in hist], rtol=1e-5)


def test_a_packs_augmentation_is_one_call_per_step(data, monkeypatch):
    """The runs of a pack share one Augment (lib.data.augment): each step augments every run's batch
    in one call (Augment.many), whatever G; the runs still reach their weights alone (above)."""
    from lib.data.augment import Augment

    calls, real = [], Augment.many
    monkeypatch.setattr(Augment, "many", lambda self, xs, gens: calls.append(len(xs)) or real(self, xs, gens))
    group = [R("vanilla", 0), R("robust", 1), R("fgr", 2)]
    prs, _ = _packed(group[:2], data)
    steps = group[0].epochs * -(-len(prs[0].prep.train[1]) // group[0].batch_size)
    assert isinstance(prs[0].transform, Augment) and calls == [2] * steps
    calls.clear()
    _packed(group[2:] + [R("fgr", 3)], data)  # FGR's own step in the pack: the same one call
    assert calls == [2] * steps


def test_a_diverging_run_leaves_the_others_as_alone(data):
    """A run whose loss turns NaN is reported (``diverged_at``), not checkpointed past its last good
    epoch, and the other runs of its pack end with exactly the weights of their runs alone."""
    group = [R("vanilla", 0), R("vanilla", 1), R("robust", 2)]
    alone = [_alone(c, data) for c in (group[0], group[2])]
    prs = [prepare_run(c, data, packed=True) for c in group]
    members = [pr.member(None) for pr in prs]
    bad = members[1]
    bad.loss_key = None
    good_loss = bad.loss_fn
    bad.loss_fn = lambda out, y, epoch: good_loss(out, y, epoch) * (float("nan") if epoch >= 1 else 1.0)
    with pytest.warns(UserWarning, match=r"run 2 of 3 diverged in epoch 2 \(the others go on\)"):  # said, too
        _, fits = _packed(group, data, members)
    assert [f.diverged_at for f in fits] == [None, 2, None]
    assert len(fits[1].history) == 1
    _assert_same_weights(alone[0].runner, prs[0].runner, "vanilla beside a diverged run")
    _assert_same_weights(alone[1].runner, prs[2].runner, "robust beside a diverged run")


def test_packed_runs_are_the_records_of_runs_alone(data, tmp_path, monkeypatch):
    """The same keys and (float tolerance) predictions whether runs train alone or packed; each
    packed run is cached as its own run, FGR packs only with FGR."""
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "alone"))
    alone = [train_run(c, data) for c in CONFIGS]
    alone_probs = [load_predictions(r)["probs"].astype(np.float64) for r in alone]
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "packed"))
    packed = run_grid(CONFIGS, data, stack=8)
    assert [r["key"] for r in packed] == [r["key"] for r in alone]
    assert [r["history"][0].get("packed") for r in packed] == [
        3,
        3,
        2,
        3,
        2,
        None,
    ]  # single: another architecture, alone
    for a, b, c in zip(alone_probs, [load_predictions(r)["probs"].astype(np.float64) for r in packed], CONFIGS):
        np.testing.assert_allclose(a, b, atol=2e-3, err_msg=c.method)  # float16-stored probabilities
    for a, b in zip(alone, packed):
        assert a["history"][-1]["loss"] == pytest.approx(b["history"][-1]["loss"], rel=1e-4)
        assert a["metrics"]["all"]["accuracy"] == b["metrics"]["all"]["accuracy"]
    assert [h["objective"] for h in packed[2]["history"]] == ["erm", "fgr"]


def test_one_run_of_a_pack_resumes_alone_and_the_reverse(data, tmp_path, monkeypatch):
    """Interrupt a pack after its first epoch: each run's checkpoint (weights, AdamW moments) resumes
    alone and ends where the uninterrupted run ends; checkpoints of runs alone resume as a pack."""
    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / "full"))
    full = [load_predictions(train_run(c, data))["probs"] for c in (CONFIGS[2], CONFIGS[4])]
    import lib.moe.train as mt
    from lib.moe.grid import train_stacked

    class Stop(Exception):
        pass

    real = mt.PreparedRun.mark

    def mark(self, epoch, entry, m):
        real(self, epoch, entry, m)
        if epoch == 1:
            raise Stop

    for where in ("cut-packed", "cut-alone"):
        monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path / where))
        monkeypatch.setattr(mt.PreparedRun, "mark", mark)
        with pytest.raises(Stop):
            if where == "cut-packed":
                train_stacked([CONFIGS[2], CONFIGS[4]], data, stack=2)  # the two FGR runs, packed
            else:
                for c in (CONFIGS[2], CONFIGS[4]):
                    with pytest.raises(Stop):
                        train_run(c, data)
                raise Stop
        monkeypatch.setattr(mt.PreparedRun, "mark", real)
        assert Run(GROUP, run_config(CONFIGS[2], data)).load_checkpoint()["epoch"] == 1
        if where == "cut-packed":
            resumed = [train_run(c, data) for c in (CONFIGS[2], CONFIGS[4])]
        else:
            resumed = run_grid([CONFIGS[2], CONFIGS[4]], data, stack=2)
            assert resumed[0]["history"][-1]["packed"] == 2
        assert [r["resumed_from"] for r in resumed] == [1, 1]
        for r, f in zip(resumed, full):
            np.testing.assert_allclose(load_predictions(r)["probs"], f, atol=2e-3)


def test_stack_groups_split_by_architecture_and_size():
    cfgs = [
        tiny_config("single", 0),
        tiny_config("vanilla", 0),
        tiny_config("fgr", 0),
        tiny_config("vanilla", 1),
        tiny_config("single", 1),
        tiny_config("vanilla", 2, epochs=3),
    ]
    groups = stack_groups(cfgs, stack=2)
    assert [[c.method for c in g] for g in groups] == [
        ["single", "single"],
        ["vanilla", "vanilla"],
        ["fgr"],
        ["vanilla"],
    ]
    fgr = [
        tiny_config("fgr", 0),
        tiny_config("fgr_robust", 1),
        tiny_config("fgr", 2, warmup_epochs=0),
        tiny_config("fgr_robust", 3),
    ]
    assert [[c.seed for c in g] for g in stack_groups(fgr, stack=4)] == [[0, 1, 3], [2]]
    with pytest.raises(ValueError, match="stack"):
        stack_groups(cfgs, 0)


def test_the_engine_knows_no_paper():
    """lib.engine imports only the shared layers (config, validation, augmentation, the engine itself)
    and names no paper's method: a method's own step comes in through OwnStep."""
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


def test_a_run_alone_that_diverges_is_said_and_not_published(data, tmp_path, monkeypatch):
    """As in a pack: a run the grid trains alone whose epoch loss turns NaN is reported by the grid
    ("diverged in epoch 2; not published"), its epoch-1 checkpoint stays and no record is saved."""
    import lib.moe.grid as grid
    import lib.moe.train as mt

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    real = mt.prepare_run

    def nan_from_epoch_2(cfg, d, packed=False):
        pr = real(cfg, d, packed)
        good = pr.loss_fn
        # a NaN added from epoch 2 on: the epoch's loss is not finite, the gradients (and weights) stay so
        pr.loss_fn = lambda out, y, epoch: good(out, y, epoch) + (float("nan") if epoch >= 1 else 0.0)
        return pr

    monkeypatch.setattr(mt, "prepare_run", nan_from_epoch_2)  # alone, the grid runs train_run's compute_run
    said: list[str] = []
    c = R("vanilla", 0)
    with pytest.warns(UserWarning, match="diverged in epoch 2"):  # the loop's own warning
        trained = grid.train_stacked([c], data, stack=1, log=said.append)
    assert trained == [] and any("vanilla/s0 diverged in epoch 2; not published" in s for s in said)
    run = Run(GROUP, run_config(c, data))
    assert not run.done and run.load_checkpoint()["epoch"] == 1


def test_a_diverged_run_is_left_out_of_the_grid_and_never_cached(data, tmp_path, monkeypatch):
    """The grid's records leave out a run that diverged and the MoCaE made from it (the others are
    there) without training it a second time for them, and asking for it alone raises Diverged: no
    record of NaN metrics is cached."""
    import lib.moe.train as mt
    from lib.engine.loop import Diverged

    monkeypatch.setenv("CALIBOOK_CACHE", str(tmp_path))
    real = mt.prepare_run
    prepared: list[str] = []

    def vanilla_nan_from_epoch_2(cfg, d, packed=False):
        pr = real(cfg, d, packed)
        prepared.append(cfg.method)
        if cfg.method == "vanilla":
            good = pr.loss_fn
            pr.loss_fn = lambda out, y, epoch: good(out, y, epoch) + (float("nan") if epoch >= 1 else 0.0)
        return pr

    monkeypatch.setattr(mt, "prepare_run", vanilla_nan_from_epoch_2)  # stack=1: every run alone (compute_run)
    cfgs = [R("vanilla", 0), R("mocae", 0), R("single", 0)]
    with pytest.warns(UserWarning, match="diverged in epoch 2"):
        records = run_grid(cfgs, data, stack=1)
    assert [r["method"] for r in records] == ["single"]
    assert np.isfinite(records[0]["metrics"]["all"]["ece"])
    assert sorted(prepared) == ["single", "vanilla"]  # Vanilla trained once, for both Vanilla and MoCaE
    with pytest.warns(UserWarning, match="diverged in epoch 2"), pytest.raises(Diverged, match="epoch 2"):
        train_run(cfgs[0], data)
    run = Run(GROUP, run_config(cfgs[0], data))
    assert not run.done and run.load_checkpoint()["epoch"] == 1
