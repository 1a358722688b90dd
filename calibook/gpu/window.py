"""One call to a lent GPU machine, one command: ``python -m calibook paper`` (plan, train, export, import).

A lent GPU machine runs commands of at most 10 minutes, receives the working tree (plus carried
ignored paths, 64 MiB per call) and nothing else, is fresh at every call, and has python3 with torch
but not the book's notebook tools. ``results/README.md`` holds the recipe (:mod:`calibook.gpu.recipe`);
after the benchmark, the call's training is one command::

    python3 -m calibook paper cifar10h sensitivity --minutes 7 --log "$OUT/window.log" --export "$OUT/results.tgz"

which, in order: says the machine's Python, torch, numpy and Pillow and its device; checks the
machine has the modules the command needs; unpacks every data pack the call carried (naming any
missing chunk); loads each page's data, saying its fingerprint (pages named that cannot run here
stop the call); runs the engine's few-second self-test (:mod:`calibook.gpu.selftest`; a machine whose
stacks fail it trains every run alone); trains the
unfinished runs by the deadline, each (or each stack) only if it can end inside it (:func:`calibook.gpu.queue.run_queue`);
and writes every record it published into archives, also when the deadline or an error ends it.
Where the CUDA benchmark measured that runs alone train faster in several processes at once
(``--workers``, :data:`calibook.gpu.projection.WORKER_GAIN`), the call hands each process a share of the
runs of about equal time (``python -m calibook paper --runs ...``, the same deadline) and then trains
what is left itself.
With ``--log`` the progress lines go to that file and the output keeps the summary. Without pages,
every page that can run here does. ``--prepare`` stops before training; ``--dry-run`` prints the
plan; ``--carry PATH ...`` checks here what a call would carry; ``--import`` takes archives in.
``--launch slurm|local``, ``--status`` and ``--job-log JOB`` run the same plan as cluster jobs
(:mod:`calibook.gpu.cluster`).
Errors exit non-zero with one line (``--debug``: the traceback). This module imports no notebook
tooling (papermill, altair, nbformat).
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any

import torch

from lib.config import SCALES, repo_root
from calibook.artifacts import results_dir
from lib.engine.device import device_name, resolve_device
from calibook.gpu import cluster, packs, projection, queue, transfer
from calibook.gpu.recipe import reserve_seconds
from calibook.gpu.selftest import run_selftest
from calibook.pages import get as get_page
from calibook.results import PAGES, plan, select
from lib.validation import error_line

PROG = "python -m calibook paper"
TORCH_MIN = (2, 2)  # torch.func (FGR's batched gradients) and torch.compile of a pack
#: What every call needs; a page adds its own (``Page.needs``).
NEEDS: tuple[str, ...] = ("torch", "numpy", "scipy", "pandas", "filelock", "tqdm")
#: What a call's archives may hold together (64 MiB come back, the log and the benchmark beside them).
CALL_BYTES = 48 * 2**20

__all__ = ["CALL_BYTES", "NEEDS", "machine", "main", "missing", "parse_minutes", "parse_stack"]


#: ``--minutes``: a finite number of minutes > 0 (the cluster's ``--time`` reads it alike).
parse_minutes = cluster.parse_minutes


#: ``--stack``: an integer >= 1.
parse_stack = cluster.int_at_least(1, " (runs trained at once)")


def missing(pages: Sequence[str]) -> list[str]:
    """What this machine lacks for every call and to train ``pages``: Python older than 3.10,
    modules not importable, a torch without ``torch.func`` stacking."""
    out = [] if sys.version_info >= (3, 10) else [f"Python >= 3.10 (this is {sys.version.split()[0]})"]
    for needs in (NEEDS, *(get_page(p).needs for p in pages)):
        out += [m for m in needs if importlib.util.find_spec(m) is None and m not in out]
    if "torch" not in out:
        try:
            major, minor = (int(v) for v in version("torch").split(".")[:2])
        except (PackageNotFoundError, ValueError):
            major, minor = 99, 0  # a source build: trust it
        if (major, minor) < TORCH_MIN:
            out.append(
                f"torch >= {TORCH_MIN[0]}.{TORCH_MIN[1]} (torch.func and torch.compile; this is {major}.{minor})"
            )
    return out


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "absent"


def machine() -> str:
    """One line: Python, torch (and its CUDA), numpy and Pillow versions and the device (what the home
    side needs to trust the records: the data's decoding and the engine's numbers depend on them)."""
    cuda = f" (CUDA {torch.version.cuda})" if torch.version.cuda else ""
    return (
        f"machine: Python {platform.python_version()}, torch {torch.__version__}{cuda}, numpy {_version('numpy')}, "
        f"Pillow {_version('Pillow')}; device {device_name(resolve_device('auto'))}"
    )


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (no usage block) and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog=PROG, description="The paper-scale queue: plan, train a call, export, import.")
    ap.add_argument(
        "pages", nargs="*", help=f"pages (default: every one that can run here, in this order): {', '.join(PAGES)}"
    )
    ap.add_argument(
        "--target",
        default=None,
        help="only this target's runs of a page with targets (PACS: art_painting, cartoon, photo or sketch)",
    )
    ap.add_argument(
        "--minutes",
        type=parse_minutes,
        default=9.0,
        help="return by this many minutes: stacks that would end after it do not start (default 9)",
    )
    ap.add_argument("--dry-run", action="store_true", help="print the plan with projected GPU-minutes and windows")
    ap.add_argument("--scale", default="paper", help="paper (default); smoke: a tiny end-to-end check")
    ap.add_argument(
        "--stack",
        type=parse_stack,
        default=None,
        help="most runs trained at once as one stacked model (default: what ends in time, by the CUDA benchmark)",
    )
    ap.add_argument(
        "--import",
        dest="import_from",
        nargs="+",
        metavar="TGZ_OR_DIR",
        help="take in results made elsewhere: archives, folders of records, or the folder a call brought back",
    )
    ap.add_argument("--export", metavar="TGZ", help="write every record this call published into archives")
    ap.add_argument("--log", metavar="FILE", help="also write every line, and the progress lines only, to this file")
    ap.add_argument("--carry", nargs="+", metavar="PATH", help="check here what a call carrying these paths sends")
    ap.add_argument(
        "--staged",
        action="store_true",
        help="with --carry: one call of a staged sequence (python -m calibook pack NAME --with ...), part of a pack allowed",
    )
    ap.add_argument(
        "--workers",
        type=parse_stack,
        default=None,
        help="processes training runs at once (default: what the CUDA benchmark measured to pay, else 1)",
    )
    ap.add_argument(
        "--runs",
        metavar="IDS",
        type=lambda ids: ids.split(","),
        help="only these plan ids, comma-separated (a worker's share; with --launch: what to submit)",
    )
    ap.add_argument("--deadline-in", type=parse_minutes, help=argparse.SUPPRESS)  # a worker's deadline, seconds
    ap.add_argument("--no-selftest", action="store_true", help="skip the engine self-test")
    ap.add_argument(
        "--prepare",
        action="store_true",
        help="only check the machine, unpack the packs, load the data and run the self-test",
    )
    ap.add_argument("--debug", action="store_true", help="show the traceback of an error")
    cluster.add_arguments(ap)
    return ap


class _Log:
    """The call's lines: to stdout and, with ``path``, to that file too; inside the block the
    process's stderr (progress lines, warnings) goes to the file only, as whole lines."""

    def __init__(self, path: str | None) -> None:
        self.path, self.stderr = path, sys.stderr
        self.file: IO[str] | None = None

    def __enter__(self) -> _Log:
        if self.path:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self.file = open(self.path, "a", buffering=1)  # noqa: SIM115 - closed in __exit__
            sys.stderr = self.file
        return self

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        if self.file is not None:
            self.file.write(line + "\n")

    def __exit__(self, *exc: object) -> None:
        sys.stderr = self.stderr
        if self.file is not None:
            self.file.close()


