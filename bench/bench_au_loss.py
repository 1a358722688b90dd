"""Benchmark: AU loss (bin-based smoothed CDF, O(nM)) vs the sorting-based AURC loss (exact ranks,
O(n log n)), forward + backward time per batch on the CPU (reweighted-risk paper Sec. 4.2 claims the
bin-based CDF avoids the sorting bottleneck).

Run: .venv/bin/python bench/bench_au_loss.py [--sizes 128 256 ...] [--budget 2]
Writes bench/results/au_loss.json with one record per (loss, n): median / min wall seconds and
median CPU seconds over repeats. About a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lib import reweighted as rw  # noqa: E402

DEFAULT_SIZES = [128 * 2**k for k in range(10)]  # 128 ... 65,536


def time_losses(losses: dict, n: int, num_classes: int, min_repeats: int, budget_s: float) -> dict:
    """Forward + backward wall and CPU seconds of each ``fn(logits, labels)`` on random data of size
    n. The losses are timed round-robin, so load from other processes hits them alike; CPU time
    (process_time, summed over threads) is the figure least disturbed by a busy machine."""
    g = torch.Generator().manual_seed(n)
    logits = (torch.randn(n, num_classes, generator=g) * 3).requires_grad_(True)
    labels = torch.randint(0, num_classes, (n,), generator=g)
    wall: dict[str, list[float]] = {k: [] for k in losses}
    cpu: dict[str, list[float]] = {k: [] for k in losses}
    for fn in losses.values():  # warm-up
        for _ in range(2):
            fn(logits, labels).backward()
            logits.grad = None
    start = time.perf_counter()
    rounds = 0
    while rounds < min_repeats or (time.perf_counter() - start < budget_s and rounds < 200):
        for name, fn in losses.items():
            c0, t0 = time.process_time(), time.perf_counter()
            fn(logits, labels).backward()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            logits.grad = None
        rounds += 1
    return {name: (wall[name], cpu[name]) for name in losses}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=DEFAULT_SIZES)
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--n-bins", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of timing per (loss, n)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "au_loss.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    losses = {
        "au_loss": lambda z, y: rw.au_loss(z, y, csf="msp", coverage=0.8, n_bins=args.n_bins, nu=0.1),
        "aurc_loss_sorting": lambda z, y: rw.aurc_loss(z, y, csf="msp"),
        "cross_entropy": lambda z, y: torch.nn.functional.cross_entropy(z, y),
    }
    records = []
    for n in args.sizes:
        timed = time_losses(losses, n, args.num_classes, min_repeats=5, budget_s=args.budget)
        for name, (wall, cpu) in timed.items():
            rec = {"loss": name, "n": n, "median_s": statistics.median(wall), "min_s": min(wall),
                   "median_cpu_s": statistics.median(cpu), "repeats": len(wall)}
            records.append(rec)
            print(f"{name:>18} n={n:>6}  wall median {rec['median_s'] * 1e3:8.3f} ms  min {rec['min_s'] * 1e3:8.3f} ms"
                  f"  cpu median {rec['median_cpu_s'] * 1e3:8.3f} ms ({len(wall)} reps)", flush=True)
    out = {
        "benchmark": "AU loss (O(nM) smoothed CDF) vs sorting-based AURC loss, forward+backward",
        "num_classes": args.num_classes,
        "n_bins": args.n_bins,
        "threads": args.threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "records": records,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
