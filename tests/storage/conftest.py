"""The `storage` fixture: every conformance test runs once per back end.

PostgreSQL is a throwaway server started by `scripts/postgres.sh` logic
(`flowforge.storage.testing`) once per test run, shared by the pytest workers
(tests/shared_servers.py); each test gets a schema
of its own, so tests never see each other's rows and every test also
exercises the migrations on an empty database."""

from __future__ import annotations


import pytest

from flowforge.storage import storage_from_url


@pytest.fixture(scope="session")
def postgres_url() -> str:
    from tests.shared_servers import postgres_url
    return postgres_url()


@pytest.fixture
def postgres_schema_url(postgres_url: str):
    """A URL whose connections use a fresh, empty schema; dropped afterwards."""
    from flowforge.storage.testing import temporary_schema

    with temporary_schema(postgres_url, "t_") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def storage_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'flowforge.db'}"
    return request.getfixturevalue("postgres_schema_url")


@pytest.fixture
async def storage(storage_url: str):
    store = storage_from_url(storage_url)
    await store.open()
    store.poll_interval = 0.05
    try:
        yield store
    finally:
        await store.close()
