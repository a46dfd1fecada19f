"""Storage: one interface, one module per back end, chosen by URL.

`open_storage()` with no argument uses `FLOWFORGE_DATABASE_URL`, else a
SQLite file in the user's data directory."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir

from flowforge.errors import StorageError
from flowforge.storage.base import Migration, Storage

__all__ = ["Migration", "Storage", "default_database_url", "storage_from_url"]


def default_database_url() -> str:
    url = os.environ.get("FLOWFORGE_DATABASE_URL")
    if url:
        return url
    return f"sqlite:///{Path(user_data_dir('flowforge')) / 'flowforge.db'}"


def storage_from_url(url: str | None = None) -> Storage:
    """A (not yet opened) storage for `url`: `sqlite:///file.db`, `sqlite://:memory:`,
    a bare path, or `postgresql://user@host/db`."""
    url = url or default_database_url()
    if url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        try:
            from flowforge.storage.postgres import PostgresStorage
        except ImportError as exc:
            raise StorageError(f"PostgreSQL storage needs psycopg: pip install "
                               f"'flowforge[postgres]' ({exc})") from None
        return PostgresStorage(url)
    if url.startswith("sqlite:"):
        # SQLAlchemy's convention: sqlite:///relative.db, sqlite:////absolute.db
        path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else ":memory:"
        from flowforge.storage.sqlite import SQLiteStorage
        return SQLiteStorage(path or ":memory:")
    if "://" in url:
        raise StorageError(f"unsupported database URL '{url}': use sqlite:///path.db or "
                           f"postgresql://user@host/db")
    from flowforge.storage.sqlite import SQLiteStorage
    return SQLiteStorage(url)
