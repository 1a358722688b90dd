"""Epoch time of paper 1's training engine (lib.moe.train through lib.engine) for CIFAR-10H and PACS at 224 px.

Times training steps of the real engine (``lib.engine.loop.fit`` with the MoE model, device-side
augmentation, AdamW, bf16 autocast + channels_last on CUDA) and reports:

* seconds per step and images/s (after warm-up steps that are not timed),
* the epoch time extrapolated to a full epoch (CIFAR-10H: 45,000 images; PACS: the ~5,450 source
  training images of one leave-one-domain-out split) at batch 128,
* model FLOPs per image (forward, counted with torch.utils.flop_counter; training ~ 3x forward) and,
  on a GPU, the fraction of its peak dense bf16 throughput (H100/H200: ~989 TFLOP/s),
* on a GPU, host synchronisations per timed step (CUDA's sync debug mode; the engine's step has none,
  so what it counts is the run's setup and its one epoch-loss read, spread over the timed steps),
* with every trained method of Table 1 timed, the projected GPU time of the Table 1 grid (7 methods
  x 5 seeds x 50 epochs, MoCaE reusing Vanilla's runs, the first 40% of each robust/FGR run being
  ERM epochs), one run at a time;
* with ``--pack G [G ...]``, the same for packed runs (:func:`lib.engine.loop.fit_packed`, the
  path the queue and every paper-1 page take): G runs of one method trained as one packed module,
  timed per method on CIFAR-10H, eager and (on CUDA) under ``torch.compile``, with what building and
  compiling a pack costs once (``compile_seconds``); images/s counts the images of all G runs, the
  fraction of peak likewise, and the projected Table 1 grid takes each method's cheapest measured pack.
  ``python -m calibook paper --dry-run`` projects the plan from this file (``epoch_cuda-*.json``).
* with ``--workers N [N ...]``, runs alone in N processes at once (``workers``): max(N) processes,
  started once, time each method's step in rounds, first in one of them, then in N of them whose
  timed steps begin at one signal; ``slowdown`` is the slowest process's step over the one alone.
  A step that leaves the device idle between kernels (launches, Python) lets N processes finish N
  runs in less than N times one:
  ``calibook.gpu.projection`` has the queue train in N processes where N / slowdown pays
  (``WORKER_GAIN``).

On a CPU only a few steps are timed and the epoch time is extrapolated from them (the JSON says so).
Writes ``bench/results/epoch_<device>.json`` (and a copy into ``--out DIR``: what a GPU call brings
back); prints one line per measurement. ``--scale smoke`` times a few steps of the smoke scale's tiny
CNN instead (the recipe's rehearsal, ``epoch_smoke-<device>.json``, only into ``--out`` when given: no projection
reads it).

    .venv/bin/python bench/bench_epoch.py                 # CPU here: a few steps of Vanilla MoE
    python bench/bench_epoch.py                           # on a GPU: every method, 200/100 steps
    python bench/bench_epoch.py --pack 8 16 32 --skip-pacs  # on a GPU: packs of 8, 16, 32 runs, every method
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lib.data.augment import Augment  # noqa: E402
from lib.engine.device import device_name, resolve_device  # noqa: E402
from lib.engine.loop import fit as fit_classifier  # noqa: E402
from lib.moe.methods import (  # noqa: E402
    METHODS,
    WARMUP_FRACTION,
    WARMUP_METHODS,
    Runner,
    build_model,
    method_step,
)
from lib.moe.config import TINY, TrainConfig  # noqa: E402
from lib.moe.fgr import image_inputs  # noqa: E402
from lib.validation import error_line  # noqa: E402

TRAINED = tuple(m for m in METHODS if m != "mocae")  # MoCaE is post hoc on Vanilla's runs

PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12}  # dense bf16 FLOP/s (vendor data sheets)


def _peak(name: str) -> float | None:
    for key, value in PEAK_BF16.items():
        if key in name:
            return value
    return None


def _forward_flops(model: torch.nn.Module, size: int) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    model.eval()
    x = torch.randn(1, 3, size, size)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        model.cpu()(x)
    model.train()
    return float(fc.get_total_flops())


def _line(r: dict) -> str:
    """One measurement as one line (a GPU call brings back only the end of its output)."""
    what = f"{r['name']} {r['method']}" + (
        f" pack {r['pack']}{' compiled' if r.get('compiled') else ''}" if "pack" in r else " alone"
    )
    peak = f", {100 * r['fraction_of_peak']:.1f}% of bf16 peak" if r.get("fraction_of_peak") else ""
    epoch = r.get("run_epoch_seconds", r.get("epoch_seconds"))
    layout = ", channels_last" if r.get("channels_last") else ""
    return (
        f"bench {what}{layout}: {r['seconds_per_step'] * 1e3:.1f} ms/step, {r['images_per_second']:.0f} images/s, "
        f"{epoch:.2f} s per run-epoch{peak}"
    )


def _seconds(device: torch.device, work: Callable[[], object]) -> float:
    """Wall seconds of ``work()``, the device's queue drained before and after (CUDA is asynchronous)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    work()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def _images(n: int, size: int, num_classes: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randint(0, 256, (n, 3, size, size), generator=g, dtype=torch.uint8),
        torch.randint(0, num_classes, (n,), generator=g),
    )


