#!/usr/bin/env bash
# Set everything up, then run the checks CI runs: ruff, mypy (strict on
# memfs/, the daemon, memfsd, and tests/) and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
