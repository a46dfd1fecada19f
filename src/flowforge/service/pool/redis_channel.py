"""Kombu's Redis channel, made to fail like a lost connection when it is used
after its connection was collected.

When Redis goes away under a Celery worker (restarted, the network cut),
Celery's consumer collects the broken connection (kombu drops the
transport's `client`) and then closes it; closing the channel restores its
unacknowledged messages, which opens a new Redis pool from the transport's
client, which is gone: `AttributeError("'NoneType' object has no attribute
'hostname'")` in `Channel._connparams`.  Celery takes that for an
unrecoverable error and the worker stops (kombu 5.7, Celery 5.7).  Raised as
Redis's own ConnectionError instead, it is one of the errors Celery ignores
while closing a broken connection, and the consumer reconnects as it should.
The messages it could not restore are still in Redis's unacknowledged set
(the visibility timeout brings them back), or were lost with a Redis that
restarted empty (the reapers send those runs again).
"""

from __future__ import annotations

from typing import Any

__all__ = ["fail_as_connection_loss"]


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
