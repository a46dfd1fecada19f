"""Kombu's Redis channel, made to survive a lost connection and to stop
building a Redis client per command.

Failing like a lost connection (`fail_as_connection_loss`): when Redis goes
away under a Celery worker (restarted, the network cut), Celery's consumer
collects the broken connection (kombu drops the transport's `client`) and
then closes it; closing the channel restores its unacknowledged messages,
which opens a new Redis pool from the transport's client, which is gone:
`AttributeError("'NoneType' object has no attribute 'hostname'")` in
`Channel._connparams`.  Celery takes that for an unrecoverable error and the
worker stops (kombu 5.7, Celery 5.7).  Raised as Redis's own ConnectionError
instead, it is one of the errors Celery ignores while closing a broken
connection, and the consumer reconnects as it should.  The messages it could
not restore are still in Redis's unacknowledged set (the visibility timeout
brings them back), or were lost with a Redis that restarted empty (the
reapers send those runs again).

One client per channel (`reuse_clients`): kombu makes a new `redis.Redis`
for every command it sends outside its consumer (each message's
acknowledgement, the unacknowledged-set bookkeeping of each message taken,
each message sent), and redis-py 8 builds a new table of ~170 reply parsers
for each: measured, that was the largest part of the CPU a worker spent per
run outside the run.  A Redis client is safe to share between threads (each
command takes a connection from the pool), so the channel keeps one per
connection pool; a reconnect makes a new pool, hence a new client.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["fail_as_connection_loss", "reuse_clients"]


def fail_as_connection_loss() -> None:
    """Patch `kombu.transport.redis.Channel._connparams` (once per process)."""
    from kombu.transport import redis as transport

    channel = transport.Channel
    if getattr(channel, "_flowforge_fails_as_connection_loss", False):
        return
    original = channel._connparams

    def _connparams(self: Any, asynchronous: bool = False) -> Any:
        if self.connection is None or getattr(self.connection, "client", None) is None:
            raise transport.redis.exceptions.ConnectionError(
                "the broker connection was closed (reconnecting)")
        return original(self, asynchronous)

    channel._connparams = _connparams
    channel._flowforge_fails_as_connection_loss = True


def reuse_clients() -> None:
    """Patch `kombu.transport.redis.Channel.conn_or_acquire` (once per process)
    to hand out the channel's one client of its current pool."""
    from kombu.transport import redis as transport

    channel = transport.Channel
    if getattr(channel, "_flowforge_reuses_clients", False):
        return

    @contextmanager
    def conn_or_acquire(self: Any, client: Any = None) -> Iterator[Any]:
        if client:
            yield client
            return
        pool = self.pool
        kept = self.__dict__.get("_flowforge_client")
        if kept is None or kept.connection_pool is not pool:
            kept = self.__dict__["_flowforge_client"] = self._create_client()
        yield kept

    channel.conn_or_acquire = conn_or_acquire
    channel._flowforge_reuses_clients = True
