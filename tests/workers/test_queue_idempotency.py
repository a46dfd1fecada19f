"""`enqueue` with an idempotency key (what `flowforge serve --workers celery`
calls): a key the user has used queues nothing - no second row, no second
message for the workers."""

from __future__ import annotations

import uuid

import pytest

from flowforge.service.pool import enqueue
from flowforge.storage import storage_from_url
from flowforge.storage.base import IdempotencyKeyTaken

DOC = {"id": "one", "blocks": [{"id": "a", "type": "set", "with": {"v": 1}}]}


async def test_a_used_key_queues_nothing(redis_url, tmp_path):
    import redis

    database = f"sqlite:///{tmp_path / 'runs.db'}"
    queue = f"test-{uuid.uuid4().hex[:8]}"
    first = await enqueue(DOC, {}, user="ann", storage=database, broker=redis_url, queue=queue,
                          idempotency=("k-1", "print"))
    with pytest.raises(IdempotencyKeyTaken):
        await enqueue(DOC, {}, user="ann", storage=database, broker=redis_url, queue=queue,
                      idempotency=("k-1", "print"))
    other = await enqueue(DOC, {}, user="bob", storage=database, broker=redis_url, queue=queue,
                          idempotency=("k-1", "print"))
    assert other != first
    async with storage_from_url(database) as store:
        assert [r["run_id"] for r in await store.list_runs(user_id="ann")] == [first]
        assert (await store.run_for_idempotency_key("ann", "k-1"))["run_id"] == first
    broker = redis.Redis.from_url(redis_url)
    # kombu keeps a list per priority level, named after the queue
    waiting = sum(broker.llen(name) for name in broker.keys(f"{queue}*")
                  if broker.type(name) == b"list")
    assert waiting == 2                                          # ann's first run, bob's
