"""The broker side of the pool: which broker and queue, the Celery application,
and sending a run's id.  Everything else about a run is in the run storage;
a message only says "look at run X" (and, for a takeover, which handoff it
carries: `reaper`).

A worker must outlive its broker: Redis restarted (or unreachable a while)
under a worker with runs in flight is a connection to make again, not a
reason to exit.  Celery retries the broker connection for ever
(`broker_connection_max_retries=None`) and `worker_cancel_long_running_tasks_
on_connection_loss` stays off, so runs in flight go on while it reconnects;
their acknowledgements are lost with the old connection, which is harmless:
a run's message is only ever a pointer, and the lease decides who runs it.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from flowforge.errors import FlowforgeError

__all__ = ["BROKER_ENV", "DEFAULT_QUEUE", "QUEUE_ENV", "TASK_NAME", "QUEUED_PRIORITY",
           "TAKEOVER_PRIORITY", "QueueError", "broker_url", "celery_app", "require_celery",
           "default_queue", "send_run", "visibility_timeout", "is_redis"]

BROKER_ENV = "FLOWFORGE_BROKER_URL"
DEFAULT_QUEUE = "flowforge"
QUEUE_ENV = "FLOWFORGE_QUEUE"          # the queue runs go to when none is named
TASK_NAME = "flowforge.run"
#: A new run's message priority.  Redis hands out a queue's lower numbers first, so
#: a run taken over (or a waiting run that is due again) goes ahead of new runs.
QUEUED_PRIORITY = 3
TAKEOVER_PRIORITY = 0


class QueueError(FlowforgeError):
    """The worker pool cannot be used as asked (no broker configured, a bad URL)."""


def default_queue() -> str:
    return os.environ.get(QUEUE_ENV) or DEFAULT_QUEUE


def visibility_timeout() -> float:
    """Seconds after which a message a worker took and never acknowledged goes back
    to the queue (FLOWFORGE_QUEUE_VISIBILITY, default 60).  A whole worker killed
    with the messages it had taken is recovered this way; a run still running
    when its message comes back is not run twice: the copy finds the lease held
    and is dropped."""
    try:
        value = float(os.environ.get("FLOWFORGE_QUEUE_VISIBILITY") or 60.0)
    except ValueError:
        return 60.0
    return value if value >= 1.0 else 60.0


def is_redis(url: str) -> bool:
    """Whether the broker is Redis: its workers take their messages themselves
    (`redis_consumer`), and its senders share one client per channel."""
    return url.startswith(("redis://", "rediss://"))


def broker_url(url: str | None = None) -> str:
    found = url or os.environ.get(BROKER_ENV)
    if not found:
        raise QueueError(f"no broker configured: set {BROKER_ENV} (e.g. "
                         f"redis://127.0.0.1:6379/0) or pass --broker; without one, runs "
                         f"run in this process as usual")
    if not found.startswith(("redis://", "rediss://", "amqp://", "memory://")):
        raise QueueError(f"broker URL {found!r}: use redis://HOST:PORT/DB (or amqp://...)")
    return found


#: How long a sender (a server, the CLI, a reaper) tries a broker that is away
#: before it says so (~2 s): a reaper tries again at its next look anyway.
_SEND_RETRY = {"max_retries": 3, "interval_start": 0.2, "interval_step": 0.5,
               "interval_max": 1.0}


_NO_CELERY = "the worker pool needs Celery: pip install 'flowforge[workers]'"


def require_celery() -> None:
    """Say now, not at the first message to send, that Celery is missing: a
    worker on Redis loads it only then (a reaper's takeover, a due run)."""
    import importlib.util

    if importlib.util.find_spec("celery") is None:
        raise QueueError(_NO_CELERY)


@lru_cache(maxsize=8)
def celery_app(url: str | None = None) -> Any:
    """The Celery application for this broker (a worker adds the task that runs
    a run to it: `work.worker_app`; a sender only needs the task's name)."""
    try:
        from celery import Celery
    except ImportError:
        raise QueueError(_NO_CELERY) from None
    app = Celery("flowforge", broker=broker_url(url))
    if is_redis(app.conf.broker_url):
        from flowforge.service.pool.redis_channel import reuse_clients
        reuse_clients()                       # senders and workers alike (redis_channel)
    app.conf.update(
        task_acks_late=True,                  # a message is done only when the run is
        task_reject_on_worker_lost=True,      # a killed child puts its message back
        worker_prefetch_multiplier=1,         # a busy worker does not hoard runs
        task_default_queue=default_queue(), task_ignore_result=True,
        task_serializer="json", accept_content=["json"],
        worker_hijack_root_logger=False,
        # a broker that goes away is waited for, at start and later, for ever
        broker_connection_retry_on_startup=True, broker_connection_retry=True,
        broker_connection_max_retries=None,
        worker_cancel_long_running_tasks_on_connection_loss=False,
        broker_connection_timeout=4.0,
        broker_transport_options={
            "visibility_timeout": visibility_timeout(),
            # unacknowledged messages are looked for every 5 s (Kombu's default sweep
            # is every ~100 s), so a lost worker's runs come back after the timeout
            "unacked_restore_interval": 5, "unacked_restore_throttle": 1,
            # a dead connection is found by a ping, not by waiting on a dead socket
            "health_check_interval": 5, "socket_keepalive": True,
            "socket_connect_timeout": 4, "retry_on_timeout": True,
            # a connection for sending while Redis is away is tried for ~2 s, then refused
            **_SEND_RETRY})
    return app


def send_run(run_id: str, database: str, *, queue: str | None = None,
             priority: int = QUEUED_PRIORITY, handoff: str | None = None,
             broker: str | None = None) -> None:
    """Put the run's id on its queue (`handoff`: the lease token a reaper left on
    the row, which lets the worker that takes this message, and only it, take
    the run over).  A broker that cannot be reached: QueueError."""
    app = celery_app(broker)
    args = [run_id, database] + ([handoff] if handoff else [])
    try:
        app.send_task(TASK_NAME, args=args, queue=queue or default_queue(),
                      priority=priority, retry=True, retry_policy=_SEND_RETRY)
    except QueueError:
        raise
    except Exception as exc:  # noqa: BLE001 - kombu's and redis-py's errors, whatever they are
        raise QueueError(f"run {run_id}: the broker could not be reached "
                         f"({type(exc).__name__}: {exc})") from None
