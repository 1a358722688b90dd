"""``python -m lib``: the command line of the book (see :mod:`lib.cli`)."""

from lib.cli import main

raise SystemExit(main())