def bench(
    name: str,
    cfg: TrainConfig,
    size: int,
    num_classes: int,
    epoch_images: int,
    steps: int,
    warmup_steps: int,
    device: torch.device,
    barrier: Callable[[], None] | None = None,
) -> dict:
    """Time ``steps`` engine steps (after ``warmup_steps``) of ``cfg`` at ``size`` px, batch 128
    (``barrier``: called between the two, and no host synchronisations counted: a worker's step)."""
    torch.manual_seed(0)
    model = build_model(cfg, num_classes)
    flops = _forward_flops(model, size)
    use_cl = device.type == "cuda" and cfg.channels_last
    if use_cl:
        model = model.to(memory_format=torch.channels_last)
    runner = Runner(model, compile_backbone=cfg.compile)
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    bs = cfg.batch_size

    transform = Augment(mean, std, channels_last=use_cl)

    # The method's post-warmup step (robust objective; FGR's rectified step).
    loss_fn, step_fn = method_step(cfg.replace(warmup_epochs=0), device, image_inputs(mean, std))

    def run(n_steps: int) -> float:
        x, y = _images(n_steps * bs, size, num_classes)
        return _seconds(
            device,
            lambda: fit_classifier(
                runner,
                loss_fn,
                (x, y),
                1,
                step_fn=step_fn,
                optimizer_factory=lambda p: torch.optim.AdamW(p, lr=cfg.lr, weight_decay=cfg.weight_decay),
                batch_size=bs,
                device=device,
                transform=transform,
                amp=cfg.amp,
                progress=False,
                drop_last=True,
            ),
        )

    if warmup_steps:
        run(warmup_steps)
    if barrier is not None:
        barrier()
    seconds = run(steps)
    syncs = None
    # count host synchronisations in steps of their own (the count slows them); not in a worker's
    if device.type == "cuda" and barrier is None:
        counted = min(steps, 10)
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run(counted)
        torch.cuda.set_sync_debug_mode("default")
        syncs = sum("synchroniz" in str(w.message) for w in caught) / counted
    per_step = seconds / steps
    ips = bs / per_step
    dev_name = device_name(device)
    peak = _peak(dev_name) if device.type == "cuda" else None
    train_flops = 3 * flops  # forward + backward ~ 3x forward
    out = {
        "name": name,
        "method": cfg.method,
        "backbone": getattr(model.backbone, "name", cfg.backbone),
        "image_size": size,
        "batch_size": bs,
        "steps_timed": steps,
        "warmup_steps": warmup_steps,
        "seconds_per_step": per_step,
        "images_per_second": ips,
        "epoch_images": epoch_images,
        "epoch_seconds": epoch_images / ips,
        "epoch_seconds_note": f"extrapolated from {steps} timed steps of batch {bs}",
        "forward_gflops_per_image": flops / 1e9,
        "achieved_train_tflops": train_flops * ips / 1e12,
        "peak_bf16_tflops": peak / 1e12 if peak else None,
        "fraction_of_peak": train_flops * ips / peak if peak else None,
        "host_syncs_per_step": syncs,
        "amp_bf16": bool(cfg.amp and device.type == "cuda"),
        "channels_last": use_cl,
        "compile": cfg.compile,
    }
    print(_line(out), flush=True)
    return out


