"""A worker process takes its runs from Redis on the runs' own event loop.

Why not Celery's consumer: a run message is only "look at run X", and the
run itself is a coroutine on the process's loop (`loop`).  Through Celery,
each message crossed three threads (Celery's consumer, a thread of its
`threads` pool blocked on `run_coroutine_threadsafe`, the loop) and paid
Celery's own handling (the unacknowledged-set bookkeeping, the request
object, the ack): measured, most of a worker's CPU per run outside the run
(bench/RESULTS.md, "Worker pool").  Here one asyncio task takes messages
(redis-py's `redis.asyncio`) and starts each as a task of `work` on the same
loop, up to `concurrency` at once.

Senders do not change: servers, `flowforge run --queue`, reapers and
schedules send Celery task messages through kombu (`broker.send_run`), and
this consumer reads kombu's Redis format as kombu writes it, so a Celery
worker and this one can share a queue:

- a queue is one Redis list per priority step (kombu's `PRIORITY_STEPS`
  0, 3, 6, 9): `queue` for 0, `queue\\x06\\x16N` for the others; a message
  is LPUSHed, and taken from the right; lower numbers go first (a takeover,
  priority 0, before new runs, 3), across every queue of `--queues`;
- a message is a JSON envelope whose `body` is the base64 of the Celery
  task's `[args, kwargs, embed]`, with `properties.delivery_tag`.

Nothing taken is lost with a killed worker: kombu's unacknowledged
bookkeeping is kept exactly.  A message is taken and recorded in the
`unacked` hash (`[message, exchange, routing_key]`) and the `unacked_index`
sorted set (the time it was taken) in one Lua script, atomically; it leaves
both when its run ends or waits (the ack).  A worker killed with messages
in hand leaves them there, and any worker's sweep (this one's, every
`RESTORE_EVERY` seconds, or a Celery worker's) puts a message back on its
queue once it is older than the visibility timeout, under kombu's
`unacked_mutex` as kombu does (held for at most `SWEEP_LOCK_SECONDS`, not
kombu's five minutes: a worker killed mid-sweep does not stop the others'
sweeps for long).  Only an idle worker, waiting for the
queue with BRPOP, records what BRPOP gave it a round trip later (as kombu
always did); a worker killed in that window lost a message, and the reaper
sends its run again once the queue is empty (`reaper`; tested in
tests/workers/test_lost_message.py).  One change from kombu: a message whose
run is still running is marked taken again at each sweep, so a run longer
than the visibility timeout is not handed to a second worker just to be
dropped there (the timeout counts from the last sign of life).

What Celery's worker did that this one does not: remote control and
inspection (`celery inspect`, `celery control`), task events and
heartbeats; nothing in flowforge used them (its workers ran
`--without-gossip --without-mingle`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from typing import Any, Awaitable, Callable, Iterable

__all__ = ["RedisConsumer", "PRIORITY_STEPS", "SEP", "UNACKED", "UNACKED_INDEX",
           "priority_key", "run_message"]

log = logging.getLogger("flowforge.queue")

#: kombu's Redis transport, as it writes: keep in step with kombu/transport/redis.py.
SEP = "\x06\x16"
PRIORITY_STEPS = (0, 3, 6, 9)
UNACKED, UNACKED_INDEX, UNACKED_MUTEX = "unacked", "unacked_index", "unacked_mutex"
#: How long a sweep holds kombu's `unacked_mutex` at most (seconds).  kombu's
#: own is 300 (`unacked_mutex_expire`): a worker killed in the middle of its
#: sweep (a sweep takes milliseconds) then held every worker's sweeps back for
#: five minutes, and the messages of a lost worker with them.  Sweeps that
#: overlap after it expired are safe: a message is put back under WATCH, once.
SWEEP_LOCK_SECONDS = 5.0

#: How long one BRPOP waits for a message (kombu's `brpop_timeout`): the most a
#: warm shutdown waits for the consumer to notice it.
WAIT = 1.0
#: Seconds between two sweeps of the unacknowledged messages (as the pool's
#: `unacked_restore_interval` for Celery workers).
RESTORE_EVERY = 5.0
#: Reconnecting to a broker that is away: first wait, longest wait (seconds).
RETRY_FIRST, RETRY_MOST = 0.5, 5.0


def priority_key(queue: str, priority: int) -> str:
    """The Redis list of `queue` holding messages of `priority` (kombu's `_q_for_pri`)."""
    step = max(step for step in PRIORITY_STEPS if step <= max(0, min(9, priority)))
    return f"{queue}{SEP}{step}" if step else queue


# KEYS: the lists to take from, in order, then unacked_index, unacked.
# ARGV: how many to take, the time, then each list's queue name (a message
# without delivery_info is recorded as routed to it).  A message is recorded
# with its own text, byte for byte, as kombu records `[message, exchange, rk]`.
_TAKE = """
local lists = #KEYS - 2
local want = tonumber(ARGV[1])
local taken = {}
for i = 1, lists do
  while #taken < want do
    local raw = redis.call('RPOP', KEYS[i])
    if not raw then break end
    local ok, message = pcall(cjson.decode, raw)
    local properties = ok and type(message) == 'table' and message['properties']
    local tag = type(properties) == 'table' and properties['delivery_tag']
    if type(tag) == 'string' then
      local info = properties['delivery_info']
      local exchange, routing_key = '', ARGV[2 + i]
      if type(info) == 'table' then
        if type(info['exchange']) == 'string' then exchange = info['exchange'] end
        if type(info['routing_key']) == 'string' then routing_key = info['routing_key'] end
      end
      redis.call('ZADD', KEYS[lists + 1], ARGV[2], tag)
      redis.call('HSET', KEYS[lists + 2], tag, '[' .. raw .. ', ' .. cjson.encode(exchange)
                 .. ', ' .. cjson.encode(routing_key) .. ']')
    end
    taken[#taken + 1] = raw
  end
  if #taken >= want then break end
end
return taken
"""


async def run_message(args: list[Any]) -> str:
    """Run one message's run on this process's loop (`work.work` with the
    process's open storage of the run's database): what `work` said."""
    from flowforge.service.pool.loop import process_loop
    from flowforge.service.pool.work import work

    run_id, database, handoff = (list(args) + [None, None])[:3]
    storage = await process_loop().storage(database)
    return await work(run_id, storage, handoff=handoff)


class RedisConsumer:
    """Takes run messages from `queues` of the Redis at `url` and runs each with
    `handle(args)` (default `run_message`), up to `concurrency` at once, on the
    loop `serve` runs on; `on_ready()` once it first reached Redis; `stop` for
    a warm shutdown."""

    def __init__(self, url: str, queues: Iterable[str], concurrency: int, *,
                 visibility: float | None = None, restore_every: float = RESTORE_EVERY,
                 handle: Callable[[list[Any]], Awaitable[Any]] | None = None,
                 task_name: str | None = None,
                 on_ready: Callable[[], None] | None = None) -> None:
        from flowforge.service.pool.broker import TASK_NAME, visibility_timeout

        self.url, self.queues = url, [name for name in queues if name]
        if not self.queues:
            raise ValueError("a consumer needs at least one queue")
        self.concurrency = max(1, concurrency)
        self.visibility = visibility or visibility_timeout()
        self.restore_every = restore_every
        self.handle = handle or run_message
        self.task_name = task_name or TASK_NAME
        self.running: dict[asyncio.Task, str] = {}       # run task -> its delivery tag
        self._acks: list[str] = []
        self._stopping = False
        self._closing = False               # serve() is ending: the side work stops
        self._wake = asyncio.Event()        # a slot freed, an ack is due, or stop()
        self._ack_due = asyncio.Event()
        self._client: Any = None
        self.on_ready = on_ready

    # -- the loop -------------------------------------------------------------------------

    async def serve(self) -> None:
        """Take and run messages until `stop()`, then wait for the runs in flight
        to end (each acknowledged as it ends).  A lost broker is reconnected
        to, for ever, while runs go on; an error Redis answers (a wrong
        database number, a key of the wrong type) stops it: raised.  Stop it
        with `stop()`, not by cancelling: a BRPOP cut off can lose the message
        Redis just gave it."""
        import redis.asyncio as aioredis

        self._client = aioredis.Redis.from_url(
            self.url, socket_keepalive=True, socket_connect_timeout=4,
            socket_timeout=WAIT + 10, health_check_interval=5)
        take = self._client.register_script(_TAKE)
        side = asyncio.ensure_future(self._side_work())
        try:
            await self._take_loop(take)
            while self.running:                       # a warm shutdown: runs end here
                await asyncio.wait(list(self.running))
            await self._flush_acks(final=True)
        finally:
            # The side work ends at its next turn; cancelling it is not enough on its
            # own: redis-py can swallow a cancel that lands inside a command, and the
            # loop went on (seen as a stop() that never returned, on a loaded machine).
            self._closing = True
            self._ack_due.set()
            side.cancel()
            try:
                await asyncio.wait_for(asyncio.gather(side, return_exceptions=True),
                                       WAIT + 2)
            except asyncio.TimeoutError:
                log.warning("the broker did not answer while the worker stopped")
            await self._client.aclose()

    def stop(self) -> None:
        """Take no more messages; `serve` returns once the runs in flight ended."""
        self._stopping = True
        self._wake.set()

    async def _take_loop(self, take: Any) -> None:
        from redis.exceptions import ConnectionError, TimeoutError

        retry, connected, said_lost = RETRY_FIRST, False, False
        while not self._stopping:
            try:
                if not connected:
                    await self._client.ping()
                    connected, retry = True, RETRY_FIRST
                    if self.on_ready is not None:
                        self.on_ready()
                        self.on_ready = None
                    if said_lost:
                        log.warning("Connected to broker again (%s)", _safe(self.url))
                    said_lost = False
                free = self.concurrency - len(self.running)
                if free <= 0:
                    await self._wake.wait()
                    self._wake.clear()
                    continue
                raws = await take(keys=[*self._keys(), UNACKED_INDEX, UNACKED],
                                  args=[free, time.time(), *self._key_queues()])
                if not raws:
                    raws = await self._wait_for_one()
                for raw in raws:
                    self._start(raw)
            except (ConnectionError, TimeoutError, OSError) as exc:
                connected = False
                if not said_lost:
                    log.warning("Connection to broker lost: %s (%s); trying again, runs in "
                                "flight go on", exc, _safe(self.url))
                    said_lost = True
                await asyncio.sleep(retry)
                retry = min(retry * 2, RETRY_MOST)

    async def _wait_for_one(self) -> list[bytes]:
        """The queues were empty: wait (BRPOP, never cancelled: a BRPOP cut off
        could lose the message Redis gave it) for a message, and record it; one
        that came after `stop()` goes back where it was, first in line."""
        found = await self._client.brpop(self._keys(), timeout=WAIT)
        if not found:
            return []
        key, raw = found
        if self._stopping:
            await self._client.rpush(key, raw)
            return []
        queue = key.decode().split(SEP)[0]
        try:
            message = json.loads(raw)
            tag = message["properties"]["delivery_tag"]
            info = message["properties"].get("delivery_info") or {}
            record = "[" + raw.decode() + ", " + json.dumps(info.get("exchange", "")) + \
                ", " + json.dumps(info.get("routing_key", queue)) + "]"
        except (ValueError, KeyError, TypeError, AttributeError):
            return [raw]                        # not kombu's: `_start` says so and drops it
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.zadd(UNACKED_INDEX, {tag: time.time()})
            pipe.hset(UNACKED, tag, record)
            await pipe.execute()
        return [raw]

    def _keys(self) -> list[str]:
        """Every list to look at, lower priority numbers first, each step across
        the queues (as kombu's BRPOP); the queues take turns leading."""
        return [priority_key(queue, step) for step in PRIORITY_STEPS for queue in self.queues]

    def _key_queues(self) -> list[str]:
        return [queue for _ in PRIORITY_STEPS for queue in self.queues]

    # -- one message ----------------------------------------------------------------------

    def _start(self, raw: bytes) -> None:
        try:
            message = json.loads(raw)
            tag = message["properties"]["delivery_tag"]
        except (ValueError, KeyError, TypeError):
            log.warning("dropped a message that is not kombu's (no delivery tag): %r",
                        raw[:200])
            return
        try:
            args = self._args(message)
        except ValueError as exc:
            log.warning("dropped message %s: %s", tag, exc)
            self._ack(tag)
            return
        if len(self.queues) > 1:            # the queue served first goes last next time
            routed = (message["properties"].get("delivery_info") or {}).get("routing_key")
            if routed in self.queues:
                self.queues.remove(routed)
                self.queues.append(routed)
        task = asyncio.ensure_future(self._run(args))
        self.running[task] = tag

    def _args(self, message: dict[str, Any]) -> list[Any]:
        """The task's positional arguments, from Celery's message protocol 2."""
        headers = message.get("headers") or {}
        if headers.get("task") != self.task_name:
            raise ValueError(f"task {headers.get('task')!r} is not {self.task_name!r} "
                             f"(send runs with flowforge's enqueue)")
        if message.get("content-type") != "application/json":
            raise ValueError(f"content type {message.get('content-type')!r}: runs are sent "
                             f"as application/json")
        body = message.get("body") or ""
        if (message.get("properties") or {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        decoded = json.loads(body)
        if not (isinstance(decoded, list) and decoded and isinstance(decoded[0], list)
                and decoded[0]):
            raise ValueError("the body is not Celery's [args, kwargs, embed] (protocol 2)")
        return decoded[0]

    async def _run(self, args: list[Any]) -> None:
        task = asyncio.current_task()
        try:
            outcome = await self.handle(args)
            log.debug("run %s: %s", args[0], outcome)
        except Exception:  # noqa: BLE001 - one run's failure must not stop the others
            log.exception("run %s: the worker failed on it (its lease lapses and a reaper "
                          "sends it again)", args[0])
        finally:
            tag = self.running.pop(task, None)          # type: ignore[arg-type]
            if tag is not None:
                self._ack(tag)

    def _ack(self, tag: str) -> None:
        self._acks.append(tag)
        self._wake.set()
        self._ack_due.set()

    # -- acks and sweeps, beside the taking -----------------------------------------------

    async def _side_work(self) -> None:
        """Acknowledge ended runs as they end (many in one round trip when many
        ended meanwhile) and sweep every RESTORE_EVERY seconds."""
        next_sweep = time.monotonic() + self.restore_every
        while not self._closing:
            try:
                await asyncio.wait_for(self._ack_due.wait(),
                                       max(0.0, next_sweep - time.monotonic()))
            except asyncio.TimeoutError:
                pass
            self._ack_due.clear()
            await self._flush_acks()
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + self.restore_every
                try:
                    await self._sweep()
                except Exception as exc:  # noqa: BLE001 - the next sweep tries again
                    log.debug("sweep of unacknowledged messages failed: %s", exc)

    async def _flush_acks(self, final: bool = False) -> None:
        tags, self._acks = self._acks, []
        if not tags:
            return
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.zrem(UNACKED_INDEX, *tags)
                pipe.hdel(UNACKED, *tags)
                await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - the broker is away: acked once it is back
            if final:
                log.warning("could not acknowledge %d message(s) (%s): they come back "
                            "after the visibility timeout and are dropped, their runs "
                            "having ended", len(tags), exc)
                return
            self._acks[:0] = tags
            await asyncio.sleep(RETRY_FIRST)
            self._ack_due.set()

    async def _sweep(self) -> None:
        """Mark the messages of runs in flight as taken now, then put back on their
        queues the unacknowledged messages older than the visibility timeout
        (kombu's `QoS.restore_visible`, under its mutex)."""
        from redis.exceptions import LockError, WatchError

        now = time.time()
        live = sorted(set(self.running.values()))
        if live:
            await self._client.zadd(UNACKED_INDEX, {tag: now for tag in live}, xx=True)
        lock = self._client.lock(UNACKED_MUTEX, timeout=SWEEP_LOCK_SECONDS)
        if not await lock.acquire(blocking=False):
            return
        try:
            for tag in await self._client.zrange(UNACKED_INDEX, now - self.visibility, 0,
                                                 desc=True, byscore=True):
                try:
                    await self._restore(tag)
                except WatchError:
                    pass                        # it moved meanwhile: the next sweep sees
        finally:
            try:
                await lock.release()
            except LockError:
                pass

    async def _restore(self, tag: bytes) -> None:
        async with self._client.pipeline(transaction=True) as pipe:
            await pipe.watch(UNACKED)
            raw = await pipe.hget(UNACKED, tag)
            pipe.multi()
            pipe.zrem(UNACKED_INDEX, tag)
            pipe.hdel(UNACKED, tag)
            if raw:
                message, exchange, routing_key = json.loads(raw)
                for key, payload in await self._restored(message, exchange, routing_key):
                    pipe.rpush(key, payload)
            await pipe.execute()
        if raw:                                 # else another sweep put it back first
            log.info("a message of a lost worker went back to its queue (%s)",
                     tag.decode() if isinstance(tag, bytes) else tag)

    async def _restored(self, message: dict[str, Any], exchange: str,
                        routing_key: str) -> list[tuple[str, str]]:
        """Where kombu's `_do_restore_message` would push it, and what."""
        message.setdefault("headers", {})["redelivered"] = True
        properties = message.setdefault("properties", {})
        properties.setdefault("delivery_info", {})["redelivered"] = True
        try:
            priority = int(properties.get("priority") or 0)
        except (TypeError, ValueError):
            priority = 0
        queues = [routing_key]
        if exchange:                           # a direct exchange's bindings (kombu's table)
            members = await self._client.smembers(f"_kombu.binding.{exchange}")
            bound = [part[2] for part in (m.decode().split(SEP) for m in members)
                     if len(part) == 3 and part[0] == routing_key]
            queues = bound or queues
        payload = json.dumps(message)
        return [(priority_key(queue, priority), payload) for queue in queues]


def _safe(url: str) -> str:
    """The broker's URL without its password, for the log."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + \
            (f":{parts.port}" if parts.port else "")
        return parts._replace(netloc=netloc).geturl()
    return url
