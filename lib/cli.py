"""Command line of the book: ``python -m lib {list,run,book}``.

Examples::

    python -m lib list
    python -m lib run pacs --scale smoke -p target sketch
    python -m lib book --scale cpu            # execute every notebook, then build the HTML
"""

from __future__ import annotations

import argparse
import ast
from typing import Any

from lib.config import DEFAULT_SCALE, SCALES


def _literal(text: str) -> Any:
    """Parse a ``-p`` value as a Python literal when possible (``3`` -> int), else keep the string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    from lib import book

    parser = argparse.ArgumentParser(prog="python -m lib", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the notebooks in book order")
    run = sub.add_parser("run", help="execute one notebook into build/<scale>/notebooks")
    run.add_argument("notebook")
    run.add_argument("--scale", default=DEFAULT_SCALE, choices=SCALES)
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                     metavar=("NAME", "VALUE"), help="extra notebook parameter")
    sub.add_parser("paper", help="the paper-scale queue (python -m lib paper --help)", add_help=False)
    pk = sub.add_parser("pack", help="write a dataset as chunks that fit one GPU-machine transfer")
    pk.add_argument("dataset")
    pk.add_argument("--max-mib", type=float, default=60.0)
    bk = sub.add_parser("book", help="execute the notebooks and build the HTML book")
    bk.add_argument("--scale", default=DEFAULT_SCALE, choices=SCALES)
    bk.add_argument("--only", nargs="*", help="execute only these notebooks (others are staged as they are)")
    bk.add_argument("--no-execute", action="store_true", help="build from existing executed copies")
    bk.add_argument("--no-strict", action="store_true", help="do not turn warnings into errors")
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["paper"]:
        from lib.queue import main as queue_main

        return queue_main(argv[1:])
    args = parser.parse_args(argv)

    if args.command == "list":
        print("\n".join(book.notebook_names()))
    elif args.command == "pack":
        from lib.packs import pack

        for p in pack(args.dataset, args.max_mib):
            print(p)
    elif args.command == "run":
        params = {name: _literal(value) for name, value in args.parameter}
        book.execute_notebook(args.notebook, args.scale, params)
    else:
        if not args.no_execute:
            book.execute_all(args.scale, args.only)
        book.build_book(args.scale, strict=not args.no_strict)
    return 0