def bench_pack(
    name: str,
    cfg: TrainConfig,
    pack: int,
    size: int,
    num_classes: int,
    epoch_images: int,
    steps: int,
    warmup_steps: int,
    device: torch.device,
    compiled: bool = False,
) -> dict:
    """Time ``steps`` steps of ``pack`` runs of ``cfg`` (seeds 0..pack-1) trained as one packed module
    by :func:`lib.engine.loop.fit_packed` (the queue's path: bf16 autocast and channels_last on
    CUDA; ``compiled``: ``torch.compile`` of the pack), after ``warmup_steps`` untimed ones, batch 128
    each, in one call: the clock starts when the first timed step begins (one device sync there) and
    stops when the call returns. ``compile_seconds``: what the call spent before its timed steps
    beyond ``warmup_steps`` steps (building the pack and compiling it), what each pack pays once."""
    from lib.data.synthetic import synthetic_images
    from lib.engine.loop import fit_packed
    from lib.moe.train import prepare_run

    bs = cfg.batch_size
    data = synthetic_images(
        n_train=(steps + warmup_steps) * bs, n_val=8, n_test=8, size=size, num_classes=num_classes, seed=0
    )
    cfgs = [cfg.replace(seed=i, epochs=1, warmup_epochs=0, device=str(device), compile=compiled) for i in range(pack)]
    prs = [prepare_run(c, data, packed=True) for c in cfgs]
    members = [pr.member(None) for pr in prs]
    clock: dict[str, float] = {}
    calls = [0]

    def tick() -> None:  # the pack's augmentation, one call per step: the clock starts after the warm-up
        calls[0] += 1
        if calls[0] == warmup_steps + 1:
            if device.type == "cuda":
                torch.cuda.synchronize()
            clock["timed"] = time.perf_counter()

    class Timed(Augment):  # every run's augmentation, in the pack's one call (Augment.many)
        def many(self, xs: Sequence[torch.Tensor], gens: Sequence[torch.Generator]) -> list[torch.Tensor]:
            tick()
            return super().many(xs, gens)

    first = members[0].transform
    if isinstance(first, Augment):
        for m in members:
            m.transform = Timed(**dataclasses.asdict(first))
    else:  # no augmentation (features): member 0's identity, one call per step
        members[0].transform = lambda xb, gen: (tick(), xb)[1]
    x, y = prs[0].prep.train
    t0 = time.perf_counter()
    elapsed = _seconds(
        device,
        lambda: fit_packed(
            members,
            (x, y),
            1,
            optimizer_factory=prs[0].optimizer,
            batch_size=bs,
            device=device,
            amp=cfg.amp,
            compile=compiled,
            channels_last=prs[0].channels_last,
            progress=False,
        ),
    )
    per_step = (t0 + elapsed - clock["timed"]) / steps
    flops = _forward_flops(build_model(cfg, num_classes), size)
    ips = pack * bs / per_step
    peak = _peak(device_name(device)) if device.type == "cuda" else None
    out = {
        "name": name,
        "method": cfg.method,
        "pack": pack,
        "compiled": bool(compiled and device.type == "cuda"),
        "steps_timed": steps,
        "seconds_per_step": per_step,
        "run_step_ms": 1e3 * per_step / pack,
        "images_per_second": ips,
        "pack_epoch_seconds": epoch_images / bs * per_step,
        "run_epoch_seconds": epoch_images / bs * per_step / pack,
        "compile_seconds": max(clock["timed"] - t0 - warmup_steps * per_step, 0.0),
        "achieved_train_tflops": 3 * flops * ips / 1e12,
        "fraction_of_peak": 3 * flops * ips / peak if peak else None,
        "amp_bf16": bool(cfg.amp and device.type == "cuda"),
        "channels_last": prs[0].channels_last,
    }
    print(_line(out), flush=True)
    return out


def measured(path: Path, methods: list[str], packs: Sequence[int], workers: Sequence[int] = ()) -> tuple[bool, bool]:
    """Whether the benchmark at ``path`` holds (packs of every size in ``packs``, every count of
    ``workers``) of every one of ``methods`` (a pack that failed there counts as not measured)."""
    try:
        got = json.loads(path.read_text())
        done = {(r["method"], int(r["pack"])) for r in got.get("packed") or [] if "error" not in r}
        procs = {(r["method"], int(r["workers"])) for r in got.get("workers") or []}
    except (OSError, ValueError, KeyError, TypeError):
        return False, False
    return (
        bool(packs) and all((m, g) in done for m in methods for g in packs),
        all((m, n) in procs for m in methods for n in workers),
    )


