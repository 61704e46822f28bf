#!/usr/bin/env bash
# Set up memfs on a Debian machine as root: system packages, a venv in .venv,
# and memfs installed into it with its dev extras. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# fuse3 and libfuse3-dev for the daemon's FUSE mounts (pyfuse3 builds against libfuse3);
# git, tar, rsync and procps for the tests that drive real tools inside a mount;
# chromium for the Memory tab's browser tests (Playwright drives /usr/bin/chromium:
# no browser is ever downloaded); libpq5 for psycopg (the PostgreSQL store) and
# postgresql for the throwaway server the tests start (never a system cluster).
APT_PACKAGES=(python3 python3-venv python3-pip python3-dev gcc pkg-config fuse3 libfuse3-dev
  fuse-overlayfs chromium libpq5 postgresql
  bash coreutils sed grep git tar rsync procps)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev,bench]'
echo "setup: memfs $(.venv/bin/python -c 'import memfs; print(memfs.__version__)') in .venv"
