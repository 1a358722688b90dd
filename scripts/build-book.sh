#!/usr/bin/env bash
# Build the book: set up .venv, run every notebook at the default scale (cpu; SCALE=... to change)
# through papermill into build/<scale>/notebooks, then render HTML into build/<scale>/site/_build/html.
# The terminal shows the running page, its place in the list and its own progress line (calibook.book,
# lib.engine.progress); a table of the pages' times closes the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m calibook book --scale "${SCALE:-cpu}" "$@"