def _wait_for(folder: Path, names: Sequence[str], procs: Sequence[subprocess.Popen] = ()) -> None:
    """Wait until every file of ``names`` exists in ``folder`` (120 s at most; a process of ``procs``
    that ended early is an error)."""
    until = time.monotonic() + 120
    while not all((folder / n).exists() for n in names):
        if any(p.poll() is not None for p in procs) or time.monotonic() > until:
            status = [p.poll() for p in procs]
            raise RuntimeError(f"processes at once: waited in vain for {names[0]} (exit status {status})")
        time.sleep(0.005)


def rounds(methods: Sequence[str], counts: Sequence[int]) -> list[tuple[str, int]]:
    """The rounds of ``bench_workers``: per method its step alone, then in each of ``counts`` at once."""
    return [(m, k) for m in methods for k in (1, *counts)]


def worker_rounds(folder: Path, index: int, methods: Sequence[str], counts: Sequence[int], time_step) -> dict:
    """One of ``bench_workers``' processes: in each round it takes part in (its ``index`` below the
    round's count) it says it is ready, waits for the round's start and times the method's step
    (``time_step(method, barrier)``); returns {method: {count: seconds per step}}."""
    out: dict[str, dict[int, float]] = {}
    (folder / f"up.{index}").touch()  # imports done: the first round starts once every process is up
    for method, k in rounds(methods, counts):
        if index >= k:
            continue
        tag = f"{method}.{k}"

        def barrier(tag: str = tag) -> None:
            (folder / f"ready.{tag}.{index}").touch()
            _wait_for(folder, [f"go.{tag}"])

        out.setdefault(method, {})[k] = time_step(method, barrier)
        (folder / f"done.{tag}.{index}").touch()
    return out


def bench_workers(methods: Sequence[str], counts: Sequence[int], steps: int, scale: str) -> list[dict]:
    """Time each method's step alone, then in each of ``counts`` processes at once, in ``max(counts)``
    processes started once (:func:`worker_rounds`; a round's timed steps start together): the
    slowest process's step over the one alone is the ``slowdown``. Processes that fail leave every
    count of every method with the error (measured: not tried again)."""
    n = max(counts)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cmd = [sys.executable, __file__, "--methods", *methods, "--cifar-steps", str(steps), "--scale", scale]
        cmd += ["--workers", *map(str, counts)]
        procs = [
            subprocess.Popen([*cmd, "--worker-of", tmp, str(i)], stdout=subprocess.PIPE, text=True) for i in range(n)
        ]
        try:
            _wait_for(folder, [f"up.{i}" for i in range(n)], procs)
            for method, k in rounds(methods, counts):
                tag = f"{method}.{k}"
                _wait_for(folder, [f"ready.{tag}.{i}" for i in range(k)], procs)
                (folder / f"go.{tag}").touch()
                _wait_for(folder, [f"done.{tag}.{i}" for i in range(k)], procs[:k])
            outs = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
        except Exception as err:  # noqa: BLE001 - processes this device cannot run at once are a result
            print(f"bench cifar10h in processes at once: FAILED {error_line(err)}", flush=True)
            return [
                {"name": "cifar10h", "method": m, "workers": k, "error": error_line(err)}
                for m in methods
                for k in counts
            ]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    rows = []
    for method in methods:
        alone = outs[0][method]["1"]
        for k in counts:
            many = max(o[method][str(k)] for o in outs[:k])
            rows.append(
                {
                    "name": "cifar10h",
                    "method": method,
                    "workers": k,
                    "steps_timed": steps,
                    "alone_seconds_per_step": alone,
                    "seconds_per_step": many,
                    "slowdown": many / alone,
                    "throughput": k * alone / many,
                }
            )
            print(
                f"bench cifar10h {method} in {k} processes at once: {many * 1e3:.1f} ms/step each "
                f"(alone {alone * 1e3:.1f}), {rows[-1]['throughput']:.2f} x the runs of one process",
                flush=True,
            )
    return rows


def pack_failure(method: str, pack: int, compiled: bool, err: BaseException) -> dict:
    """A pack that raised, as the JSON records it: what was packed and the error's first line."""
    return {"name": "cifar10h", "method": method, "pack": pack, "compiled": compiled, "error": error_line(err)}


def best_packs(packed: Sequence[dict]) -> list[dict]:
    """Per method, the measured pack (size, eager or compiled) with the cheapest run-epoch: the rows
    the queue sizes packs by (:func:`calibook.gpu.projection.cheapest_packs`)."""
    from calibook.gpu.projection import cheapest_packs

    return list(cheapest_packs(packed))


