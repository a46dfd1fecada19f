"""Kombu's Redis channel, made to stop building a Redis client per command.

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

__all__ = ["reuse_clients"]


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
