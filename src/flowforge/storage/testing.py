"""A throwaway PostgreSQL server for tests and benchmarks, on 127.0.0.1.

The conformance suite must run on PostgreSQL on a fresh machine with nothing
set up, so this module installs Debian's PostgreSQL when it is missing (as
root, through apt-get), runs `initdb` as the `postgres` user into a temporary
folder, starts the server on a free loopback port and stops it by PID.
`scripts/postgres.sh` is its command line:

    eval "$(scripts/postgres.sh start)"     # sets PG_URL, PG_PID, PG_DIR
    scripts/postgres.sh stop "$PG_PID"

`FLOWFORGE_TEST_POSTGRES_URL` points the tests at an existing server instead.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from flowforge.errors import StorageError
from flowforge.processes import process_exists

__all__ = ["ThrowawayPostgres", "folder_of", "temporary_schema", "start", "stop", "stop_server",
           "shared_url", "main", "crash", "restart"]

_ENV_URL = "FLOWFORGE_TEST_POSTGRES_URL"


@dataclass(frozen=True)
class ThrowawayPostgres:
    url: str
    pid: int
    folder: str


def _bin_dir() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit()
                        else 0)
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def ensure_installed() -> Path:
    """The folder holding initdb/pg_ctl, installing Debian's PostgreSQL if needed."""
    found = _bin_dir()
    if found is not None:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise StorageError("PostgreSQL is not installed and cannot be installed from here: "
                           "run `apt-get install postgresql` as root, or set "
                           f"{_ENV_URL} to a running server")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                     "postgresql"]):
        subprocess.run(command, check=True, env=env, stdout=sys.stderr, stderr=sys.stderr)
    found = _bin_dir()
    if found is None:
        raise StorageError("apt-get installed postgresql but initdb was not found")
    return found


def _as_postgres(command: list[str]) -> list[str]:
    """initdb refuses to run as root: root runs the server as `postgres`."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(*, durable: bool = False, bin_dir: Path | None = None,
          prefix: str = "flowforge-pg-", settings: tuple[str, ...] = ()) -> ThrowawayPostgres:
    """initdb into a new temporary folder and start the server; `durable=False`
    turns fsync off (fast, for tests: the data is thrown away anyway).
    `bin_dir` picks other binaries than Debian's (scripts/pgvector_server.py
    uses pgserver's), `settings` adds `-c name=value` server settings."""
    bin_dir = bin_dir or ensure_installed()
    folder = tempfile.mkdtemp(prefix=prefix)
    data = os.path.join(folder, "data")
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
        os.chmod(folder, 0o755)
    run = lambda cmd: subprocess.run(_as_postgres(cmd), check=True,  # noqa: E731
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    options = [f"-k {folder}", "-c listen_addresses=127.0.0.1", "-c max_connections=200"]
    if not durable:
        options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
    options += [f"-c {setting}" for setting in settings]
    log = Path(folder, "server.log")
    try:
        run([str(bin_dir / "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
             "-E", "UTF8", "--no-locale", "--no-sync"])
        for attempt in range(3):
            # a port found free is free only until someone binds it: another
            # test's server may take it first, and then this one tries another
            port = _free_port()
            try:
                run([str(bin_dir / "pg_ctl"), "-D", data, "-l", str(log),
                     "-o", " ".join([f"-p {port}", *options]), "-w", "-t", "60", "start"])
                break
            except subprocess.CalledProcessError:
                if attempt == 2 or not log.exists() or \
                        "Address already in use" not in log.read_text(errors="replace"):
                    raise
                log.unlink()
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or b"").decode(errors="replace")
        if log.exists():
            detail += log.read_text(errors="replace")[-2000:]
        shutil.rmtree(folder, ignore_errors=True)
        raise StorageError(f"could not start PostgreSQL: {detail.strip()}") from None
    pid = int(Path(data, "postmaster.pid").read_text().split()[0])
    return ThrowawayPostgres(f"postgresql://postgres@127.0.0.1:{port}/postgres", pid, folder)


def crash(server: ThrowawayPostgres) -> None:
    """Stop the server the hard way (`pg_ctl -m immediate stop`: no checkpoint,
    every connection cut), keeping its data for `restart`."""
    data = os.path.join(server.folder, "data")
    subprocess.run(_as_postgres([str(ensure_installed() / "pg_ctl"), "-D", data, "-m",
                                 "immediate", "-w", "-t", "60", "stop"]),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def restart(server: ThrowawayPostgres) -> ThrowawayPostgres:
    """Start a crashed server again on its port, with its data (it recovers
    from its log first): the same server, a new PID."""
    data = os.path.join(server.folder, "data")
    subprocess.run(_as_postgres([str(ensure_installed() / "pg_ctl"), "-D", data, "-l",
                                 os.path.join(server.folder, "server.log"), "-w", "-t", "60",
                                 "restart"]),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pid = int(Path(data, "postmaster.pid").read_text().split()[0])
    return ThrowawayPostgres(server.url, pid, server.folder)


def folder_of(pid: int) -> str | None:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if b"-D" in argv:
        data = argv[argv.index(b"-D") + 1].decode()
        return str(Path(data).parent)
    return None


def stop(target: int | str | ThrowawayPostgres) -> None:
    """Stop the server by its PID (or the folder `start` printed) and delete its data."""
    if isinstance(target, ThrowawayPostgres):
        pid, folder = target.pid, target.folder
    elif str(target).isdigit():
        pid, folder = int(target), folder_of(int(target))
    else:
        folder = str(target)
        pid_file = Path(folder, "data", "postmaster.pid")
        pid = int(pid_file.read_text().split()[0]) if pid_file.exists() else 0
    stop_server(pid, folder, "flowforge-pg-")


def stop_server(pid: int, folder: str | None, prefix: str) -> None:
    """Fast-shutdown a PostgreSQL postmaster by PID (SIGQUIT after 30 s) and
    delete its throwaway folder when the name carries our `prefix`."""
    if pid:
        try:
            os.kill(pid, signal.SIGINT)          # "fast" shutdown
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if not process_exists(pid):
                    break
                time.sleep(0.02)
            else:
                os.kill(pid, signal.SIGQUIT)
        except ProcessLookupError:
            pass
    if folder and Path(folder).name.startswith(prefix):
        shutil.rmtree(folder, ignore_errors=True)


_SHARED: ThrowawayPostgres | None = None


def shared_url() -> str:
    """One server per process (tests, benchmarks), stopped when the process exits;
    `FLOWFORGE_TEST_POSTGRES_URL` wins when set."""
    global _SHARED
    if os.environ.get(_ENV_URL):
        return os.environ[_ENV_URL]
    if _SHARED is None:
        _SHARED = start()
        atexit.register(stop, _SHARED)
    return _SHARED.url


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["start"]:
            server = start(durable="--durable" in args)
            print(f"PG_URL={server.url}\nPG_PID={server.pid}\nPG_DIR={server.folder}")
            return 0
        if args[:1] == ["stop"] and len(args) == 2:
            stop(args[1])
            return 0
    except (StorageError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("usage: scripts/postgres.sh start [--durable] | stop <PID or folder>",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())


@contextmanager
def temporary_schema(url: str, prefix: str, *, also: str = "") -> Iterator[str]:
    """A URL whose connections use a fresh, empty schema (then `also`, e.g.
    `public` for extension types), dropped afterwards: one server, isolated tests."""
    import psycopg

    schema = f"{prefix}{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    path = f"{schema},{also}" if also else schema
    separator = "&" if "?" in url else "?"
    try:
        yield f"{url}{separator}options=-csearch_path%3D{path}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
