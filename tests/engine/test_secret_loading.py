"""Runs of one user starting together share one read of that user's secrets,
and a secret set or deleted is seen by every run that starts after it."""

from __future__ import annotations

import asyncio

from cryptography.fernet import Fernet

import flowforge
from flowforge.service.secrets import delete_secret, set_secret
from flowforge.storage.sqlite import SQLiteStorage
from tests.echo_server import echo_server, sending

def document(url: str) -> dict:
    """The secret goes where a credential goes (an http block's header), which
    the echo server sends back: what the run loaded."""
    return {"id": "echo", "blocks": [sending("a", url, "got-{{secrets.TOKEN}}")]}


async def test_runs_starting_together_read_the_secrets_once_and_see_changes(
        tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY", Fernet.generate_key().decode())
    storage = SQLiteStorage(tmp_path / "runs.db")
    await storage.open()
    reads = 0
    read = storage.secret_ciphertexts

    async def counted(user_id: str):
        nonlocal reads
        reads += 1
        return await read(user_id)

    monkeypatch.setattr(storage, "secret_ciphertexts", counted)
    await set_secret(storage, "ann", "TOKEN", "tok-first-value")
    with echo_server() as url:
        results = await asyncio.gather(*(flowforge.run(document(url), user="ann",
                                                       storage=storage) for _ in range(50)))
        assert reads == 1
        assert {r.results["a"]["data"]["auth"] for r in results} == {"got-***"}  # redacted

        await delete_secret(storage, "ann", "TOKEN")
        after = await flowforge.run(document(url), user="ann", storage=storage)
        assert after.results["a"]["data"]["auth"] == "got-" and reads == 2
        other = await flowforge.run(document(url), user="bob", storage=storage)
        assert other.results["a"]["data"]["auth"] == "got-" and reads == 3
    await storage.close()
