#!/usr/bin/env bash
# The main job: set everything up, then run the demo agent turns on the
# embedded SQLite store (state in ${MEMFS_STATE_DIR:-/var/lib/memfs}), then
# print the Memory tab's address (http://127.0.0.1:8330/login) with a token
# for Ada and keep the daemon running until Ctrl-C or SIGTERM (--exit: stop).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/memfs demo "$@"
