"""Command line of the book: ``python -m calibook {list,run,book,paper,pack}``.

E.g. ``python -m calibook run pacs --scale smoke -p target sketch``. Errors are printed as one message
(``--debug``: the traceback). Each subcommand is one function ``cmd_<name>(args)``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from unittest import mock

from lib.config import SCALES, repo_root

DEFAULT_SCALE = "cpu"  # the scale a page runs at unless told

PROG = "python -m calibook"


def cmd_list(args: argparse.Namespace) -> int:
    """``list``: the notebooks in book order, each with its parameters, and the book's copies of it
    (PACS's other targets) with what they set."""
    from calibook import notebooks

    from calibook.pages import copies

    for name in notebooks.notebook_names():
        params = notebooks.notebook_parameters(name)
        shown = ", ".join(
            f"{key}: {p['inferred_type_name']} = {p['default']}" for key, p in params.items() if key != "scale"
        )
        print(f"{name:24s} {shown}" if args.parameters else name)
        for copy, given in copies(name)[1:]:  # the book's other pages of this notebook (PACS's targets)
            print(f"{copy:24s} = {name}" + "".join(f" -p {k} {v}" for k, v in given.items()))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """``run``: execute the notebook, or a copy of it by its name in the book (``pacs-sketch``: ``pacs``
    with ``-p target sketch``, :func:`calibook.pages.copies`), its name and every ``-p`` checked
    against its parameters cell first (:func:`calibook.book.execute_notebook`)."""
    from calibook import book
    from calibook.pages import copy_named

    name, given = args.notebook, dict(args.parameter)
    if made := copy_named(name):
        name, given = made[0], {**made[2], **given}
    book.execute_notebook(name, args.scale, given)
    return 0


def cmd_book(args: argparse.Namespace) -> int:
    """``book``: execute the notebooks (all, or ``--only``), then build the HTML book."""
    from calibook import book

    if not args.no_execute:
        book.execute_all(args.scale, args.only)
    book.build_book(args.scale, strict=not args.no_strict)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: one sub-parser per ``cmd_*`` function."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)

    ls = sub.add_parser("list", help="list the notebooks in book order")
    ls.add_argument("--parameters", action="store_true", help="also show each notebook's parameters")
    ls.set_defaults(func=cmd_list)

    run = sub.add_parser("run", help="execute one notebook into build/<scale>/notebooks")
    run.add_argument("notebook", help="a name from `python -m calibook list` (a copy's, e.g. pacs-sketch, too)")
    run.add_argument("--scale", default=DEFAULT_SCALE, choices=SCALES)
    run.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="a parameter of the notebook's parameters cell",
    )
    run.set_defaults(func=cmd_run)

    bk = sub.add_parser("book", help="execute the notebooks and build the HTML book")
    bk.add_argument("--scale", default=DEFAULT_SCALE, choices=SCALES)
    bk.add_argument(
        "--only",
        nargs="*",
        help="execute only these notebooks, or copies by name (pacs-sketch); others are staged as they are",
    )
    bk.add_argument("--no-execute", action="store_true", help="build from existing executed copies")
    bk.add_argument("--no-strict", action="store_true", help="do not turn warnings into errors")
    bk.set_defaults(func=cmd_book)

    sub.add_parser(
        "paper",
        help="the paper-scale queue: plan, train a window, export, import (python -m calibook paper --help; calibook.gpu.window)",
    )
    pk = sub.add_parser("pack", help="write a dataset as a compressed pack that one GPU-machine call carries")
    pk.add_argument("dataset", help="cifar10h, pacs, cifar10, mmlu or resnet50-logits")
    pk.add_argument(
        "--max-mib",
        type=float,
        default=None,
        help="largest chunk in MiB (default: what fits one 64 MiB call beside the tree and results/)",
    )
    pk.add_argument(
        "--with",
        dest="extra",
        nargs="+",
        default=[],
        metavar="PATH",
        help="other ignored paths the training call needs (e.g. .weights): say which calls carry what",
    )
    pk.add_argument(
        "--staged",
        action="store_true",
        help="on the GPU machine, between staged calls: which chunks are here and sound (packs nothing)",
    )
    pk.set_defaults(func=cmd_pack)
    return parser


def cmd_pack(args: argparse.Namespace) -> int:
    """``pack``: the dataset's files as numbered chunks under .packs/ (calibook.gpu.packs); with ``--with``,
    the calls that carry them and those paths to one warm machine when they do not fit one call
    (:func:`calibook.gpu.packs.stages`); ``--staged``: on that machine, which chunks have come."""
    from calibook.gpu.packs import check_carry, pack, staged, stages

    if args.staged:
        print(staged(args.dataset))
        return 0
    try:
        parts = pack(args.dataset, args.max_mib)
    except FileNotFoundError as err:  # the data is not on this machine: bad input, one line
        raise ValueError(f"dataset: {err}") from None
    for p in parts:
        print(p)
    folder = str(parts[-1].parent.relative_to(repo_root()))
    calls = stages([folder, *args.extra])
    if len(calls) == 1:
        print(check_carry(calls[0]) + f": carry {' '.join([folder, *args.extra])} in every call (results/README.md)")
        return 0
    print(
        f"{folder} and {' '.join(args.extra) or 'nothing else'} take {len(calls)} calls to one warm machine "
        f"(results/README.md, staged data); the last trains:"
    )
    for i, carry in enumerate(calls, 1):
        print(f"  call {i}: carry {' '.join(carry)}  ({check_carry(carry, staged=True)})")
    return 0


def error_message(err: BaseException) -> tuple[str, int]:
    """The message shown for ``err`` and the exit code: 2 for bad input, 1 for a failed run."""
    try:  # the paper/pack machine may have no papermill
        from papermill.exceptions import PapermillExecutionError
    except ImportError:
        PapermillExecutionError = ()  # type: ignore[assignment,misc]  # noqa: N806

    if PapermillExecutionError and isinstance(err, PapermillExecutionError):
        return f"a cell of the notebook raised {err.ename}: {err.evalue}", 1
    if isinstance(err, ValueError):
        return str(err), 2
    return f"{type(err).__name__}: {err}", 1


@contextlib.contextmanager
def _interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP (``timeout``, a closed terminal, a scheduler) stop a command as Ctrl-C does,
    so a page that was running is kept as ``<page>.failed.ipynb`` with its notice; handlers restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["paper"]:  # the queue has its own options (calibook.gpu.window)
        # tqdm reads TQDM_* once, when imported: its bars (JPEG decoding) would fill a GPU call's short
        # output with carriage-return updates; the window's own progress lines stay (lib.engine.progress)
        os.environ.setdefault("TQDM_DISABLE", "1")
        from calibook.gpu.window import main as window_main

        return window_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    # the notebook kernels keep full tracebacks too (calibook.notebook_errors); main() may be called
    # in-process (tests): the environment is left as it was
    try:
        with mock.patch.dict(os.environ, {"CALIBOOK_DEBUG": "1"} if args.debug else {}), _interrupts():
            return int(args.func(args))
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM / SIGHUP (_interrupts): one line, not a traceback
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the output piped into a reader that stopped (e.g. `| head`): not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - nothing more may reach the closed pipe at exit
        return 0
    except Exception as err:  # noqa: BLE001 - every error becomes one message (--debug: traceback)
        if args.debug:
            raise
        message, code = error_message(err)
        print(f"{PROG} {args.command}: error: {message}", file=sys.stderr)
        if code == 1:
            print(f"(run `{PROG} --debug {args.command} ...` for the traceback)", file=sys.stderr)
        return code
