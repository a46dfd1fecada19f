"""`flowforge users create` prints the key once, alone on its last line;
`flowforge serve` serves it on loopback and stops by PID."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

FLOWFORGE = str(Path(sys.executable).parent / "flowforge")


def _cli(*args: str, db: str) -> subprocess.CompletedProcess:
    return subprocess.run([FLOWFORGE, *args, "--db", db], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "200"})


def test_users_create_prints_the_key_alone_on_its_last_line(tmp_path):
    db = f"sqlite:///{tmp_path / 'users.db'}"
    created = _cli("users", "create", "carol", db=db)
    admin = _cli("users", "create", "root", "--admin", db=db)
    duplicate = _cli("users", "create", "carol", db=db)
    listed = _cli("users", "list", db=db)
    assert created.returncode == 0, created.stderr
    key = created.stdout.rstrip("\n").splitlines()[-1]
    assert key.startswith("ff_") and " " not in key and len(key) > 40
    assert key not in listed.stdout and key[:10] in listed.stdout
    assert "admin" in admin.stdout
    assert duplicate.returncode == 1 and "already exists" in duplicate.stderr
    assert "Traceback" not in duplicate.stderr
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("users.db*"))
    assert key.encode() not in raw                    # only the hash is stored


def test_users_create_refuses_a_bad_name_clearly(tmp_path):
    result = _cli("users", "create", "two words", db=f"sqlite:///{tmp_path / 'u.db'}")
    assert result.returncode == 2 and "letters, digits" in result.stderr


def test_serve_answers_with_a_created_key_and_refuses_without(tmp_path):
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    key = _cli("users", "create", "dana", db=db).stdout.splitlines()[-1]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([FLOWFORGE, "serve", "--port", str(port), "--db", db,
                                "--log-level", "warning"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(150):
            try:
                if httpx.get(f"{base}/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        me = httpx.get(f"{base}/api/me", headers={"Authorization": f"Bearer {key}"})
        anonymous = httpx.get(f"{base}/api/runs")
        # An idle connection outlives clients' own pool expiry (httpx: 5 s), so a
        # client never reuses one the server is closing at that very moment.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("GET", "/health")
            first = conn.getresponse()
            first.read()
            used = conn.sock
            time.sleep(6)
            conn.request("GET", "/health")        # raises if the server closed it
            second = conn.getresponse()
            second.read()
            same_connection = conn.sock is used
        finally:
            conn.close()
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    assert me.status_code == 200 and me.json()["name"] == "dana"
    assert anonymous.status_code == 401
    assert (first.status, second.status, same_connection) == (200, 200, True)


def test_serve_explains_a_bad_database_url(tmp_path):
    result = subprocess.run([FLOWFORGE, "serve", "--db", "mysql://nowhere/db"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "unsupported database URL" in result.stderr and "Traceback" not in result.stderr
