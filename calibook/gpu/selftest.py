"""A few-second self-test of the training engine on the machine that will train the paper-scale runs.

Run once per machine before a window's first training (``python -m calibook paper`` does it and leaves
a marker file): four tiny MoE runs (Vanilla, Robust, FGR, FGR + Robust; two packs, one of each step
kind) are trained for two epochs as packs and each alone, on the device, through the grid's own call
(:func:`lib.moe.train.fit_runs`: bf16 autocast and channels_last where the device has them); every
packed run must predict what its run alone predicts. A
machine whose torch or autocast breaks the packed engine fails here in seconds, not after a window.

A call that trains every run alone checks only the runs alone (``stacked=False``): each must predict
finite probabilities that sum to one.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from lib.config import cache_dir
from lib.data.synthetic import synthetic_images
from lib.engine.device import resolve_device
from lib.engine.loop import predict
from lib.moe.config import tiny_config
from lib.moe.train import fit_alone, fit_runs, prepare_run
from lib.validation import check_probs

TOLERANCE = 0.05  # largest |p_packed - p_alone| of a test probability (bf16 rounds grouped convolutions differently)

__all__ = ["TOLERANCE", "marker", "run_selftest"]


def marker(device: torch.device, stacked: bool = True) -> Path:
    """The file that says the self-test (``stacked``: with stacks) passed on this machine for this
    torch and device."""
    kind = "" if stacked else "-alone"
    name = f"selftest{kind}-{device.type}-{torch.__version__}.ok".replace("/", "_").replace(" ", "_")
    return cache_dir() / name


def run_selftest(device: str = "auto", force: bool = False, stacked: bool = True) -> str:
    """Run the self-test (unless its :func:`marker` exists and not ``force``; ``stacked=False``: the
    runs alone only); return one line saying what was checked, or raise ``RuntimeError`` naming the
    member that differs or predicts no probabilities."""
    dev = resolve_device(device)
    mark = marker(dev, stacked)
    if mark.exists() and not force:
        return f"self-test: passed before on this machine ({mark.name})"
    t0 = time.perf_counter()
    data = synthetic_images(n_train=64, n_val=16, n_test=32, size=8, num_classes=3, seed=0)
    worst = 0.0
    for pair in ((("vanilla", 0), ("robust", 1)), (("fgr", 0), ("fgr_robust", 1))):
        cfgs = [tiny_config(m, s, dataset="selftest", device=str(dev)) for m, s in pair]
        alone = []
        for c in cfgs:
            pr = prepare_run(c, data)
            fit_alone(pr)
            p = predict(pr.runner, pr.prep.test[0], dev, 64, pr.eval_prep, c.amp, collect=lambda o: o.probs)
            try:
                check_probs(p, "probs")
            except ValueError as err:
                raise RuntimeError(
                    f"self-test: {c.method} (seed {c.seed}) alone predicts no probabilities on {dev} ({err})"
                ) from err
            alone.append(p)
        if not stacked:
            continue
        prs = [prepare_run(c, data, packed=True) for c in cfgs]
        fit_runs(prs, [None] * len(prs), "self-test pack")  # the grid's path for a pack
        for c, pr, a in zip(cfgs, prs, alone):
            p = predict(pr.runner, pr.prep.test[0], dev, 64, pr.eval_prep, c.amp, collect=lambda o: o.probs)
            diff = float((p - a).abs().max())
            if not diff <= TOLERANCE:
                raise RuntimeError(
                    f"self-test: {c.method} (seed {c.seed}) packed differs from its run alone by "
                    f"{diff:.3g} > {TOLERANCE} on {dev}; the packed engine is not sound here"
                )
            worst = max(worst, diff)
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text(f"passed in {time.perf_counter() - t0:.1f} s, largest difference {worst:.3g}\n")
    if not stacked:
        return f"self-test: 4 runs alone on {dev} predict probabilities in {time.perf_counter() - t0:.1f} s (no packs this call)"
    return (
        f"self-test: 4 runs packed = alone on {dev} (largest difference {worst:.3g}) "
        f"in {time.perf_counter() - t0:.1f} s"
    )
