"""One migration runner for every store (`storage/migrate.py`): a database
made by the old per-store runners opens without running a step again and gets
only the steps it lacks, on each store (runs, block registry, knowledge) and
each back end; two processes opening a new database at once apply each step
once."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import pytest

from flowforge.knowledge import store_postgres as knowledge_postgres
from flowforge.knowledge import store_sqlite as knowledge_sqlite
from flowforge.knowledge.store import knowledge_store_from_url
from flowforge.registry import block_store_from_url
from flowforge.registry import store_sqlite as registry_sqlite
from flowforge.registry import store_postgres as registry_postgres
from flowforge.storage import migrate, storage_from_url
from flowforge.storage.migrate import Migration
from flowforge.storage.migrations import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS
from flowforge.storage.postgres import PostgresStorage
from flowforge.storage.sqlite import SQLiteStorage
from tests.knowledge.conftest import pgvector_schema_url, pgvector_url  # noqa: F401

# The record of applied steps as each old runner created it: (table, columns).
OLD_RECORDS = {
    ("runs", "sqlite"): ("schema_migrations", "name TEXT PRIMARY KEY, applied_at REAL NOT NULL"),
    ("runs", "postgres"): ("schema_migrations",
                           "name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL"),
    ("registry", "sqlite"): ("registry_schema",
                             "name TEXT PRIMARY KEY, applied_at REAL NOT NULL"),
    ("registry", "postgres"): ("registry_schema",
                               "name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL"),
    ("knowledge", "sqlite"): ("kb_schema", "name TEXT PRIMARY KEY, applied_at REAL"),
    ("knowledge", "postgres"): ("kb_schema", "name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION"),
}
STEPS = {
    ("runs", "sqlite"): SQLITE_MIGRATIONS, ("runs", "postgres"): POSTGRES_MIGRATIONS,
    ("registry", "sqlite"): registry_sqlite.REGISTRY_MIGRATIONS,
    ("registry", "postgres"): registry_postgres.POSTGRES_REGISTRY_MIGRATIONS,
    ("knowledge", "sqlite"): knowledge_sqlite._MIGRATIONS,
    ("knowledge", "postgres"): knowledge_postgres._MIGRATIONS,
}
STORES = [(store, backend) for store in ("runs", "registry", "knowledge")
          for backend in ("sqlite", "postgres")]


@pytest.fixture
def url(request, tmp_path):
    store, backend = request.param
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'old.db'}"
    return request.getfixturevalue("pgvector_schema_url" if store == "knowledge"
                                   else "postgres_schema_url")


def _connect(url: str):
    if url.startswith("sqlite:///"):
        return sqlite3.connect(url[len("sqlite:///"):], isolation_level=None)
    import psycopg
    return psycopg.connect(url, autocommit=True)


def _old_database(url: str, key: tuple[str, str], steps: list[Migration]) -> None:
    """What the old runner of this store left: its record table and `steps`
    applied, each recorded by name with the time."""
    table, columns = OLD_RECORDS[key]
    mark = "?" if url.startswith("sqlite") else "%s"
    conn = _connect(url)
    try:
        if key == ("knowledge", "postgres"):
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} ({columns})")
        for number, step in enumerate(steps):
            for statement in step.statements:
                conn.execute(statement)
            conn.execute(f"INSERT INTO {table} VALUES ({mark}, {mark})",
                         (step.name, 1000.0 + number))
    finally:
        conn.close()


def _record(url: str, key: tuple[str, str]) -> list[tuple]:
    conn = _connect(url)
    try:
        return [tuple(row) for row in conn.execute(
            f"SELECT name, applied_at FROM {OLD_RECORDS[key][0]} ORDER BY name").fetchall()]
    finally:
        conn.close()


async def _open_and_close(store: str, url: str) -> None:
    if store == "registry":
        block_store_from_url(url).close()
        return
    opened = storage_from_url(url) if store == "runs" else knowledge_store_from_url(url)
    await opened.open()
    await opened.close()


@pytest.mark.parametrize("url", STORES, indirect=True, ids=[f"{s}-{b}" for s, b in STORES])
async def test_an_old_database_opens_without_running_a_step_again(url, request):
    key = request.node.callspec.params["url"]
    steps = STEPS[key]
    _old_database(url, key, steps)
    before = _record(url, key)
    assert [name for name, _ in before] == sorted(step.name for step in steps)
    await _open_and_close(key[0], url)          # a step run again would fail here
    await _open_and_close(key[0], url)
    assert _record(url, key) == before          # nothing recorded again, times kept


@pytest.mark.parametrize("url", STORES, indirect=True, ids=[f"{s}-{b}" for s, b in STORES])
async def test_an_old_database_gets_only_the_steps_it_lacks(url, request):
    key = request.node.callspec.params["url"]
    steps = STEPS[key]
    _old_database(url, key, steps[:-1])
    before = _record(url, key)
    started = time.time()
    await _open_and_close(key[0], url)
    after = _record(url, key)
    added = [row for row in after if row not in before]
    assert [name for name, _ in added] == [steps[-1].name]
    assert added[0][1] >= started
    assert len(after) == len(steps)


# -- two processes open a new database at once -----------------------------------------

_ONCE = Migration("9999_applied_once", ("CREATE TABLE applied_once (n INTEGER)",
                                        "INSERT INTO applied_once VALUES (1)"))


def _meet_after_first_read(monkeypatch, meet) -> None:
    """Both openers read the record (every step pending) before either writes."""
    seen: set[int] = set()
    for cls in (migrate.SQLiteSteps, migrate.PostgresSteps):
        def patched(original):
            async def applied(self):
                found = await original(self)
                if id(self) not in seen:
                    seen.add(id(self))
                    await meet()
                return found
            return applied
        monkeypatch.setattr(cls, "applied", patched(cls.applied))


def test_two_processes_opening_a_new_sqlite_database_apply_each_step_once(tmp_path,
                                                                          monkeypatch):
    barrier = threading.Barrier(2, timeout=20)

    async def meet():
        barrier.wait()
    _meet_after_first_read(monkeypatch, meet)
    path = tmp_path / "new.db"
    failures: list[BaseException] = []

    def open_one():
        async def go():
            store = SQLiteStorage(path, migrations=[*SQLITE_MIGRATIONS, _ONCE])
            await store.open()
            await store.close()
        try:
            asyncio.run(go())
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM applied_once").fetchone()[0] == 1
    names = [row[0] for row in db.execute("SELECT name FROM schema_migrations")]
    assert sorted(names) == sorted(step.name for step in [*SQLITE_MIGRATIONS, _ONCE])


async def test_two_servers_opening_a_new_postgres_database_apply_each_step_once(
        postgres_schema_url, monkeypatch):
    barrier = asyncio.Barrier(2)

    async def meet():
        await asyncio.wait_for(barrier.wait(), 20)
    _meet_after_first_read(monkeypatch, meet)
    stores = [PostgresStorage(postgres_schema_url, migrations=[*POSTGRES_MIGRATIONS, _ONCE])
              for _ in range(2)]
    try:
        await asyncio.gather(*(store.open() for store in stores))
        rows = await stores[0]._sql_rows("SELECT count(*) AS n FROM applied_once")
        assert rows[0]["n"] == 1
        names = await stores[0]._sql_rows("SELECT name FROM schema_migrations")
        assert sorted(row["name"] for row in names) == \
            sorted(step.name for step in [*POSTGRES_MIGRATIONS, _ONCE])
    finally:
        for store in stores:
            await store.close()
