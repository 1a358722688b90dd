"""Tests of lib.moe.methods (paper 1's methods): the per-step losses equal lib.moe.heads/lib.moe.robust, no
training step waits for the device, a compiled backbone trains like the eager one, and the backbone
runs in bf16 under autocast with the head in float32."""

from __future__ import annotations

import pytest
import torch

import lib.moe.methods as methods
from lib.engine.loop import fit as fit_classifier
from lib.moe.methods import objective
from lib.moe.config import TrainConfig, tiny_config
from lib.moe.fgr import image_inputs


def tiny(method: str = "vanilla", epochs: int = 1, **kw) -> TrainConfig:
    return tiny_config(method, **{"epochs": epochs, "batch_size": 32, "warmup_epochs": None, **kw})


def _fake_output(n=16, k=3, c=4, seed=0):
    from lib.moe.heads import MoEOutput

    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, c, generator=g, dtype=torch.float64, requires_grad=True)
    r = torch.softmax(torch.randn(n, k, generator=g, dtype=torch.float64), 1)
    pk = torch.softmax(z, 2)
    p = (r[:, :, None] * pk).sum(1)
    return MoEOutput(probs=p, routing=r, expert_probs=pk, expert_logits=z), torch.randint(0, c, (n,), generator=g)


def test_sync_free_losses_equal_lib_robust():
    """The engine's per-step losses equal lib.moe.heads/lib.moe.robust (whose math their own tests check)."""
    from lib.moe.heads import label_nll
    from lib.moe.robust import robust_filtered_loss, robust_moe_loss, routing_relevant_mask

    out, y = _fake_output()
    l = label_nll(out.probs, y)
    for method, ref in (
        ("vanilla", l.mean()),
        ("robust", robust_moe_loss(l, 2.0)),
        ("fgr_robust", robust_moe_loss(l, 2.0)),
        (
            "robust_filtered",
            robust_filtered_loss(
                l,
                routing_relevant_mask(l, label_nll(out.expert_probs, y), out.routing, out.expert_probs, out.probs),
                2.0,
            ),
        ),
    ):
        mine = objective(method, out, y, 2.0, robust_active=True)
        assert mine.item() == pytest.approx(ref.item(), rel=1e-12)
        g1 = torch.autograd.grad(mine, out.expert_logits, retain_graph=True)[0]
        g2 = torch.autograd.grad(ref, out.expert_logits, retain_graph=True)[0]
        assert torch.allclose(g1, g2, atol=1e-12)
    assert objective("robust", out, y, 2.0, robust_active=False).item() == pytest.approx(l.mean().item())


def test_robust_filtered_empty_set_is_twice_the_mean():
    """S empty (one expert agreeing with the mixture: no regret, no disagreement) -> mean + mean."""
    from lib.moe.heads import MoEOutput

    z = torch.randn(8, 1, 3, dtype=torch.float64)
    pk = torch.softmax(z, 2)
    out = MoEOutput(probs=pk[:, 0], routing=torch.ones(8, 1, dtype=torch.float64), expert_probs=pk, expert_logits=z)
    y = torch.zeros(8, dtype=torch.long)
    l = -pk[:, 0, 0].log()
    assert objective("robust_filtered", out, y, 2.0, True).item() == pytest.approx(2 * l.mean().item(), rel=1e-12)


class _HostReads(torch.utils._python_dispatch.TorchDispatchMode):
    """Records every op that would make the host wait for the device: reading a value
    (``aten._local_scalar_dense``: ``.item()``, ``float(t)``, ``bool(t)``, ``if t:``) and ops whose
    output size depends on values (``nonzero``, boolean-mask indexing, ...). Training runs on the
    meta device, which holds shapes but no values, so each such read is recorded (with the caller's
    file and line) and answered with a zero; on CUDA each would be a host synchronisation."""

    DATA_DEPENDENT = {
        torch.ops.aten.nonzero.default,
        torch.ops.aten.masked_select.default,
        torch.ops.aten._unique2.default,
        torch.ops.aten.unique_consecutive.default,
        torch.ops.aten.repeat_interleave.Tensor,
    }

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def _where(self) -> str:
        import traceback

        frames = [f for f in traceback.extract_stack() if "/lib/" in f.filename and "site-packages" not in f.filename]
        return f"{frames[-1].filename.rsplit('/lib/', 1)[1]}:{frames[-1].lineno}" if frames else "?"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        on_meta = any(
            isinstance(a, torch.Tensor) and a.device.type == "meta"
            for a in torch.utils._pytree.tree_leaves((args, kwargs))
        )
        if on_meta and func is torch.ops.aten._local_scalar_dense.default:
            self.reads.append(self._where())
            return False if args[0].dtype == torch.bool else 0
        bool_index = func is torch.ops.aten.index.Tensor and any(
            i is not None and i.dtype == torch.bool for i in args[1]
        )
        if on_meta and (func in self.DATA_DEPENDENT or bool_index):
            self.reads.append(f"{func} at {self._where()}")
        return func(*args, **kwargs)


