#!/usr/bin/env bash
# Run the tests: set up .venv, lint and format check (ruff), then unit tests of lib, smoke-scale runs of every notebook (asserting
# on the numbers they publish) and a strict book build (warnings are errors), checked in headless Chromium. The tests
# need no network and no GPU (only installing a missing Chromium uses apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The book's headless-browser checks (tests/test_book.py) need Chromium, and the charts' check the font
# the charts are laid out in (Liberation Sans, lib.plots.FONT): install what is missing when this can
# (root with apt-get: Debian's chromium and fonts-liberation, under a minute); say so when it cannot.
# Nothing is done when both are installed already.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ -n "$(fc-list "Liberation Sans" 2>/dev/null)" ] || missing+=(fonts-liberation)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "[test] installing ${missing[*]} for the book's headless-browser checks (apt-get, under a minute)"
        export DEBIAN_FRONTEND=noninteractive
        apt_install() { apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; }
        apt_install || { apt-get update -q >/dev/null 2>&1 && apt_install; } ||
            echo "[test] could not install ${missing[*]} (apt-get failed: no network or no package?): the book's headless-browser checks that need them will be skipped" >&2
    else
        echo "[test] ${missing[*]} not installed and this cannot install it (needs root and apt-get): the book's headless-browser checks that need them will be skipped" >&2
    fi
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/ruff check --quiet || { echo "ruff: lint errors above (ruff check --fix fixes the simple ones)" >&2; exit 1; }
.venv/bin/ruff format --check --quiet lib calibook tests bench scripts || { echo "ruff: files above are not formatted (ruff format fixes them)" >&2; exit 1; }
exec .venv/bin/python -m pytest -q -ra "$@"
