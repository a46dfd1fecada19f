#!/usr/bin/env bash
# System packages the project needs, installed from Debian's archive.
# Idempotent: does nothing when everything is already there.
set -euo pipefail
packages=()
need() { command -v "$1" >/dev/null 2>&1 || packages+=("$2"); }
# (entries are added here by the parts that need them, e.g. need bwrap bubblewrap)
need bwrap bubblewrap        # sandbox for Python blocks (flowforge.sandbox)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || packages+=(postgresql)  # storage tests (scripts/postgres.sh)
need chromium-headless-shell chromium-headless-shell  # the web app's browser tests (tests/webapp, Playwright)
need npm npm                      # `make ui`, axe-core for tests/webapp (Node.js's package manager)
/sbin/ldconfig -p 2>/dev/null | grep -q libseccomp.so.2 || packages+=(libseccomp2)
need redis-server redis-server  # the worker pool's broker, started by the tests (scripts/redis_server.py)
if [ ${#packages[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}"
fi
