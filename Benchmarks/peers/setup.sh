#!/usr/bin/env bash
# Creates a virtual environment with the PostgreSQL job queues Baton is compared with, from PyPI:
# pgqueuer and procrastinate (independent jobs) and chancy (workflows, for the chain and DAG cases).
# Versions are pinned so that runs compare like with like.
#
#     Benchmarks/peers/setup.sh [VENV]     # default: Benchmarks/.venv-peers (gitignored)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${1:-$here/../.venv-peers}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check --retries 2 --timeout 15 \
    "pgqueuer==1.6.0" "procrastinate==3.10.0" "chancy==0.26.0" "psycopg[binary]"
"$venv/bin/python" -c 'import pgqueuer, procrastinate, chancy; print("peers ready:", pgqueuer.__version__, procrastinate.__version__ if hasattr(procrastinate, "__version__") else "", "chancy")' >&2
echo "$venv"
