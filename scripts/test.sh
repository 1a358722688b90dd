#!/usr/bin/env bash
# Run the tests: set up .venv, lint and format check (ruff), then unit tests of lib, smoke-scale runs of every notebook (asserting
# on the numbers they publish) and a strict book build (warnings are errors). No network, no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/ruff check --quiet || { echo "ruff: lint errors above (ruff check --fix fixes the simple ones)" >&2; exit 1; }
.venv/bin/ruff format --check --quiet lib tests bench scripts || { echo "ruff: files above are not formatted (ruff format fixes them)" >&2; exit 1; }
exec .venv/bin/python -m pytest -q -ra "$@"