def _window(
    args: argparse.Namespace, pages: list[str], explicit: bool, say: _Log, published: list[Path], start: float
) -> None:
    """The call after parsing: machine, packs, data, self-test, training (``start``: when the command began)."""
    say(machine())
    lacking = missing(pages if explicit else [])
    if lacking:
        raise ValueError(f"machine: missing {', '.join(lacking)} (pip install them, or pick other pages)")
    for p in [] if explicit else list(pages):
        if missing([p]):
            say(f"skipped {p}: this machine lacks {', '.join(missing([p]))}")
            pages.remove(p)
    for line in packs.unpack_all():
        say(line)
    unplanned: dict[str, str] = {}
    runs = args.runs
    only = None if runs is None else set(runs)

    def todo(names: Sequence[str], unplanned: dict[str, str] | None = None) -> list[queue.Item]:
        """The unfinished runs chosen (a bad target or run id: one line, at the first call)."""
        return [it for it in select(plan(names, args.scale, unplanned), runs, args.target) if not it.done]

    items = todo(pages, unplanned)
    for p, why in unplanned.items():
        if explicit:
            raise ValueError(f"pages: {p} cannot be planned here: {why}")
        say(f"skipped {p}: {why}")
    if not items:
        say(f"nothing to do: every planned run of {', '.join(pages) or 'no page'} is in results/")
        return
    data = queue.load_data(items, args.scale, strict=explicit, log=say)
    sizing = _sizing(args, [p for p, _ in data])
    workers = _workers(args, sizing)
    if not args.no_selftest:
        stacked = _stacks(args, sizing, [p for p, _ in data])
        try:
            say(run_selftest(stacked=stacked))
        except Exception as err:  # noqa: BLE001 - stacks this machine cannot train: runs alone instead
            if not stacked:
                raise
            say(f"self-test: stacks failed ({error_line(err)}); this call trains every run alone")
            args.stack = 1
            say(run_selftest(stacked=False))
    say(f"setup: {time.monotonic() - start:.0f} s")
    if args.prepare:
        return
    at = start + (args.deadline_in or max(60 * args.minutes - reserve_seconds(args.minutes), 1.0))
    if workers > 1 and only is None:
        shares = _shares([it for it in items if (it.page, it.target) in data], workers, sizing)
        say(f"workers: {len(shares)} processes at once, {', '.join(str(len(s)) for s in shares)} run(s) each")
        _run_workers(args, [p for p in pages if p not in unplanned], shares, workers, at, say, published)
        if sizing is not None:
            sizing.workers = 1  # what is left trains here, alone
    queue.run_queue(
        [p for p in pages if p not in unplanned],
        args.minutes,
        args.scale,
        args.stack,
        log=say,
        deadline=at,
        strict=explicit,
        published_out=published,
        data=data,
        sizing=sizing,
        max_bytes=CALL_BYTES,
        only=only if args.target is None else {it.id for it in items},
        workers=workers,
    )
    left = todo([p for p in pages if p not in unplanned])
    say(
        f"left: {len(left)} run(s) of {', '.join(dict.fromkeys(it.page for it in left)) or 'nothing'}; training ended at {time.monotonic() - start:.0f} s"
    )


