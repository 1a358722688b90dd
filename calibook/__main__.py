"""``python -m calibook``: the command line of the book (see :mod:`calibook.cli`)."""

from calibook.cli import main

raise SystemExit(main())
