"""What packing gains for the book's other networks: PACS's EfficientNet-Lite0 and papers 2 and 4's WRNs.

Times one training step (forward, backward, AdamW; bf16 autocast and channels_last on CUDA) of G
copies of a network packed into one module (:class:`lib.engine.packed.Packed`: grouped and depthwise
convolutions with G x the groups, batch norm over G x C channels, batched linear layers) against the
same network alone, on random data of the paper's image size and batch, and reports the time per
run-step and the gain (alone / per run-step). The packed training loop of paper 1
(:func:`lib.engine.loop.fit_packed`) takes these networks as they are; papers 2 and 4 still train
one run at a time, so this file says what packing them would gain before their loops move.
Writes ``bench/results/pack_nets_<device>.json`` (and ``--out DIR``).

    python3 bench/bench_pack_nets.py --packs 4 8               # on a GPU
    .venv/bin/python bench/bench_pack_nets.py --smoke          # here: tiny sizes, a check that it runs
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lib.engine.device import autocast, device_name, resolve_device  # noqa: E402
from lib.engine.packed import Packed, pack_inputs  # noqa: E402
from lib.nets import backbones  # noqa: E402

#: (name, backbone spec, classes, image size, batch): the papers' settings.
NETS = (
    ("pacs efficientnet_lite0", "imagenet_efficientnet_lite0", 7, 224, 64),
    ("l2d wrn-28-4", "wrn-28-4", 10, 32, 128),
    ("rr wrn-28-10", "wrn-28-10", 10, 32, 128),
)


def step_seconds(spec: str, classes: int, size: int, batch: int, runs: int, steps: int, device: torch.device) -> float:
    """Seconds per training step of ``runs`` copies of ``spec`` packed (``runs`` = 1: the network alone)."""
    nets = []
    for seed in range(runs):
        torch.manual_seed(seed)
        nets.append(
            backbones.build(spec, num_classes=classes) if spec.startswith("wrn") else _classifier(spec, classes)
        )
    model = (nets[0] if runs == 1 else Packed(nets)).to(device).train()
    cuda = device.type == "cuda"
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xs = [torch.randn(batch, 3, size, size, device=device) for _ in range(runs)]
    x = xs[0] if runs == 1 else pack_inputs(xs)
    if cuda:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, classes, (runs, batch), device=device)

    def one() -> None:
        with autocast(device, cuda):
            out = model(x).float().reshape(runs, batch, classes)
            loss = torch.nn.functional.cross_entropy(out.flatten(0, 1), y.flatten(), reduction="none")
            loss.view(runs, batch).mean(1).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(2):
        one()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        one()
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def _classifier(spec: str, classes: int) -> torch.nn.Module:
    body = backbones.build(spec, pretrained=False)
    return torch.nn.Sequential(body, torch.nn.Linear(body.out_features, classes))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packs", type=int, nargs="+", default=[4, 8], help="pack sizes to time beside one alone")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 20 on a GPU, 1 on a CPU)")
    ap.add_argument("--smoke", action="store_true", help="tiny images and batches (a CPU check that it runs)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    if any(g < 2 for g in args.packs):
        ap.error(f"--packs: a pack holds at least 2 runs, got {args.packs}")
    device = resolve_device(args.device)
    steps = args.steps or (20 if device.type == "cuda" else 1)
    rows = []
    for name, spec, classes, size, batch in NETS:
        if args.smoke:
            size, batch = (32 if "lite0" in spec else 8), 4
            spec = "wrn-10-1" if spec.startswith("wrn") else spec
        try:
            alone = step_seconds(spec, classes, size, batch, 1, steps, device)
            for g in args.packs:
                packed = step_seconds(spec, classes, size, batch, g, steps, device)
                rows.append(
                    {
                        "net": name,
                        "spec": spec,
                        "image_size": size,
                        "batch": batch,
                        "pack": g,
                        "alone_step_ms": 1e3 * alone,
                        "run_step_ms": 1e3 * packed / g,
                        "gain": alone / (packed / g),
                    }
                )
                print(
                    f"{name} ({spec}, {size} px, batch {batch}): alone {1e3 * alone:.1f} ms, pack of {g} "
                    f"{1e3 * packed / g:.1f} ms per run-step: {rows[-1]['gain']:.2f}x",
                    flush=True,
                )
        except Exception as err:  # noqa: BLE001 - a network this device cannot pack is a result
            rows.append({"net": name, "spec": spec, "error": f"{type(err).__name__}: {str(err).splitlines()[0]}"})
            print(f"{name}: FAILED {rows[-1]['error']}", flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    tag = ("smoke-" if args.smoke else "") + ("cpu" if device.type == "cpu" else device_name(device).replace(" ", "_"))
    out = {"device": device_name(device), "torch": torch.__version__, "rows": rows}
    folders = [args.out] if args.smoke else [ROOT / "bench" / "results", *([args.out] if args.out else [])]
    for folder in [f for f in folders if f is not None]:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"pack_nets_{tag}.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