def _sizing(args: argparse.Namespace, pages: Sequence[str]) -> projection.Bench | None:
    """The benchmark that sizes this call's stacks: the committed CUDA one at paper scale on a GPU.
    Without one there, a benchmarked page needs ``--stack`` (stacks sized by memory alone may not
    end in a call, and a fresh machine loses what did not end)."""
    if args.scale != "paper" or not torch.cuda.is_available():
        return None
    b = projection.bench(device=device_name(resolve_device("auto")))  # this GPU's, where measured
    if not b.cpu_extrapolated:
        return b
    if args.stack is None and any(get_page(p).bench for p in pages):
        raise ValueError(
            "stack: no CUDA benchmark is committed (bench/results/epoch_cuda-*.json) to size stacks by: run "
            "call 1 of results/README.md first, or pass --stack N"
        )
    return None


def _stacks(args: argparse.Namespace, sizing: projection.Bench | None, pages: Sequence[str]) -> bool:
    """Whether this call may train a stack of several runs: some page's :func:`calibook.gpu.queue.stack_cap`
    (the queue's rule) is above one or unset."""
    caps = [queue.stack_cap(get_page(p), args.stack, sizing) for p in pages]
    return any(cap is None or cap > 1 for cap in caps)


def _workers(args: argparse.Namespace, sizing: projection.Bench | None) -> int:
    """How many processes train at once (``sizing.workers`` set to it): ``--workers`` (with a
    benchmark, only a count it measured), else what the benchmark measured to pay, else one."""
    n = args.workers if args.workers is not None else sizing.workers if sizing is not None else 1
    if sizing is not None:
        if n > 1 and n not in sizing.slowdowns:
            measured = ", ".join(map(str, sorted(sizing.slowdowns))) or "none"
            raise ValueError(
                f"workers: {n} processes at once were not measured on this device (measured: {measured}); "
                "run bench/bench_epoch.py --workers N first"
            )
        sizing.workers = n
    return n


def _shares(items: Sequence[queue.Item], n: int, sizing: projection.Bench | None) -> list[list[queue.Item]]:
    """``items`` in ``n`` shares of about equal training time, each in plan order: the runs of one
    configuration (pages share runs) together, each group to the share with the least time so far
    (a run's time from ``sizing``; one unit without it)."""
    groups: dict[str, list[queue.Item]] = {}
    for it in items:
        groups.setdefault(repr(it.config), []).append(it)
    shares: list[list[queue.Item]] = [[] for _ in range(n)]
    load = [0.0] * n
    for group in groups.values():
        dataset = get_page(group[0].page).bench
        secs = projection.run_seconds(sizing, dataset, group[0].config) if sizing and dataset else None
        i = load.index(min(load))
        shares[i] += group
        load[i] += secs or 1.0
    return [share for share in shares if share]


