#!/usr/bin/env bash
# Creates a virtual environment with huey (its SQLite storage needs nothing else), from PyPI, for the
# durable benchmark (`baton-bench durable`). Prints the environment's path.
#
#     Benchmarks/peers/huey-setup.sh [VENV]     # default: Benchmarks/.venv-huey (gitignored)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${1:-$here/../.venv-huey}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c 'import huey' 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check "huey==3.5.4" >&2
fi
echo "$venv"
