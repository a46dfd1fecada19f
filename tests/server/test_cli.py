"""`flowforge users create` prints the key once, alone on its last line;
`flowforge serve` serves it on loopback and stops by PID."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests import in_process
from tests.echo_server import echo_server, sending
from tests.server.conftest import serve_process

FLOWFORGE = str(Path(sys.executable).parent / "flowforge")


def _cli(*args: str, db: str) -> subprocess.CompletedProcess:
    """A command on the database `db`, run in this process (tests/in_process.py)."""
    return in_process.flowforge(*args, "--db", db, env={"COLUMNS": "200"})


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
    assert duplicate.returncode == 2 and "already exists" in duplicate.stderr   # taken: 2
    assert "Traceback" not in duplicate.stderr
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("users.db*"))
    assert key.encode() not in raw                    # only the hash is stored


def test_users_create_refuses_a_bad_name_clearly(tmp_path):
    result = _cli("users", "create", "two words", db=f"sqlite:///{tmp_path / 'u.db'}")
    assert result.returncode == 2 and "letters, digits" in result.stderr


def test_serve_answers_with_a_created_key_and_refuses_without(tmp_path):
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    key = _cli("users", "create", "dana", db=db).stdout.splitlines()[-1]
    process, base = serve_process([FLOWFORGE, "serve", "--db", db, "--log-level", "warning"],
                                  dict(os.environ))
    port = int(base.rsplit(":", 1)[1])
    try:
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
    assert result.returncode == 2                     # a usage error, as everywhere
    assert "unsupported database URL" in result.stderr and "Traceback" not in result.stderr


def _cli_in(*args: str, db: str, stdin: str = "", env: dict | None = None
            ) -> subprocess.CompletedProcess:
    """`_cli` reading `stdin`, with `env` laid over the environment."""
    return in_process.flowforge(*args, "--db", db, input=stdin,
                                env={"COLUMNS": "200", **(env or {})})


def test_users_grant_and_secrets_from_the_command_line(tmp_path):
    db = f"sqlite:///{tmp_path / 'access.db'}"
    keyfile = {"FLOWFORGE_SECRET_KEY_FILE": str(tmp_path / "secret.key")}
    assert _cli("users", "create", "dana", db=db).returncode == 0
    granted = _cli("users", "grant", "dana", "server_files", db=db)
    again = _cli("users", "grant", "dana", "server_files", db=db)
    role = _cli("users", "grant", "role:user", "private_network", db=db)
    typo = _cli("users", "grant", "dana", "server_file", db=db)
    nobody = _cli("users", "grant", "erin", "server_files", db=db)
    listed = _cli("users", "grants", db=db)
    assert granted.returncode == 0 and "granted server_files to user 'dana'" in granted.stdout
    assert "already had" in again.stdout and role.returncode == 0
    assert typo.returncode == 2 and "did you mean 'server_files'" in typo.stderr
    assert nobody.returncode == 1 and "no user 'erin'" in nobody.stderr
    assert "user dana" in listed.stdout and "role user" in listed.stdout
    assert _cli("users", "ungrant", "dana", "server_files", db=db).returncode == 0
    assert _cli("users", "ungrant", "dana", "server_files", db=db).returncode == 1

    value = "sk-from-stdin-0123456789"
    stored = _cli_in("secrets", "set", "TEAM_TOKEN", "--user", "dana", db=db,
                     stdin=value + "\n", env=keyfile)
    assert stored.returncode == 0, stored.stderr
    names = _cli_in("secrets", "list", "--user", "dana", db=db, env=keyfile)
    assert "TEAM_TOKEN" in names.stdout and value not in names.stdout
    bad = _cli_in("secrets", "set", "two words", db=db, env=keyfile)
    assert bad.returncode == 2 and "secret name" in bad.stderr
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("access.db*"))
    assert value.encode() not in raw
    assert (tmp_path / "secret.key").stat().st_mode & 0o777 == 0o600

    # The local user's runs read their secrets, and print them as ***.
    workflow = tmp_path / "w.json"
    _cli_in("secrets", "set", "T", db=db, stdin="local-secret-value", env=keyfile)
    with echo_server() as url:          # a secret goes where a credential goes: a header
        workflow.write_text(json.dumps({"id": "w", "blocks": [sending("a", url, "{{secrets.T}}")]}))
        ran = subprocess.run([FLOWFORGE, "run", str(workflow), "--json"], capture_output=True,
                             text=True, timeout=60, env={**os.environ, **keyfile,
                                                         "FLOWFORGE_DATABASE_URL": db})
    assert ran.returncode == 0, ran.stderr
    assert '"auth": "***"' in ran.stdout and "local-secret-value" not in ran.stdout
    assert _cli_in("secrets", "delete", "T", db=db, env=keyfile).returncode == 0
    assert _cli_in("secrets", "delete", "T", db=db, env=keyfile).returncode == 1


def test_users_revoke_explains_a_too_short_prefix(tmp_path):
    db = f"sqlite:///{tmp_path / 'users.db'}"
    key = _cli("users", "create", "fay", db=db).stdout.rstrip("\n").splitlines()[-1]
    short = _cli("users", "revoke", key[:4], db=db)
    assert short.returncode == 2 and "too short" in short.stderr and "at least 6" in short.stderr
    done = _cli("users", "revoke", key[:10], db=db)
    assert done.returncode == 0 and "revoked key" in done.stdout


def test_serve_imports_functions_as_run_and_worker_do(tmp_path):
    """A `type: function` block works over HTTP as it does on the CLI (issue 25)."""
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    key = _cli("users", "create", "dana", db=db).stdout.splitlines()[-1]
    plugin = tmp_path / "team_functions.py"
    plugin.write_text("import flowforge\n\n@flowforge.function('served_twice')\n"
                      "def served_twice(n: int) -> dict:\n    return {'value': n * 2}\n")
    document = {"id": "twice", "inputs": {"n": {"type": "integer"}}, "blocks": [
        {"id": "double", "type": "function",
         "with": {"function": "served_twice", "args": {"n": "{{input.n}}"}}}]}
    missing = subprocess.run([FLOWFORGE, "serve", "--import", str(tmp_path / "nope.py"),
                              "--db", db], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "--import" in missing.stderr and "no such file" in \
        missing.stderr
    process, base = serve_process([FLOWFORGE, "serve", "--db", db, "--import", str(plugin),
                                   "--log-level", "warning"], dict(os.environ))
    try:
        headers = {"Authorization": f"Bearer {key}"}
        saved = httpx.post(f"{base}/api/workflows", json=document, headers=headers)
        ran = httpx.post(f"{base}/api/workflows/twice/runs?wait=true",
                         json={"inputs": {"n": 21}}, headers=headers, timeout=30)
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    assert saved.status_code == 201, saved.text
    assert ran.status_code == 200 and ran.json()["status"] == "succeeded", ran.text
    assert ran.json()["results"]["double"] == {"value": 42}
