"""Runs of one user starting together share one read of that user's secrets,
and a secret set or deleted is seen by every run that starts after it."""

from __future__ import annotations

import asyncio

from cryptography.fernet import Fernet

import flowforge
from flowforge.service.secrets import delete_secret, set_secret
from flowforge.storage.sqlite import SQLiteStorage

DOCUMENT = {"id": "echo", "blocks": [
    {"id": "a", "type": "set", "with": {"seen": "got {{secrets.TOKEN}}"}}]}


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
    results = await asyncio.gather(*(flowforge.run(DOCUMENT, user="ann", storage=storage)
                                     for _ in range(50)))
    assert reads == 1
    assert {r.results["a"]["seen"] for r in results} == {"got ***"}     # loaded, redacted

    await delete_secret(storage, "ann", "TOKEN")
    after = await flowforge.run(DOCUMENT, user="ann", storage=storage)
    assert after.results["a"]["seen"] == "got " and reads == 2
    other = await flowforge.run(DOCUMENT, user="bob", storage=storage)
    assert other.results["a"]["seen"] == "got " and reads == 3
    await storage.close()
