"""On a lent GPU: train published CIFAR-10H runs again as packs and compare them with their records.

Issue 52's "results stay results": a run made packed and the same run made alone are one record, so
the first packed runs on a GPU must land where the published runs of the same seeds did (accuracy
within 0.5 points, ECE within 0.01: seed-to-seed noise of one run is larger than float rounding, so
these bounds are what bf16 kernels and a different pack may move a run by). The published records
are read from ``results/``; the runs are trained with ``results/`` hidden (``CALIBOOK_RESULTS`` set
to an empty folder) through the queue's own path (:func:`lib.moe.grid.train_stacked`), packs as
the queue forms them, compiled with ``--compile``. Writes ``$OUT/packed_vs_published.json`` and
prints one line per run, then a verdict line.

    python3 bench/packed_vs_published.py --minutes 7 --compile                 # on the GPU, data unpacked
    python3 bench/packed_vs_published.py --ids cifar10h/vanilla/lam2.0/w0/s0   # one run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_IDS = (
    "cifar10h/vanilla/lam2.0/w0/s0",
    "cifar10h/vanilla/lam2.0/w0/s1",
    "cifar10h/fgr/lam2.0/w20/s0",
    "cifar10h/fgr/lam2.0/w20/s1",
)
ACCURACY_POINTS, ECE_BOUND = 0.5, 0.01


def compare(published: dict, fresh: dict) -> dict:
    """One run's published and packed metrics side by side, with whether they agree within the bounds."""
    row: dict = {}
    for split in ("all", "hard"):
        for metric in ("accuracy", "ece"):
            a, b = published["metrics"][split][metric], fresh["metrics"][split][metric]
            row[f"{split}_{metric}"] = {"published": a, "packed": b, "diff": b - a}
    acc, ece = row["all_accuracy"]["diff"], row["all_ece"]["diff"]
    row["agrees"] = abs(100 * acc) <= ACCURACY_POINTS and abs(ece) <= ECE_BOUND
    row["packed_with"] = int((fresh.get("history") or [{}])[0].get("packed", 1))
    row["train_seconds"] = fresh["wall_time"]["train"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", nargs="+", default=list(DEFAULT_IDS), help="plan ids of published CIFAR-10H runs")
    ap.add_argument("--minutes", type=float, default=7.0, help="stop starting epochs after this many minutes")
    ap.add_argument("--compile", action="store_true", help="torch.compile the packs")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = ap.parse_args()
    if args.minutes <= 0:
        ap.error(f"--minutes: must be positive, got {args.minutes}")

    from lib.engine import deadline
    from calibook.gpu.queue import load_data
    from lib.moe.grid import train_stacked
    from lib.moe.train import train_run
    from calibook.results import plan, published

    have = published("cifar10h")
    missing = [i for i in args.ids if i not in have]
    if missing:
        ap.error(f"--ids: not published in results/: {', '.join(missing)}")
    os.environ["CALIBOOK_RESULTS"] = tempfile.mkdtemp(prefix="no-results-")  # train them, do not read them
    items = [it for it in plan(["cifar10h"], "paper") if it.id in args.ids]
    data = load_data(items, "paper", strict=True)[("cifar10h", None)]
    t0 = time.monotonic()
    try:
        with deadline.deadline(time.monotonic() + 60 * args.minutes, time.monotonic):
            train_stacked([it.config for it in items], data, stack=len(items), log=print, compile=args.compile)
    except deadline.DeadlineReached as stop:
        print(f"deadline: {stop}")
    rows = {}
    from calibook.runs import RunMissing, training

    with training(False):
        for it in items:
            try:
                rows[it.id] = compare(have[it.id], train_run(it.config, data))
            except RunMissing:
                rows[it.id] = {"agrees": None, "why": "not finished inside --minutes"}
    for run_id, r in rows.items():
        if r["agrees"] is None:
            print(f"{run_id}: {r['why']}")
            continue
        acc, ece = r["all_accuracy"], r["all_ece"]
        print(
            f"{run_id}: accuracy {acc['published']:.4f} -> {acc['packed']:.4f}, ECE {ece['published']:.4f} -> "
            f"{ece['packed']:.4f} (pack of {r['packed_with']}, {r['train_seconds']:.0f} s): "
            + ("agrees" if r["agrees"] else "DIFFERS")
        )
    done = [r for r in rows.values() if r["agrees"] is not None]
    print(
        f"{sum(r['agrees'] for r in done)} of {len(done)} finished runs agree with their published records "
        f"(accuracy within {ACCURACY_POINTS} points, ECE within {ECE_BOUND}) in {time.monotonic() - t0:.0f} s"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "packed_vs_published.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
