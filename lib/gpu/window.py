"""One GPU window, one command per call: ``python -m lib paper`` (plan, train to a deadline, export, import).

A lent GPU machine runs commands of at most 10 minutes, receives the working tree (plus carried
ignored paths, 64 MiB per call) and nothing else, and has python3 with torch but not the book's
notebook tools. One call is one command::

    python3 -m lib paper cifar10h --minutes 9 --export "$OUT/results.tgz"

which, in order: checks the machine has what the command needs (one line naming what is missing);
copies the data chunks carried under ``.packs/`` into a folder that outlives the call (``--packs``,
``$CALIBOOK_PACKS``, default ``/tmp/packs``) and unpacks every complete pack; runs the engine's
few-second self-test on first use (:mod:`lib.gpu.selftest`, a marker file after); trains the unfinished
runs by the hard deadline (:func:`lib.gpu.queue.run_queue`); and writes every record it published into
one archive, also when the deadline or an error ends it. Back home, ``python -m lib paper --import
results.tgz`` takes the archive in (a folder works too). Errors exit non-zero with one line
(``--debug``: the traceback). This module imports no notebook tooling (papermill, altair, nbformat).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

PROG = "python -m lib paper"
#: Seconds kept free before ``--minutes`` runs out (at most a fifth of them): evaluating and publishing
#: the last stack, the export. A stack cut in its evaluation loses nothing: its runs keep their last
#: epoch's checkpoints and are evaluated on the next call.
RESERVE_SECONDS = 90.0
TORCH_MIN = (2, 2)  # torch.func.stack_module_state and pytree dataclasses in vmap outputs
#: What every window needs; a page adds its own (:attr:`lib.page.Page.needs`).
NEEDS: tuple[str, ...] = ("torch", "numpy", "scipy", "pandas", "filelock", "tqdm")

__all__ = ["NEEDS", "main", "missing", "parse_minutes", "parse_stack"]


def parse_minutes(text: str) -> float:
    """``--minutes``: a finite number of minutes > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of minutes, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive finite number of minutes, got {text!r}")
    return v


def parse_stack(text: str) -> int:
    """``--stack``: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (runs trained at once), got {text!r}")
    return v


def missing(pages: Sequence[str]) -> list[str]:
    """What this machine lacks to train ``pages``: Python older than 3.10, modules not importable."""
    out = [] if sys.version_info >= (3, 10) else [f"Python >= 3.10 (this is {sys.version.split()[0]})"]
    from lib.pages import get

    for needs in (NEEDS, *(get(p).needs for p in pages)):
        out += [m for m in needs if importlib.util.find_spec(m) is None and m not in out]
    if "torch" not in out:
        from importlib.metadata import PackageNotFoundError, version

        try:
            major, minor = (int(v) for v in version("torch").split(".")[:2])
        except (PackageNotFoundError, ValueError):
            major, minor = 99, 0  # a source build: trust it
        if (major, minor) < TORCH_MIN:
            out.append(f"torch >= {TORCH_MIN[0]}.{TORCH_MIN[1]} (torch.func stacking; this is {major}.{minor})")
    return out


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (no usage block) and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    from lib.gpu.queue import PAGES

    ap = _Parser(prog=PROG, description="The paper-scale queue: plan, train a window, import.")
    ap.add_argument("pages", nargs="*", help=f"pages (default: all, in this priority order): {', '.join(PAGES)}")
    ap.add_argument(
        "--minutes",
        type=parse_minutes,
        default=9.0,
        help="return by this many minutes: no epoch starts that would end after it (default 9)",
    )
    ap.add_argument("--dry-run", action="store_true", help="print the plan with projected GPU-minutes and windows")
    ap.add_argument("--scale", default="paper", help="paper (default); smoke: a tiny end-to-end check")
    ap.add_argument(
        "--stack",
        type=parse_stack,
        default=None,
        help="runs trained at once as one stacked model (default: as many as the device holds)",
    )
    ap.add_argument("--import", dest="import_from", metavar="TGZ_OR_DIR", help="take in results made elsewhere")
    ap.add_argument("--export", metavar="TGZ", help="write every record this call published into one archive")
    ap.add_argument(
        "--packs",
        metavar="DIR",
        help="where data chunks are kept between calls (default: $CALIBOOK_PACKS or /tmp/packs)",
    )
    ap.add_argument("--no-selftest", action="store_true", help="skip the engine self-test")
    ap.add_argument(
        "--prepare",
        action="store_true",
        help="only check the machine, gather and unpack the packs and run the self-test",
    )
    ap.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return ap


def _window(
    args: argparse.Namespace,
    pages: list[str],
    explicit: bool,
    log: Callable[[str], None],
    published: list[Path],
    start: float,
) -> None:
    from lib.gpu import packs
    from lib.gpu.queue import describe, plan, run_queue

    lacking = missing(pages if explicit else ["*"])
    if lacking:
        raise ValueError(f"machine: missing {', '.join(lacking)} (pip install them, or pick other pages)")
    for line in packs.gather(persistent=packs.persistent_dir(args.packs)):
        log(line)
    for name in packs.unpack_all(packs.packs_dir(), packs.persistent_dir(args.packs)):
        log(f"unpacked {name} into the data cache")
    if not args.no_selftest:
        from lib.gpu.selftest import run_selftest

        log(run_selftest())
    if args.prepare:
        return
    at = start + max(60 * args.minutes - min(RESERVE_SECONDS, 12 * args.minutes), 1.0)
    run_queue(
        pages, args.minutes, args.scale, args.stack, log=log, deadline=at, strict=explicit, published_out=published
    )
    log(describe(plan(pages, args.scale)))


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (a command cut at its time limit): unwind, so ``--export`` still writes the archive."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lib paper``: see the module docstring. Returns the exit code (0, 1 failed, 2 bad input)."""
    start = time.monotonic()
    ap = _parser()
    args = ap.parse_args(argv)
    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _terminated) if main_thread else None  # a killed call still exports
    try:
        return _main(args, start)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, before)


def _main(args: argparse.Namespace, start: float) -> int:
    """:func:`main` after parsing: the command, every error one line."""
    published: list[Path] = []
    try:
        from lib.config import SCALES
        from lib.gpu.queue import PAGES, describe, import_results, plan

        if args.scale not in SCALES:
            raise ValueError(f"scale: must be one of {', '.join(SCALES)}, got {args.scale!r}")
        explicit = bool(args.pages)
        pages = list(args.pages) or list(PAGES)
        if args.import_from:
            got = import_results(Path(args.import_from), args.scale)
            print(f"imported {len([p for p in got if p.suffix == '.json'])} record(s) ({len(got)} files) into results/")
            return 0
        items = plan(pages, args.scale)
        if args.dry_run:
            print(describe(items))
            return 0
        try:
            _window(args, pages, explicit, lambda s: print(s, flush=True), published, start)
        finally:
            if args.export:
                from lib.gpu.transfer import export

                n = export(published, Path(args.export))
                print(f"exported {n} record(s) to {args.export}", flush=True)
    except Exception as err:  # noqa: BLE001 - every error is one line (--debug: the traceback)
        if args.debug:
            raise
        code = 2 if isinstance(err, ValueError) else 1
        msg = str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
        print(f"{PROG}: error: {msg.splitlines()[0] if msg else type(err).__name__}", file=sys.stderr)
        return code
    return 0