def table1_projection(results: list[dict], seeds: int = 5, epochs: int = 50) -> dict | None:
    """Projected time of paper 1's Table 1 grid on CIFAR-10H from the measured epoch times: each
    trained method x ``seeds`` x ``epochs``, run one at a time; robust and FGR runs spend their
    first 40% of epochs in ERM (Vanilla's step). None unless every trained method was timed."""
    epoch_s = {
        r["method"]: r.get("run_epoch_seconds", r.get("epoch_seconds")) for r in results if r["name"] == "cifar10h"
    }
    if not set(TRAINED) <= set(epoch_s):
        return None
    stack = max(int(r.get("pack", 1)) for r in results)
    w = WARMUP_FRACTION
    per_run = {
        m: epochs * ((w * epoch_s["vanilla"] + (1 - w) * epoch_s[m]) if m in WARMUP_METHODS else epoch_s[m])
        for m in TRAINED
    }
    total = seeds * sum(per_run.values())
    return {
        "runs": seeds * len(TRAINED),
        "run_minutes": {m: v / 60 for m, v in per_run.items()},
        "serial_minutes": total / 60,
        "stack": stack,
        "note": (
            f"{len(TRAINED)} trained methods x {seeds} seeds x {epochs} epochs from the measured epoch "
            "times (training only, no evaluation); "
            + ("one run at a time" if stack == 1 else f"packs of up to {stack} runs of one method, one pack at a time")
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--cifar-steps", type=int, default=None, help="timed steps (default 200 on GPU, 6 on CPU)")
    ap.add_argument("--pacs-steps", type=int, default=None, help="timed steps (default 100 on GPU, 2 on CPU)")
    ap.add_argument(
        "--methods",
        nargs="+",
        default=None,
        help="paper-1 methods to time (default: every trained method on a GPU, vanilla on a CPU)",
    )
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--skip-pacs", action="store_true")
    ap.add_argument(
        "--pack",
        type=int,
        nargs="+",
        default=[],
        help="also time packs of these many runs (CIFAR-10H), eager and (CUDA) compiled, e.g. 8 16 32",
    )
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON into this folder (a GPU call's $OUT)")
    ap.add_argument("--scale", choices=("paper", "smoke"), default="paper", help="smoke: the tiny CNN, a few steps")
    ap.add_argument(
        "--unless-measured",
        action="store_true",
        help="do nothing when bench/results already holds this device's packs of every --pack size for every method",
    )
    ap.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[],
        help="also time runs alone in this many processes at once (CIFAR-10H; e.g. 2 4)",
    )
    ap.add_argument("--worker-of", nargs=2, metavar=("DIR", "INDEX"), help=argparse.SUPPRESS)  # one of --workers
    args = ap.parse_args()
    if any(n < 2 for n in args.workers):
        ap.error(f"--workers: counts of processes must be at least 2, got {args.workers}")
    smoke = args.scale == "smoke"
    device = resolve_device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads or torch.get_num_threads())
    gpu = device.type == "cuda"
    c_steps = 2 if smoke else args.cifar_steps or (200 if gpu else 6)
    p_steps = 1 if smoke else args.pacs_steps or (100 if gpu else 2)
    size = 8 if smoke else 32
    methods = args.methods or (list(TRAINED) if gpu else ["vanilla"])
    tag = ("smoke-" if smoke else "") + (
        "cpu" if device.type == "cpu" else "cuda-" + device_name(device).replace(" ", "_")
    )
    path = ROOT / "bench" / "results" / f"epoch_{tag}.json"
    cifar_fields = (
        {k: TINY[k] for k in ("backbone", "width", "batch_size", "num_experts", "router_hidden")}
        if smoke
        else dict(backbone="cifar_resnet18", width=64, batch_size=128)
    )
    if args.worker_of:  # one of bench_workers' processes: its rounds, as one JSON line

        def time_step(method: str, barrier: Callable[[], None]) -> float:
            cifar = TrainConfig(method=method, lr=1e-3, compile=args.compile, progress=False, **cifar_fields)
            warm = 20 if gpu else 1
            return bench("cifar10h", cifar, size, 10, 45000, c_steps, warm, device, barrier)["seconds_per_step"]

        folder, index = Path(args.worker_of[0]), int(args.worker_of[1])
        print(json.dumps(worker_rounds(folder, index, methods, args.workers, time_step)))
        return
    if any(g < 2 for g in args.pack):
        ap.error(f"--pack: a pack holds at least 2 runs, got {args.pack}")
    stacks_done, workers_done = measured(path, methods, args.pack, args.workers)
    if args.unless_measured and stacks_done and workers_done:
        what = f"packs of {'/'.join(map(str, args.pack))}" + (
            f" and {'/'.join(map(str, args.workers))} processes" if args.workers else ""
        )
        print(f"bench: {path.name} holds {what} of {', '.join(methods)} already; nothing to measure")
        return
    keep = json.loads(path.read_text()) if args.unless_measured and path.exists() else {}
    # --unless-measured: what the file holds is kept and only what it lacks is measured (a call cut at its
    # limit, or a benchmark spread over calls, goes on where it stopped); a pack that failed is tried again
    results: list[dict] = list(keep.get("results") or [])
    packed: list[dict] = [r for r in keep.get("packed") or [] if "error" not in r]
    failed: list[dict] = []  # packs that raised this time
    alone_done = {(r["name"], r["method"]) for r in results}
    packs_done = {(r["method"], int(r["pack"]), bool(r.get("compiled"))) for r in packed}
    workers = [
        r
        for r in keep.get("workers") or []
        if (r["method"], r["workers"]) not in {(m, n) for m in methods for n in args.workers}
    ]
    # where the JSON goes: bench/results (committed from a GPU) and --out; a smoke run only to --out if given
    folders = [args.out] if smoke and args.out else [path.parent, *([args.out] if args.out else [])]

    def save() -> None:  # after every measurement: a call cut at its time limit keeps what it measured
        out = {
            "device": device_name(device),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "threads": torch.get_num_threads(),
            "note": (
                ("CPU: only a few steps are timed; " if device.type == "cpu" else "")
                + "epoch times are extrapolated from the timed steps; "
                "synthetic uint8 images of the right size (timing does not depend on pixel values)"
            ),
            "results": results,
            "table1_grid": table1_projection(results),
            "packed": packed,
            "packed_failed": failed,
            "table1_grid_packed": table1_projection(best_packs(packed)) if packed else None,
            "workers": workers,
        }
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = (folder / path.name).with_suffix(".part")
            tmp.write_text(json.dumps(out, indent=1))
            tmp.replace(folder / path.name)

    for method in [m for m in methods if ("cifar10h", m) not in alone_done]:
        cifar = TrainConfig(method=method, lr=1e-3, compile=args.compile, progress=False, **cifar_fields)
        results.append(bench("cifar10h", cifar, size, 10, 45000, c_steps, 20 if gpu else 1 if smoke else 2, device))
        save()
        if not args.skip_pacs and not smoke:
            pacs = TrainConfig(
                method=method,
                backbone="imagenet_resnet18",
                pretrained=False,
                batch_size=128,
                lr=1e-4,
                compile=args.compile,
                progress=False,
            )
            n_src = 1670 + 2048 + 2344 + 3929 - 3929  # sources when sketch is the target
            results.append(bench("pacs-224", pacs, 224, 7, int(round(0.9 * n_src)), p_steps, 10 if gpu else 1, device))
            save()
    for method in methods:
        cifar = TrainConfig(method=method, lr=1e-3, progress=False, **cifar_fields)
        for g in args.pack:
            for compiled in (False, True) if gpu else (False,):  # the CPU runs packs eagerly
                if (method, g, compiled) in packs_done:
                    continue
                warm = (30 if compiled else 20) if gpu else 1
                try:
                    packed.append(bench_pack("cifar10h", cifar, g, size, 10, 45000, c_steps, warm, device, compiled))
                except Exception as err:  # noqa: BLE001 - a pack this device cannot train is a result, said in full
                    traceback.print_exc()
                    failed.append(pack_failure(method, g, compiled, err))
                    print(f"bench cifar10h {method} pack {g}: FAILED {failed[-1]['error']}", flush=True)
                    if "out of memory" in failed[-1]["error"].lower():
                        torch.cuda.empty_cache()
                save()
    if args.workers:
        workers += bench_workers(methods, args.workers, c_steps, args.scale)
        save()
    print(f"wrote {', '.join(str(f / path.name) for f in folders)}")


if __name__ == "__main__":
    main()
