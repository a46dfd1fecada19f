"""The throwaway PostgreSQL and Redis servers the tests and benches start pick a
free port, which is free only until someone binds it: with four workers
starting servers, another one can take it first.  The server then moves to
another free port instead of failing the test or, worse, letting it talk to
someone else's server on that port."""

from __future__ import annotations

import socket

import psycopg
import pytest

from flowforge.storage import testing
from tests.script_modules import script


def _held() -> socket.socket:
    """A socket listening on a loopback port: the port another server took."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_postgres_moves_to_another_port_when_its_pick_is_taken(monkeypatch):
    with _held() as taken:
        port = taken.getsockname()[1]
        picks = iter([port])
        real = testing._free_port
        monkeypatch.setattr(testing, "_free_port", lambda: next(picks, None) or real())
        server = testing.start()
        try:
            assert f":{port}/" not in server.url
            with psycopg.connect(server.url) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            testing.stop(server)


def test_redis_moves_to_another_port_and_answers_as_itself():
    redis_server = script("redis_server")
    with _held() as taken, redis_server.RedisServer() as first:
        second = redis_server.RedisServer()
        second.port = first.port                # picked, then taken by `first`
        with second:
            assert second.port != first.port
        chosen = redis_server.RedisServer(port=taken.getsockname()[1])
        with pytest.raises(RuntimeError, match="did not answer"):   # a port asked for stays
            chosen.start()
