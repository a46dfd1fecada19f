#!/usr/bin/env bash
# A throwaway PostgreSQL on 127.0.0.1 for tests and benchmarks (Debian's
# PostgreSQL, installed with apt-get when missing; initdb as `postgres` into a
# temporary folder; a free port). The logic lives in flowforge.storage.testing.
#
#   eval "$(scripts/postgres.sh start)"   # prints PG_URL=..., PG_PID=..., PG_DIR=...
#   scripts/postgres.sh stop "$PG_PID"
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
[ -x "$python" ] || python="$(command -v python3)"
exec "$python" -m flowforge.storage.testing "$@"
