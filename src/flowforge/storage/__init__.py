"""Storage: one interface, one module per back end, chosen by URL.

`open_storage()` with no argument uses `FLOWFORGE_DATABASE_URL`, else a
SQLite file in the user's data directory."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir

from flowforge.errors import BadDatabaseURL, StorageError
from flowforge.storage.base import Migration, Storage

__all__ = ["Migration", "Storage", "default_database_url", "seconds_setting",
           "storage_from_url"]


def default_database_url() -> str:
    url = os.environ.get("FLOWFORGE_DATABASE_URL")
    if url:
        return url
    return f"sqlite:///{Path(user_data_dir('flowforge')) / 'flowforge.db'}"


def seconds_setting(name: str, default: float, waits: str) -> float:
    """The environment variable `name` as a number of seconds, `default` when
    unset; StorageError naming the fix when it is not one (`waits`: what it
    says, "a run waits for its database to come back")."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise StorageError(f"{name}={raw!r} is not a number of seconds: set it to how "
                           f"long {waits}, e.g. {name}={default:g}")
    return value


_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def storage_from_url(url: str | None = None) -> Storage:
    """A (not yet opened) storage for `url`: `sqlite:///relative.db`,
    `sqlite:////absolute.db`, `sqlite://:memory:`, a path to a `.db` /
    `.sqlite` file, or `postgresql://user@host/db`.  Anything else is a
    BadDatabaseURL naming the accepted forms: a typo must never become an
    in-memory database that forgets every run, or a file called `bogus`."""
    url = url or default_database_url()
    forms = ("use sqlite:///relative/path.db, sqlite:////absolute/path.db, "
             "sqlite://:memory: or postgresql://user@host/db")
    if url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        try:
            from flowforge.storage.postgres import PostgresStorage
        except ImportError as exc:
            raise StorageError(f"PostgreSQL storage needs psycopg: pip install "
                               f"'flowforge[postgres]' ({exc})") from None
        return PostgresStorage(url)
    from flowforge.storage.sqlite import SQLiteStorage
    if url.startswith("sqlite:"):
        # SQLAlchemy's convention: sqlite:///relative.db, sqlite:////absolute.db
        if url in ("sqlite://:memory:", "sqlite:///:memory:", "sqlite://"):
            return SQLiteStorage(":memory:")
        if not url.startswith("sqlite:///") or len(url) == len("sqlite:///"):
            raise BadDatabaseURL(f"database URL '{url}' names no file: {forms} (three slashes "
                               f"before a relative path, four before an absolute one)")
        return SQLiteStorage(url[len("sqlite:///"):])
    if "://" in url or ":" in url.split("/")[0]:
        raise BadDatabaseURL(f"unsupported database URL '{url}': {forms}")
    if not url.endswith(_SQLITE_SUFFIXES) and not Path(url).is_file():
        raise BadDatabaseURL(f"database URL '{url}' is neither a URL nor a SQLite file path "
                           f"(ending in .db, .sqlite or .sqlite3): {forms}")
    return SQLiteStorage(url)
