"""Training-step throughput of every method of paper 1 (calibrated MoE), ours vs the reference approach.

Methods (one optimizer step each on a fixed synthetic CIFAR-size batch, ResNet-18 CIFAR backbone):
single, vanilla, mocae (= vanilla training; its calibration is post hoc), robust, robust_filtered,
fgr, fgr_robust. Side by side, plain reimplementations of the reference approach:

* ``robust_filtered_ref`` -- the backbone runs twice per step (a no-grad pass for the routing-relevant
  mask, then the training pass), as in the paper's public code;
* ``fgr_ref`` / ``fgr_robust_ref`` -- the DCT filter in numpy on the CPU, image by image and block by
  block (batch copied to the host and back), gradients gathered into flat vectors with torch.cat.

Targets (issue 3): Robust Filtered about the cost of Vanilla; FGR at most 2.2x Vanilla.
Steps are timed round-robin across methods (one step of each per round) so load changes on a shared
machine hit every method alike; the median step time is reported. Both wall-clock and process CPU
time are recorded; on the CPU the ratios use CPU time by default (``--clock auto``), which measures the
work a step costs even when other jobs share the cores (wall time there mostly measures the neighbours).
On CUDA the ratios use wall time after synchronizing.

    .venv/bin/python bench/bench_methods.py --steps 3            # CPU (+ CUDA when available)
    .venv/bin/python bench/bench_methods.py --device cpu --width 32 --steps 5

Writes bench/results/methods_<device>.json and prints ratios to Vanilla.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

# Idle OpenMP threads sleep instead of spinning, so process CPU time measures work, not waiting for
# cores held by other jobs. Must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lib.nets.backbones import cifar_resnet18  # noqa: E402
from calibook.performance import time_round_robin  # noqa: E402
from lib.moe.fgr import fgr_step, image_inputs, soft_ece  # noqa: E402
from lib.data.jpeg import JPEG_CHROMA, JPEG_LUMA, RGB_TO_YCBCR, YCBCR_OFFSET  # noqa: E402
from lib.moe.heads import MoEHead, MoEModel, SingleExpertHead, label_nll  # noqa: E402
from lib.moe.robust import robust_filtered_loss, robust_moe_loss, routing_relevant_mask  # noqa: E402

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
LAM = 2.0
METHODS = ("single", "vanilla", "mocae", "robust", "robust_filtered", "fgr", "fgr_robust")
REFERENCES = ("robust_filtered_ref", "fgr_ref", "fgr_robust_ref")


# ----------------------------------------------------------------------------- reference approach


def _numpy_dct_matrix(n: int = 8) -> np.ndarray:
    k, i = np.arange(n)[:, None], np.arange(n)[None, :]
    d = np.cos(np.pi * (2 * i + 1) * k / (2 * n)) * np.sqrt(2.0 / n)
    d[0] = np.sqrt(1.0 / n)
    return d


_D = _numpy_dct_matrix()
_M = np.array(RGB_TO_YCBCR)
_M_INV = np.linalg.inv(_M)
_OFF = np.array(YCBCR_OFFSET)
_TABLES = np.stack([np.array(JPEG_LUMA), np.array(JPEG_CHROMA), np.array(JPEG_CHROMA)]).astype(np.float64)


def numpy_jpeg_filter(img: np.ndarray, quality: float) -> np.ndarray:
    """Reference-style filter of one HxWx3 image in [0, 255]: python loop over 8x8 blocks in numpy."""
    h, w, _ = img.shape
    ycc = img @ _M.T + _OFF - 128.0
    tables = np.maximum(_TABLES * (101.0 - quality) / 50.0, 1.0)
    out = np.empty_like(ycc)
    for c in range(3):
        for by in range(0, h, 8):
            for bx in range(0, w, 8):
                block = ycc[by : by + 8, bx : bx + 8, c]
                coef = _D @ block @ _D.T
                coef = np.round(coef / tables[c]) * tables[c]
                out[by : by + 8, bx : bx + 8, c] = _D.T @ coef @ _D
    return np.clip((out + 128.0 - _OFF) @ _M_INV.T, 0, 255)


def reference_filter_batch(x: torch.Tensor, rng: np.random.Generator, frac: float = 0.05) -> torch.Tensor:
    """Copy the batch to the host, filter max(1, int(frac B)) images in numpy, copy back."""
    mean = np.array(CIFAR_MEAN)[None, None, :]
    std = np.array(CIFAR_STD)[None, None, :]
    arr = x.detach().cpu().numpy().transpose(0, 2, 3, 1).astype(np.float64)
    b = arr.shape[0]
    for i in rng.permutation(b)[: max(1, int(frac * b))]:
        img = (arr[i] * std + mean) * 255.0
        arr[i] = (numpy_jpeg_filter(img, float(rng.choice([15, 18, 25]))) / 255.0 - mean) / std
    return torch.from_numpy(arr.transpose(0, 3, 1, 2).astype(np.float32)).to(x.device)


def reference_fgr_step(model, loss_main_fn, x, y, opt, rng) -> None:
    """FGR as in the reference: numpy filtering, .backward() twice, flat vectors via torch.cat."""
    params = [p for p in model.parameters() if p.requires_grad]
    xf = reference_filter_batch(x, rng)
    opt.zero_grad()
    loss_main_fn(model(xf), y).backward()
    g_m = torch.cat([p.grad.flatten() for p in params])
    opt.zero_grad()
    soft_ece(model(x).probs, y).backward()
    g_c = torch.cat([p.grad.flatten() for p in params])
    dot = g_m @ g_c
    if dot < 0:
        g_m = g_m - dot / (g_c @ g_c) * g_c
    offset = 0
    for p in params:
        p.grad = g_m[offset : offset + p.numel()].view_as(p).clone()
        offset += p.numel()
    opt.step()


# ----------------------------------------------------------------------------- our methods


def _mean_nll(out, y):
    return label_nll(out.probs, y).mean()


def _robust(out, y):
    return robust_moe_loss(label_nll(out.probs, y), LAM)


def _filtered_loss(out, y):
    l = label_nll(out.probs, y)
    mask = routing_relevant_mask(l, label_nll(out.expert_probs, y), out.routing, out.expert_probs, out.probs)
    return robust_filtered_loss(l, mask, LAM)


def make_step(method: str, width: int, device: torch.device, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    """Build a fresh model + AdamW for ``method`` (same seed for all) and return its step function."""
    torch.manual_seed(0)
    backbone = cifar_resnet18(width)
    head = SingleExpertHead(backbone.out_features, 10) if method == "single" else MoEHead(backbone.out_features, 10)
    model = MoEModel(backbone, head).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)

    def plain(loss_fn):
        def step() -> None:
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()

        return step

    if method in ("single", "vanilla", "mocae"):
        return plain(_mean_nll)
    if method == "robust":
        return plain(_robust)
    if method == "robust_filtered":
        return plain(_filtered_loss)
    if method in ("fgr", "fgr_robust"):
        fn = _mean_nll if method == "fgr" else _robust
        return lambda: fgr_step(model, fn, x, y, opt, generator=gen, inputs=image_inputs(CIFAR_MEAN, CIFAR_STD))
    if method == "robust_filtered_ref":

        def step() -> None:
            with torch.no_grad():  # first backbone pass: outputs for the mask only
                out0 = model(x)
                l0 = label_nll(out0.probs, y)
                mask = routing_relevant_mask(
                    l0, label_nll(out0.expert_probs, y), out0.routing, out0.expert_probs, out0.probs
                )
            opt.zero_grad(set_to_none=True)
            robust_filtered_loss(label_nll(model(x).probs, y), mask, LAM).backward()  # second pass
            opt.step()

        return step
    if method in ("fgr_ref", "fgr_robust_ref"):
        fn = _mean_nll if method == "fgr_ref" else _robust
        return lambda: reference_fgr_step(model, fn, x, y, opt, rng)
    raise ValueError(f"method: unknown {method!r}")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_device(device: torch.device, width: int, batch: int, steps: int, warmup: int, clock: str = "auto") -> dict:
    g = torch.Generator().manual_seed(123)
    x = torch.randn(batch, 3, 32, 32, generator=g).to(device)
    y = torch.randint(0, 10, (batch,), generator=g).to(device)
    names = METHODS + REFERENCES
    steps_fns = {m: make_step(m, width, device, x, y) for m in names}
    if clock == "auto":
        clock = "wall" if device.type == "cuda" else "cpu"
    timed = time_round_robin(
        steps_fns, min_repeats=steps, budget_s=0.0, max_repeats=steps, warmup=warmup, sync=lambda: _sync(device)
    )
    wall = {m: t["wall"] for m, t in timed.items()}
    cpu = {m: t["cpu"] for m, t in timed.items()}
    times = cpu if clock == "cpu" else wall
    med = {m: statistics.median(t) for m, t in times.items()}
    results = {
        m: {
            "sec_per_step_median": med[m],
            "steps_per_sec": 1.0 / med[m],
            "ratio_to_vanilla": med[m] / med["vanilla"],
            "wall_sec_per_step_median": statistics.median(wall[m]),
            "wall_ratio_to_vanilla": statistics.median(wall[m]) / statistics.median(wall["vanilla"]),
            "cpu_sec_per_step_median": statistics.median(cpu[m]),
            "wall_times": wall[m],
            "cpu_times": cpu[m],
        }
        for m in names
    }
    return {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "load_average_at_end": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "backbone": f"cifar_resnet18(width={width}) -> {4 * width}-d, MoEHead K=4",
        "batch": batch,
        "image": [3, 32, 32],
        "steps": steps,
        "warmup": warmup,
        "lam": LAM,
        "clock": clock,
        "results": results,
        "speedup_vs_reference": {
            "robust_filtered": med["robust_filtered_ref"] / med["robust_filtered"],
            "fgr": med["fgr_ref"] / med["fgr"],
            "fgr_robust": med["fgr_robust_ref"] / med["fgr_robust"],
        },
        "targets": {
            "robust_filtered_about_vanilla (<= 1.15x)": med["robust_filtered"] / med["vanilla"] <= 1.15,
            "fgr_at_most_2.2x_vanilla": med["fgr"] / med["vanilla"] <= 2.2,
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--device", choices=("auto", "cpu", "cuda"), default="auto", help="auto: CPU, plus CUDA when available"
    )
    ap.add_argument("--steps", type=int, default=3, help="timed rounds (one step of every method each)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--width", type=int, default=64, help="ResNet width (64 = the paper's 256-d backbone)")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument(
        "--clock",
        choices=("auto", "wall", "cpu"),
        default="auto",
        help="time used for the ratios: auto = process CPU time on cpu, wall time on cuda",
    )
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.batch < 1 or args.width < 1:
        ap.error("--steps, --batch and --width must be >= 1")
    torch.set_num_threads(args.threads)
    devices = ["cpu", "cuda"] if args.device == "auto" else [args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        if args.device == "cuda":
            ap.error("--device cuda: CUDA is not available")
        devices.remove("cuda")
    args.out.mkdir(parents=True, exist_ok=True)
    for dev in devices:
        print(
            f"[{dev}] {len(METHODS) + len(REFERENCES)} methods, batch {args.batch}, width {args.width}, "
            f"{args.steps} timed rounds",
            flush=True,
        )
        res = bench_device(torch.device(dev), args.width, args.batch, args.steps, args.warmup, args.clock)
        path = args.out / f"methods_{dev}.json"
        path.write_text(json.dumps(res, indent=2))
        print(f"ratios from {res['clock']} time; wall-clock alongside")
        print(f"{'method':22s} {'s/step':>8s} {'steps/s':>8s} {'x vanilla':>9s} {'wall s':>8s} {'wall x':>7s}")
        for m, r in res["results"].items():
            print(
                f"{m:22s} {r['sec_per_step_median']:8.3f} {r['steps_per_sec']:8.3f} {r['ratio_to_vanilla']:9.2f} "
                f"{r['wall_sec_per_step_median']:8.3f} {r['wall_ratio_to_vanilla']:7.2f}"
            )
        for k, v in res["speedup_vs_reference"].items():
            print(f"speed-up of ours over the reference approach, {k}: {v:.2f}x")
        for k, v in res["targets"].items():
            print(f"target {k}: {'met' if v else 'NOT met'}")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