def _run_workers(
    args: argparse.Namespace,
    pages: Sequence[str],
    shares: Sequence[Sequence[queue.Item]],
    workers: int,
    at: float,
    say: _Log,
    published: list[Path],
) -> None:
    """Train ``shares`` in one process each (``python -m calibook paper --runs ...``, the deadline ``at``;
    each sized as one of ``workers``, the measured count, also when fewer shares are left), their
    lines said with the worker's number and their progress in this call's log; add what they
    published to ``published`` (also when this call is stopped: the workers are then ended first)."""
    before = set(results_dir().glob("*/*/*.json"))
    common = [*pages, "--scale", args.scale, "--workers", str(workers), "--no-selftest"]
    common += ["--stack", str(args.stack)] if args.stack is not None else []
    err = sys.stderr if hasattr(sys.stderr, "fileno") and args.log else subprocess.DEVNULL
    procs: list[subprocess.Popen] = []
    readers: list[threading.Thread] = []
    try:
        for i, share in enumerate(shares, 1):
            left = f"{max(at - time.monotonic(), 1.0):.1f}"
            cmd = [sys.executable, "-m", "calibook", "paper", *common, "--runs", ",".join(it.id for it in share)]
            proc = subprocess.Popen(
                [*cmd, "--deadline-in", left], stdout=subprocess.PIPE, stderr=err, text=True, cwd=repo_root()
            )
            procs.append(proc)

            def relay(proc: subprocess.Popen = proc, i: int = i) -> None:
                for line in proc.stdout or []:
                    say(f"worker {i}: {line.rstrip()}")

            readers.append(threading.Thread(target=relay, daemon=True))
            readers[-1].start()
        for i, proc in enumerate(procs, 1):
            if proc.wait():
                say(f"worker {i}: ended with exit status {proc.returncode}; its runs left stay in the queue")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
        for reader in readers:
            reader.join(timeout=5)
        published += sorted(set(results_dir().glob("*/*/*.json")) - before)


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (a command cut at its time limit): unwind, so ``--export`` still writes the archive."""
    raise SystemExit(128 + signum)


def _imported(got: Sequence[Path]) -> str:
    """What an import took in: records, files, and the scales and data the records were made at."""
    recs = [r for r in (queue.read_record(p) for p in got if p.suffix == ".json") if r is not None]
    data = {
        f"{d.get('name')} {d.get('fingerprint')}"
        for r in recs
        if isinstance(d := (r.get("config") or {}).get("data"), dict) and "fingerprint" in d
    }
    scales = sorted({str((r.get("queue") or {}).get("scale")) for r in recs})
    made = (
        f"; made at scale {', '.join(scales)}" + (f" on data {', '.join(sorted(data))}" if data else "") if recs else ""
    )
    if not got:
        return "imported nothing new: results/ holds every record given already, byte for byte (or none was given)"
    return f"imported {len(recs)} record{'' if len(recs) == 1 else 's'} ({len(got)} files) into results/{made}"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m calibook paper``: see the module docstring. Returns the exit code (0, 1 failed, 2 bad input)."""
    start = time.monotonic()
    args = _parser().parse_args(argv)
    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _terminated) if main_thread else None  # a killed call still exports
    published: list[Path] = []
    try:
        if args.scale not in SCALES:
            raise ValueError(f"scale: must be one of {', '.join(SCALES)}, got {args.scale!r}")
        if args.import_from:
            print(_imported(transfer.import_results([Path(p) for p in args.import_from], args.scale)))
            return 0
        if args.carry:
            print(packs.check_carry(args.carry, staged=args.staged))
            return 0
        explicit = bool(args.pages)
        pages = list(args.pages) or list(PAGES)
        unknown = [p for p in pages if p not in PAGES]
        if unknown:
            raise ValueError(f"pages: unknown page {unknown[0]!r}; the queue knows {', '.join(PAGES)}")
        if args.launch or args.status or args.job_log:  # the same runs as cluster jobs
            return cluster.main(args, pages, explicit)
        if args.dry_run:
            unplanned: dict[str, Any] = {}
            chosen = select(plan(pages, args.scale, unplanned), args.runs, args.target)
            print(projection.describe(chosen, unplanned=unplanned))
            return 0
        with _Log(args.log) as say:
            try:
                _window(args, pages, explicit, say, published, start)
            finally:
                if args.export:
                    out = transfer.export(published, Path(args.export))
                    mib = sum(p.stat().st_size for p in out) / 2**20
                    say(f"exported {len(published)} record(s), {mib:.1f} MiB, to {', '.join(p.name for p in out)}")
    except Exception as err:  # noqa: BLE001 - every error is one line (--debug: the traceback)
        if args.debug:
            raise
        code = 2 if isinstance(err, ValueError) else 1
        msg = str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
        print(f"{PROG}: error: {msg.splitlines()[0] if msg else type(err).__name__}", file=sys.stderr)
        return code
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, before)
    return 0
