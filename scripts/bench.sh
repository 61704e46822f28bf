#!/usr/bin/env bash
# The benchmark suite from one command: set everything up (fuse-overlayfs
# included), then run bench/run.py with any arguments given (--quick, --runs N,
# --out DIR, --only PARTS). Run as root so first passes start cold.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python bench/run.py "$@"
