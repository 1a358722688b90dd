"""Benchmark: the AU loss (bin-based smoothed CDF, O(nM)) against the sorting-based AURC loss (exact
ranks, O(n log n)), KDE-XE (kernel estimate, O(n^2)) and plain cross-entropy: forward + backward
time per batch on the CPU. The reweighted-risk paper (Sec. 4.2) says the bin-based CDF bypasses the
sorting bottleneck and scales better than kernel objectives; notebooks/performance shows the result.

Run on an idle machine: .venv/bin/python bench/bench_au_loss.py [--sizes 128 256 ...] [--budget 2]
Writes bench/results/au_loss.json with one record per (loss, n): median / min wall seconds and
median CPU seconds over repeats (calibook.performance.loss_scaling). About two minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibook.performance import loss_scaling  # noqa: E402
from lib.rr.experiment import make_loss  # noqa: E402

DEFAULT_SIZES = [128 * 2**k for k in range(10)]  # 128 ... 65,536
LOSSES = {"au_loss": "au", "aurc_loss_sorting": "aurc", "kde_xe": "kde_xe", "cross_entropy": "xe"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=DEFAULT_SIZES)
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--n-bins", type=int, default=15)
    ap.add_argument(
        "--kde-max-n",
        type=int,
        default=2048,
        help="largest batch for KDE-XE (n x n kernel matrix, bandwidth re-selected per batch)",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of timing per n")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "au_loss.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    losses = {k: make_loss(v, n_bins=args.n_bins) for k, v in LOSSES.items()}
    table = loss_scaling(losses, args.sizes, args.num_classes, budget_s=args.budget, max_n={"kde_xe": args.kde_max_n})
    for r in table.itertuples():
        print(
            f"{r.loss:>18} n={r.n:>6}  wall median {r.median_s * 1e3:8.3f} ms  min {r.min_s * 1e3:8.3f} ms"
            f"  cpu median {r.median_cpu_s * 1e3:8.3f} ms ({r.repeats} reps)"
        )
    out = {
        "benchmark": "AU loss (O(nM) smoothed CDF) vs sorting-based AURC loss vs KDE-XE, forward+backward",
        "num_classes": args.num_classes,
        "n_bins": args.n_bins,
        "threads": args.threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "records": table.to_dict("records"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
