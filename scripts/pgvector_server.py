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
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ENV_URL = "FLOWFORGE_TEST_PGVECTOR_URL"


def bin_dir() -> Path:
    import importlib.util
    spec = importlib.util.find_spec("pgserver")     # not imported: only its files are used
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the pgserver wheel is missing - pip install 'pgserver==0.1.4'")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def _as_postgres(command: list[str]) -> list[str]:
    """initdb refuses to run as root: root runs the server as `postgres`."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start() -> tuple[str, int, str]:
    """(url, pid, folder) of a fresh server with fsync off (test data is thrown away)."""
    binaries = bin_dir()
    folder = tempfile.mkdtemp(prefix="flowforge-pg-vector-")
    data = os.path.join(folder, "data")
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
        os.chmod(folder, 0o755)
    try:
        subprocess.run(_as_postgres([str(binaries / "initdb"), "-D", data, "-U", "postgres",
                                     "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"]),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port = _free_port()
        options = (f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=100 "
                   f"-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   f"-c shared_buffers=256MB -c maintenance_work_mem=256MB")
        subprocess.run(_as_postgres([str(binaries / "pg_ctl"), "-D", data, "-l",
                                     os.path.join(folder, "server.log"), "-o", options,
                                     "-w", "-t", "60", "start"]),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except subprocess.CalledProcessError as exc:
        log = Path(folder, "server.log")
        detail = (exc.stderr or b"").decode(errors="replace")
        if log.exists():
            detail += log.read_text(errors="replace")[-2000:]
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"could not start PostgreSQL with pgvector: {detail.strip()}") from None
    pid = int(Path(data, "postmaster.pid").read_text().split()[0])
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", pid, folder


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
