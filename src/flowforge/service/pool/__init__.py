"""Runs on a pool of workers: Celery messages, with Redis (or any Celery
broker) as the queue and the run storage (PostgreSQL across machines, SQLite
on one) as the state; a worker on Redis takes its messages on its runs' loop
(`redis_consumer`), on another broker it is a Celery worker.  No second
engine: a worker runs a queued run with `resume`, the same code that
finishes a run cut off by a crash.

    FLOWFORGE_BROKER_URL=redis://127.0.0.1:6379/0 flowforge worker --concurrency 16
    flowforge run flow.yaml --queue            # or `flowforge serve --workers celery`

This package is the pool's one door: the server, the CLI and the workers
import from here, never from its modules, which import each other one way
only (tests/workers/test_pool_shape.py walks them):

    broker      the broker, the queue, the Celery app, sending a run's id
    loop        a worker process's one event loop, shared by its runs
    queued      how a queued run must run (its `run_queued` event)
    enqueue     enqueue: store the run `queued`, send its id
    follow      follow: a handle on a pool run, its stored result
    owed        owed webhooks, delivered by whoever sees the run ended first
    waiting     a waiting run decided or due goes back to its queue
    schedules   triggers fire, exactly once across schedulers
    work        what a worker does with a message
    redis_consumer  a worker on Redis takes its messages on the runs' loop
    reaper      reap: runs whose lease lapsed, lost messages, due runs,
                schedules and owed webhooks, every REAP_EVERY seconds

How a run travels: `enqueue` stores it and sends its id; a worker takes the
id, takes the run's lease (the compare-and-set on the row that stops two
processes from running one run) and runs it on its process's loop; its
events are stored as they happen, so SSE and WebSocket clients of any server
see them.  A run that waits frees the worker.  Cancel is the row's cancel
mark.  A worker killed at any point: its messages were not acknowledged
(a message is acknowledged when its run ends or waits), so they come back
after the visibility timeout, and one reaper per lapse sends runs whose lease
lapsed ahead of the new runs (`reaper`); the next worker resumes from the
checkpoints, so what succeeded never runs again.  A broker that restarts is
reconnected to (`broker`, `redis_consumer`).
"""

from flowforge.service.pool.broker import (BROKER_ENV, DEFAULT_QUEUE, QUEUE_ENV, TASK_NAME,
                                           QueueError, broker_url, celery_app, default_queue,
                                           is_redis, require_celery, visibility_timeout)
from flowforge.service.pool.enqueue import enqueue
from flowforge.service.pool.follow import QueuedHandle, start_queued, stored_result
from flowforge.service.pool.loop import process_loop
from flowforge.service.pool.owed import deliver_owed, deliver_owed_webhooks, deliver_when_ended
from flowforge.service.pool.queued import born_on_pool
from flowforge.service.pool.reaper import REAP_EVERY, reap, start_reaper
from flowforge.service.pool.redis_consumer import RedisConsumer
from flowforge.service.pool.schedules import GRACE, fire_due, list_schedules
from flowforge.service.pool.waiting import decide_on_pool, requeue_due, requeue_waiting
from flowforge.service.pool.work import prepare_worker, work, worker_app

__all__ = ["BROKER_ENV", "DEFAULT_QUEUE", "QUEUE_ENV", "TASK_NAME", "QueueError", "broker_url",
           "celery_app", "require_celery", "default_queue", "visibility_timeout", "is_redis",
           "enqueue",
           "QueuedHandle", "start_queued", "stored_result", "process_loop", "deliver_owed",
           "deliver_owed_webhooks", "deliver_when_ended", "born_on_pool", "REAP_EVERY", "reap",
           "start_reaper", "RedisConsumer", "GRACE", "fire_due", "list_schedules", "decide_on_pool",
           "requeue_due", "requeue_waiting", "prepare_worker", "work", "worker_app"]
