"""Database URLs are checked: a typo is a clear error naming the accepted
forms, never an in-memory database that forgets every run or a file named
after the typo; an unreachable PostgreSQL fails within seconds, in one line."""

from __future__ import annotations

import socket
import time

import pytest

from flowforge.errors import StorageError
from flowforge.storage import storage_from_url
from flowforge.storage.sqlite import SQLiteStorage


@pytest.mark.parametrize("url", ["sqlite://tmp/x.db", "bogus", "mysql://root@db/x",
                                 "sqlite:", "sqlite:///", "http://example.test/db"])
def test_a_malformed_database_url_is_refused_with_the_forms(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError) as caught:
        storage_from_url(url)
    assert "sqlite:///relative/path.db" in str(caught.value) and url in str(caught.value)
    assert list(tmp_path.iterdir()) == []          # nothing was created


@pytest.mark.parametrize("url, path", [("sqlite:///runs.db", "runs.db"),
                                       ("sqlite:////tmp/abs.db", "/tmp/abs.db"),
                                       ("sqlite://:memory:", ":memory:"),
                                       ("local/runs.sqlite", "local/runs.sqlite")])
def test_the_accepted_forms(url, path):
    storage = storage_from_url(url)
    assert isinstance(storage, SQLiteStorage) and storage.path == path


async def test_an_unreachable_postgresql_fails_fast_in_one_line():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()                                   # nothing listens there
    storage = storage_from_url(f"postgresql://flowforge@127.0.0.1:{port}/none")
    started = time.monotonic()
    with pytest.raises(StorageError) as caught:
        await storage.open()
    assert time.monotonic() - started < 8
    assert "cannot open the PostgreSQL database" in str(caught.value)
    assert "\n" not in str(caught.value)
