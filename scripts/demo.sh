#!/usr/bin/env bash
# The main job: set everything up, then run the demo agent turns on the
# embedded SQLite store (state in ${MEMFS_STATE_DIR:-/var/lib/memfs}).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/memfs demo "$@"
