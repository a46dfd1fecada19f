#!/usr/bin/env python3
"""A throwaway PostgreSQL 16 *with pgvector* on 127.0.0.1, for the knowledge
tests and benchmark.

Debian's PostgreSQL here has no pgvector, so this uses the binaries bundled
in the `pgserver` wheel (PostgreSQL 16.2 + pgvector 0.6.2; a dev
dependency): `initdb` as the `postgres` user (when run as root) into a new
temporary folder, start on a free loopback port, stop by PID and delete the
folder.  Same shape as `scripts/postgres.sh`:

    eval "$(.venv/bin/python scripts/pgvector_server.py start)"   # PG_URL, PG_PID, PG_DIR
    .venv/bin/python scripts/pgvector_server.py stop "$PG_PID"

`FLOWFORGE_TEST_PGVECTOR_URL` points tests at an existing server instead.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path

ENV_URL = "FLOWFORGE_TEST_PGVECTOR_URL"


def bin_dir() -> Path:
    import importlib.util
    spec = importlib.util.find_spec("pgserver")     # not imported: only its files are used
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the pgserver wheel is missing - pip install 'pgserver==0.1.4'")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def start() -> tuple[str, int, str]:
    """(url, pid, folder) of a fresh server with fsync off (test data is thrown away)."""
    from flowforge.storage.testing import start as start_postgres

    server = start_postgres(bin_dir=bin_dir(), prefix="flowforge-pg-vector-",
                            settings=("shared_buffers=256MB", "maintenance_work_mem=256MB"))
    return server.url, server.pid, server.folder


def stop(pid: int, folder: str | None = None) -> None:
    """Stop the server by PID and delete its folder."""
    from flowforge.storage.testing import folder_of, stop_server

    # The folder is read from the process while it still exists.
    stop_server(pid, folder or folder_of(pid), "flowforge-pg-vector-")


_SHARED: tuple[str, int, str] | None = None


def shared_url() -> str:
    """One server per process, stopped at exit; `FLOWFORGE_TEST_PGVECTOR_URL` wins."""
    global _SHARED
    if os.environ.get(ENV_URL):
        return os.environ[ENV_URL]
    if _SHARED is None:
        _SHARED = start()
        atexit.register(stop, _SHARED[1], _SHARED[2])
    return _SHARED[0]


def main(argv: list[str]) -> int:
    if argv[:1] == ["start"]:
        url, pid, folder = start()
        print(f"PG_URL={url}\nPG_PID={pid}\nPG_DIR={folder}")
        return 0
    if argv[:1] == ["stop"] and len(argv) == 2 and argv[1].isdigit():
        stop(int(argv[1]))
        return 0
    print("usage: pgvector_server.py start | stop <PID>", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