@pytest.mark.parametrize("method", ["single", "vanilla", "robust", "robust_filtered", "fgr", "fgr_robust"])
def test_training_steps_never_wait_for_the_device(method):
    """Issue 8: no host synchronisation per step. Two epochs of the engine's real step for each
    method (augmentation, forward, the method's loss or FGR's rectified step, backward, AdamW,
    cosine schedule) run on the meta device; the only value read is the epoch loss, once per epoch."""

    cfg = tiny(method, epochs=4, warmup_epochs=2, batch_size=8)
    model = methods.Runner(methods.build_model(cfg, 3))
    x = torch.randint(0, 256, (40, 3, 8, 8), dtype=torch.uint8)  # 5 steps per epoch
    y = torch.randint(0, 3, (40,))
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    meta = torch.device("meta")
    loss_fn, step_fn = methods.method_step(cfg, meta, image_inputs(mean, std))
    from lib.data.augment import Augment

    reads = _HostReads()
    with reads:
        fit = fit_classifier(
            model,
            loss_fn,
            (x, y),
            cfg.epochs,
            step_fn=step_fn,
            optimizer_factory=lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=1e-4),
            scheduler_factory=lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.epochs),
            batch_size=8,
            device=meta,
            progress=False,
            transform=Augment(mean, std),
        )
    assert len(fit.history) == cfg.epochs  # warmup epochs (ERM) and robust/FGR epochs both ran
    epoch_reads = [r for r in reads.reads if r.startswith("engine/loop.py")]
    assert len(reads.reads) == cfg.epochs and len(epoch_reads) == cfg.epochs, reads.reads
    assert len(set(epoch_reads)) == 1  # one line: the epoch-loss read in fit_classifier


def test_compiled_backbone_trains_like_the_eager_one():
    """``TrainConfig.compile`` (torch.compile of the backbone, inductor; on CPU here, on CUDA in
    paper-scale runs) changes speed, not results: the same steps from the same start end at the
    same weights (SGD: Adam's normalised steps would amplify rounding on near-zero gradients), and
    the option is left out of the cache key."""
    cfg = tiny("robust", epochs=1, warmup_epochs=0, batch_size=8)
    x = torch.randint(0, 256, (24, 3, 8, 8), dtype=torch.uint8)
    y = torch.randint(0, 3, (24,))
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    loss_fn, _ = methods.method_step(cfg, torch.device("cpu"), image_inputs(mean, std))
    from lib.data.augment import Augment

    weights = []
    for compiled in (False, True):
        torch.manual_seed(0)
        model = methods.build_model(cfg, 3)
        fit_classifier(
            methods.Runner(model, compile_backbone=compiled),
            loss_fn,
            (x, y),
            1,
            optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1),
            batch_size=8,
            device="cpu",
            progress=False,
            transform=Augment(mean, std),
        )
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert not torch.equal(
        weights[0], torch.cat([p.detach().flatten() for p in methods.build_model(cfg, 3).parameters()])
    )
    torch.testing.assert_close(weights[1], weights[0], rtol=1e-4, atol=1e-5)
    assert cfg.replace(compile=True).key() == cfg.key()


def test_backbone_in_bf16_head_in_float32_under_autocast():
    """The CUDA recipe (bf16 autocast around the step) checked with CPU autocast: the backbone's
    convolutions run in bf16, the MoE head and its probabilities stay float32 (sums to 1 at float32
    precision, not bf16's ~1e-2)."""
    cfg = tiny("vanilla")
    runner = methods.Runner(methods.build_model(cfg, 3))
    x = torch.randn(16, 3, 8, 8)
    seen = []
    hook = runner.model.backbone.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = runner(x)
    hook.remove()
    assert seen == [torch.bfloat16]
    assert out.probs.dtype == out.routing.dtype == out.expert_probs.dtype == torch.float32
    assert (out.probs.sum(1) - 1).abs().max() < 1e-6
