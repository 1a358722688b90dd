#!/usr/bin/env bash
# Create .venv in the repository root (if missing) and install the pinned environment.
# A repeated run is a fast no-op: it reinstalls only when requirements.txt or pyproject.toml change.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    echo "calibration-book needs Python >= 3.11 (found: $("$PYTHON" --version 2>&1)); set PYTHON=..." >&2
    exit 1
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.calibook-installed
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
echo "[setup] installing the pinned environment into .venv (first run: a minute with uv, several with pip)"
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
uv=$(grep -E '^uv==' requirements.txt)
# uv reads no pip configuration: hand it the package index pip is set to use, if any.
index=${PIP_INDEX_URL:-$(.venv/bin/python -m pip config get global.index-url 2>/dev/null || true)}
[ -z "$index" ] || export UV_INDEX_URL="$index"
# uv (pinned in requirements.txt) installs the same pins as pip in a fraction of the time; pip if it fails.
if ! { .venv/bin/python -m pip install -q --disable-pip-version-check "$uv" &&
    .venv/bin/uv pip install -q --python .venv/bin/python -r requirements.txt; }; then
    echo "[setup] uv could not install the environment; installing with pip (several minutes)"
    .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
echo "$want" > "$stamp"
echo "[setup] done"
