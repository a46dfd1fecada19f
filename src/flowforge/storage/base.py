"""The storage interface: one abstract class, one module per back end, chosen
by the database URL (`sqlite:///path.db`, `postgresql://...`).

Every back end must pass the same conformance suite (`tests/storage/`).  Its
SQL is written once (`records`, `workflows`, `users`, `access`, ...; see
`sql.SQLBackend`): a back end adds connections and write batching.  The
methods are async because the server back end talks to PostgreSQL over the
network; the SQLite back end answers inline, which is faster than a thread
hop for a local file.

Rows are plain dicts with JSON-able values.  Times are epoch seconds.

Besides runs, a storage keeps what a shared service needs: workflows with
every saved version (runs name the version they ran), users with hashed API
keys, and the attempts to deliver each run's webhook.  `follow_events` is the
one way live consumers (SSE, WebSocket, webhooks) read a run: from the store,
so an event is always stored before anyone sees it.
"""

from __future__ import annotations

import abc
import asyncio
from typing import Any, AsyncIterator

from flowforge.errors import StorageError

from flowforge.storage.access import AccessStore
from flowforge.storage.chat_sessions import ChatSessionStore
from flowforge.storage.migrate import Migration
from flowforge.storage.pipelines import PipelineStore
from flowforge.storage.schedules import ScheduleStore

__all__ = ["Storage", "Migration", "AlreadyExists", "IdempotencyKeyTaken", "LeaseLost",
           "conflicting_events", "RUN_FIELDS", "BLOCK_FIELDS",
           "USER_FIELDS", "KEY_FIELDS", "DELIVERY_FIELDS", "TERMINAL_STATUSES", "WEBHOOK_STATES"]

#: Columns of a run row, in order.
RUN_FIELDS = ("run_id", "workflow_id", "workflow_version", "user_id", "status", "inputs",
              "outputs", "usage", "memory", "error", "document", "created_at", "started_at",
              "finished_at", "webhook", "cancel_requested_at", "trace_id", "lease_owner",
              "lease_expires_at", "resume_at", "budget", "webhook_state",
              "webhook_lease_until", "idempotency_key", "request_fingerprint",
              "cut_off_resumes")
#: Columns of a block row (one per block execution scope, e.g. "" or "refine[2]").
BLOCK_FIELDS = ("run_id", "scope", "block_id", "type", "status", "inputs", "output", "error",
                "reason", "started_at", "finished_at", "duration_ms")
#: Columns of a user row; `role` is "user" or "admin"; `webhook_secret` signs
#: the user's webhooks (it must be readable, so it is not hashed).
USER_FIELDS = ("user_id", "name", "role", "webhook_secret", "created_at")
#: Columns of an API key row: only the SHA-256 of the key is stored.
KEY_FIELDS = ("key_id", "user_id", "key_hash", "prefix", "created_at", "revoked_at")
#: Columns of one webhook delivery attempt.
DELIVERY_FIELDS = ("run_id", "attempt", "url", "status_code", "error", "succeeded",
                   "duration_ms", "created_at")
#: `webhook_state` of a run whose webhook any process may deliver once it ends (a
#: pool run): `pending`, `delivering` (claimed until `webhook_lease_until`),
#: `delivered` or `failed` (every attempt failed).  NULL: the starting process
#: delivers it itself, or there is none.
WEBHOOK_STATES = ("pending", "delivering", "delivered", "failed")
#: A `waiting` run has stopped with a `wait` or `approval` block pending: no
#: process holds it; `resume_at` says when it is due (an approval may have none).
#: A run in one of these states will get no more events.
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled"})
#: TERMINAL_STATUSES as an SQL list, for `status IN ...`.
_ENDED_SQL = "(" + ", ".join(f"'{status}'" for status in sorted(TERMINAL_STATUSES)) + ")"
#: An ended run whose webhook is owed and not being delivered (never claimed, or
#: its claim lapsed before the `?`, now).
_OWED_SQL = (f"status IN {_ENDED_SQL} AND (webhook_state = 'pending' OR "
             f"(webhook_state = 'delivering' AND webhook_lease_until < ?))")


def conflicting_events(run_id: str, seqs: list[int]) -> str:
    return (f"run {run_id}: events {', '.join(map(str, seqs[:5]))} are already stored with "
            f"other content - two processes are writing this run (it was resumed while "
            f"still running?); nothing was dropped silently, this write was refused")


class AlreadyExists(StorageError):
    """A row with the same unique name or id is already stored."""


class IdempotencyKeyTaken(AlreadyExists):
    """`create_run` of a run whose `(user_id, idempotency_key)` an earlier run
    holds: nothing was stored; `run_for_idempotency_key` finds the earlier run."""

    def __init__(self, user_id: str, key: str) -> None:
        super().__init__(f"user '{user_id}' already started a run with the idempotency key "
                         f"{key!r}")
        self.user_id, self.key = user_id, key


class LeaseLost(StorageError):
    """A write fenced by a run's lease (`record_later(fence=...)`) was refused:
    another process holds the lease now (this one was stalled past it, e.g.
    while the database was away, and the run was taken over).  Nothing of
    the write was stored; its writer must stop running the run."""

    def __init__(self, run_id: str, owner: str) -> None:
        super().__init__(f"run {run_id}: this process ({owner}) no longer holds the run's "
                         f"lease - another process took the run over while this one could "
                         f"not renew it; nothing more of the run is stored or started here")
        self.run_id, self.owner = run_id, owner


class Storage(AccessStore, PipelineStore, ChatSessionStore, ScheduleStore, abc.ABC):
    """Where runs, their events and block results, and per-user memory live
    (and, through `AccessStore`, users' secrets and capability grants;
    through `PipelineStore`, their saved Pipeline JSON documents; through
    `ChatSessionStore`, the RAG chat's sessions; through `ScheduleStore`, which
    schedule firings happened)."""

    url: str

    #: Seconds a follower waits for a notification before it looks again
    #: (catches events written by another process).
    poll_interval: float = 0.5

    # -- lifecycle --------------------------------------------------------------
    @abc.abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> "Storage":
        await self.open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- runs -------------------------------------------------------------------
    @abc.abstractmethod
    async def create_run(self, run: dict[str, Any]) -> None:
        """Insert a run row (keys from RUN_FIELDS; missing ones are NULL).

        A run with an `idempotency_key` (and its `request_fingerprint`) is
        unique per `user_id` and key: the key is stored in the run's own row,
        so of two submissions with one key exactly one inserts, however they
        interleave; the other raises `IdempotencyKeyTaken`."""

    @abc.abstractmethod
    async def update_run(self, run_id: str, **fields: Any) -> None:
        """Update some columns of a run."""

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> dict[str, Any] | None: ...

    async def run_for_idempotency_key(self, user_id: str, key: str
                                      ) -> dict[str, Any] | None:
        """The run `user_id` created with this idempotency key, or None."""
        rows = await self._sql_rows(  # type: ignore[attr-defined]
            "SELECT run_id FROM runs WHERE user_id = ? AND idempotency_key = ?", (user_id, key))
        return await self.get_run(rows[0]["run_id"]) if rows else None

    # -- leases: one process runs a run ---------------------------------------------
    async def claim_run(self, run_id: str, owner: str, ttl: float,
                        expected_owner: str | None = None,
                        expected_status: str | None = None) -> bool:
        """Take the run's lease for `owner` for `ttl` seconds: True when it was
        free, expired, already `owner`'s, or still held by `expected_owner` (a
        holder known to be dead); a compare-and-set, safe between processes.
        `expected_status`: and the run's status is still the one the caller
        read (a run that ended meanwhile frees its lease as it ends: without
        this, a resumer that read it running would run it again)."""
        import time as _time
        now = _time.time()
        status = " AND status = ?" if expected_status is not None else ""
        changed = await self._sql_change(  # type: ignore[attr-defined]
            "UPDATE runs SET lease_owner = ?, lease_expires_at = ? WHERE run_id = ? AND "
            "(lease_owner IS NULL OR lease_owner = ? OR lease_expires_at < ? OR lease_owner = ?)"
            + status,
            (owner, now + ttl, run_id, owner, now, expected_owner or owner,
             *([expected_status] if expected_status is not None else [])))
        return changed == 1

    async def take_run(self, run_id: str, owner: str, ttl: float,
                       expected_owner: str | None = None,
                       expected_status: str | None = None) -> dict[str, Any] | None:
        """`claim_run`, and once the lease is held, what a resumer reads: `{row,
        events, blocks}` (the row as it is after the claim, every event, and the
        block checkpoints, `[]` when no event says a block ran); None when the
        lease was not taken.  Everything is read after the claim committed, so
        nothing is added to the run meanwhile (its writers are fenced by the
        lease).  Back ends with a round trip per query do it in one."""
        from flowforge.storage.checkpoints import BLOCK_EVENT_TYPES  # it imports this module

        if not await self.claim_run(run_id, owner, ttl, expected_owner, expected_status):
            return None
        row = await self.get_run(run_id)
        if row is None:
            return None
        events = await self.get_events(run_id)
        return {"row": row, "events": events, "blocks": await self.get_blocks(run_id)
                if any(event["type"] in BLOCK_EVENT_TYPES for event in events) else []}

    async def renew_leases(self, run_ids: list[str], owner: str, ttl: float) -> list[str]:
        """Extend `owner`'s leases on these runs (the heartbeat); the ids whose
        lease another process holds now (it expired and was taken over: the
        caller must stop running them)."""
        if not run_ids:
            return []
        import time as _time
        marks = ", ".join("?" * len(run_ids))
        changed = await self._sql_change(  # type: ignore[attr-defined]
            f"UPDATE runs SET lease_expires_at = ? WHERE lease_owner = ? AND run_id IN ({marks})",
            (_time.time() + ttl, owner, *run_ids))
        if changed == len(run_ids):
            return []
        rows = await self._sql_rows(  # type: ignore[attr-defined]
            f"SELECT run_id FROM runs WHERE lease_owner IS NOT NULL AND lease_owner <> ? "
            f"AND run_id IN ({marks})", (owner, *run_ids))
        return [row["run_id"] for row in rows]

    async def run_ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        """Ids of runs that start with `prefix` (letters, digits, '-' and '_'
        only, so it is never a LIKE pattern), at most `limit`."""
        if not prefix or not all(c.isalnum() or c in "-_" for c in prefix):
            return []
        rows = await self._sql_rows(  # type: ignore[attr-defined]
            "SELECT run_id FROM runs WHERE substr(run_id, 1, ?) = ? ORDER BY run_id LIMIT ?",
            (len(prefix), prefix, limit))
        return [row["run_id"] for row in rows]

    async def user_usage_since(self, user_id: str, since: float) -> dict[str, Any]:
        """`{tokens, cost, runs}` the user's runs created at or after `since`
        (epoch seconds) have used, as recorded when each run stopped (a run
        still running counts from its next stop)."""
        import json as _json
        rows = await self._sql_rows(  # type: ignore[attr-defined]
            "SELECT usage FROM runs WHERE user_id = ? AND created_at >= ?", (user_id, since))
        tokens, cost = 0, 0.0
        for row in rows:
            usage = row["usage"]
            if isinstance(usage, str):
                usage = _json.loads(usage)
            if not isinstance(usage, dict):
                continue
            total = (usage.get("tokens") or {}).get("total")
            tokens += int(total) if isinstance(total, (int, float)) else 0
            spent = usage.get("cost")
            cost += float(spent) if isinstance(spent, (int, float)) else 0.0
        return {"tokens": tokens, "cost": round(cost, 10), "runs": len(rows)}

    async def take_waiting(self, run_id: str) -> bool:
        """Move a `waiting` run to `running`: True for the one caller that did
        (two people deciding at once, two resumers: one wins)."""
        changed = await self._sql_change(  # type: ignore[attr-defined]
            "UPDATE runs SET status = 'running', resume_at = NULL "
            "WHERE run_id = ? AND status = 'waiting'", (run_id,))
        return changed == 1

    async def queue_waiting(self, run_id: str) -> bool:
        """Move a `waiting` run to `queued` (it goes to the worker pool): True for
        the one caller that did, as `take_waiting`."""
        changed = await self._sql_change(  # type: ignore[attr-defined]
            "UPDATE runs SET status = 'queued', resume_at = NULL "
            "WHERE run_id = ? AND status = 'waiting'", (run_id,))
        return changed == 1

    async def cancel_waiting(self, run_id: str, now: float) -> bool:
        """Cancel a `waiting` run (no process holds it): True when it was
        waiting; False when it was not (a resumer may just have taken it)."""
        changed = await self._sql_change(  # type: ignore[attr-defined]
            "UPDATE runs SET status = 'cancelled', resume_at = NULL, finished_at = ?, "
            "error = 'the run was cancelled while waiting' "
            "WHERE run_id = ? AND status = 'waiting'", (now, run_id))
        return changed == 1

    async def due_runs(self, now: float, limit: int = 100) -> list[str]:
        """Ids of `waiting` runs whose `resume_at` has come, the most overdue first."""
        rows = await self._sql_rows(  # type: ignore[attr-defined]
            "SELECT run_id FROM runs WHERE status = 'waiting' AND resume_at IS NOT NULL "
            "AND resume_at <= ? ORDER BY resume_at LIMIT ?", (now, limit))
        return [row["run_id"] for row in rows]

    @abc.abstractmethod
    async def cancel_requests(self, run_ids: list[str]) -> set[str]:
        """Those of `run_ids` whose row carries a cancel request
        (`cancel_requested_at`, set with `update_run` by any process)."""

    @abc.abstractmethod
    async def list_runs(self, *, workflow_id: str | None = None, status: str | None = None,
                        user_id: str | None = None, limit: int = 50, offset: int = 0
                        ) -> list[dict[str, Any]]:
        """Newest first, without the `document` column."""

    # -- events and block checkpoints ---------------------------------------------
    @abc.abstractmethod
    async def record(self, run_id: str, events: list[dict[str, Any]],
                     blocks: list[dict[str, Any]]) -> None:
        """Append events and upsert block rows in one transaction: a block's
        checkpoint and the event announcing it are stored together or not at all."""

    def record_later(self, run_id: str, events: list[dict[str, Any]],
                     blocks: list[dict[str, Any]], *, after: Any = None,
                     update: dict[str, Any] | None = None,
                     fence: tuple[str, float] | None = None) -> asyncio.Future:
        """`record` without waiting: the future is done once stored (or failed).
        Stored after `after`, an earlier `record_later` future of the same run, so
        a block's later checkpoint never lands before its earlier one, and not
        at all when `after` failed (a run's events never have a gap); `update`
        (run columns, as `update_run` takes them) is stored with it.  `fence`
        (lease owner, ttl): stored only while that owner holds the run's lease,
        else `LeaseLost`.  Back ends that commit in call order override this
        without a task per write, and store the update, and check the fence
        (extending a lease running out), in the same transaction."""
        async def write() -> None:
            if after is not None:
                await asyncio.wait([after])
                if after.cancelled() or after.exception() is not None:
                    raise StorageError(f"an earlier write of run {run_id} failed, and a "
                                       f"run's events are stored in order")
            if fence is not None:       # checked just before, not in the same transaction
                row = await self.get_run(run_id)
                if row is None or row.get("lease_owner") != fence[0]:
                    raise LeaseLost(run_id, fence[0])
            await self.record(run_id, events, blocks)
            if update:
                await self.update_run(run_id, **update)

        return asyncio.ensure_future(write())

    @abc.abstractmethod
    async def get_events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        """Events with seq > after_seq, in order."""

    @abc.abstractmethod
    async def get_blocks(self, run_id: str) -> list[dict[str, Any]]:
        """Block rows in the order they were first recorded."""

    # -- per-user memory ----------------------------------------------------------
    @abc.abstractmethod
    async def get_memory(self, user_id: str, keys: list[str] | None = None) -> dict[str, Any]: ...

    @abc.abstractmethod
    async def save_memory(self, user_id: str, values: dict[str, Any]) -> None: ...

    # -- workflows and their versions ----------------------------------------------
    @abc.abstractmethod
    async def save_workflow(self, owner: str, workflow_id: str, document: dict[str, Any],
                            source: str | None = None) -> int:
        """Store `document` as the next version of the owner's workflow (1 for a new
        one; a deleted workflow saved again continues its numbering) and return it.
        `source` is the text the author wrote (YAML or JSON), kept byte for byte so
        that comments, key order and layout survive a save."""

    @abc.abstractmethod
    async def get_workflow(self, owner: str, workflow_id: str, version: int | None = None
                           ) -> dict[str, Any] | None:
        """`{owner, workflow_id, version, latest_version, name, document, source,
        created_at, updated_at}` of the latest or the given version (`source` None
        when the version was saved without its text); None when unknown or deleted."""

    @abc.abstractmethod
    async def list_workflows(self, owner: str | None = None, *, limit: int = 50,
                             offset: int = 0) -> list[dict[str, Any]]:
        """Live workflows (latest versions, without documents), by id; every
        owner's when `owner` is None.  Each row also has the latest version's
        `description` and `last_run_status`, the status of the owner's latest
        run of it (None when never run): a list page needs nothing more."""

    @abc.abstractmethod
    async def list_workflow_versions(self, owner: str, workflow_id: str
                                     ) -> list[dict[str, Any]]:
        """`{version, name, created_at}` oldest first; empty when unknown or deleted."""

    @abc.abstractmethod
    async def delete_workflow(self, owner: str, workflow_id: str) -> bool:
        """Hide the workflow (its versions stay for the runs that name them);
        False when there was nothing to delete."""

    # -- users and API keys ----------------------------------------------------------
    @abc.abstractmethod
    async def create_user(self, user: dict[str, Any]) -> None:
        """Insert a user (USER_FIELDS); AlreadyExists when the name or id is taken."""

    @abc.abstractmethod
    async def get_user(self, user_id: str) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    async def get_user_by_name(self, name: str) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    async def list_users(self) -> list[dict[str, Any]]:
        """Oldest first."""

    @abc.abstractmethod
    async def add_api_key(self, key: dict[str, Any]) -> None:
        """Insert a key row (KEY_FIELDS): the hash, never the key."""

    @abc.abstractmethod
    async def user_for_key_hash(self, key_hash: str) -> dict[str, Any] | None:
        """The user owning an unrevoked key with this hash."""

    @abc.abstractmethod
    async def list_api_keys(self, user_id: str) -> list[dict[str, Any]]: ...

    @abc.abstractmethod
    async def revoke_api_key(self, key_id: str) -> bool: ...

    # -- webhook deliveries ------------------------------------------------------------
    @abc.abstractmethod
    async def add_delivery(self, delivery: dict[str, Any]) -> None:
        """Record one attempt to deliver a run's webhook (DELIVERY_FIELDS)."""

    @abc.abstractmethod
    async def list_deliveries(self, run_id: str) -> list[dict[str, Any]]:
        """Attempts in order."""

    async def claim_webhook(self, run_id: str, ttl: float) -> bool:
        """Take the delivery of an ended run's owed webhook for `ttl` seconds:
        True for the one caller that did (a compare-and-set, safe between
        processes: of a worker and two reapers, one posts).  A claim whose
        holder died lapses after `ttl` and may be taken again."""
        import time as _time
        now = _time.time()
        changed = await self._sql_change(  # type: ignore[attr-defined]
            "UPDATE runs SET webhook_state = 'delivering', webhook_lease_until = ? "
            f"WHERE run_id = ? AND {_OWED_SQL}", (now + ttl, run_id, now))
        return changed == 1

    async def settle_webhook(self, run_id: str, state: str) -> None:
        """End a claimed delivery: `delivered`, `failed`, or `pending` again (the
        claimer stopped before it could try: another process delivers it)."""
        if state not in ("pending", "delivered", "failed"):
            raise StorageError(f"webhook state {state!r}: use pending, delivered or failed")
        await self._sql_change(  # type: ignore[attr-defined]
            "UPDATE runs SET webhook_state = ?, webhook_lease_until = NULL "
            "WHERE run_id = ? AND webhook_state = 'delivering'", (state, run_id))

    async def owed_webhooks(self, now: float, limit: int = 100) -> list[str]:
        """Ids of ended runs whose webhook is owed and not being delivered (never
        claimed, or its claim lapsed), oldest first."""
        rows = await self._sql_rows(  # type: ignore[attr-defined]
            f"SELECT run_id FROM runs WHERE {_OWED_SQL} ORDER BY created_at LIMIT ?",
            (now, limit))
        return [row["run_id"] for row in rows]

    # -- following a run live ------------------------------------------------------------
    def _notify(self, run_id: str) -> None:
        """Back ends call this after `record` commits: wakes this process's followers."""
        waiters = self.__dict__.get("_waiters", {}).get(run_id)
        if waiters:
            for event in waiters:
                event.set()

    async def _watch_other_processes(self) -> None:
        """Arrange for `_notify(run_id)` to be called when another process
        records events (PostgreSQL: LISTEN).  Default: nothing, poll instead."""

    async def follow_events(self, run_id: str, after_seq: int = 0
                            ) -> AsyncIterator[dict[str, Any]]:
        """Every stored event with seq > after_seq, in order, then each new one as
        it is stored; ends after `run_finished`, after a `run_waiting` that is
        the last event stored (the run waits: following again after its seq
        picks up when the run goes on), or when the run has ended without one
        (a crashed process) or does not exist.  Events recorded by this
        process wake the follower at once; so do other processes' where the back
        end can tell (`_watch_other_processes`); else they are found by polling."""
        await self._watch_other_processes()
        # Created on first use: back ends define their own __init__ without calling ours.
        waiters: dict[str, set[asyncio.Event]] = self.__dict__.setdefault("_waiters", {})
        wake = asyncio.Event()
        waiters.setdefault(run_id, set()).add(wake)
        seq = after_seq
        try:
            while True:
                wake.clear()         # before reading: a commit after the read wakes us
                events = await self.get_events(run_id, seq)
                for event in events:
                    seq = event["seq"]
                    yield event
                    if event["type"] == "run_finished":
                        return
                    if event["type"] == "run_waiting" and event is events[-1] and \
                            not await self.get_events(run_id, seq):
                        return       # waiting now: follow again after `seq` to go on
                if events:
                    continue
                try:
                    await asyncio.wait_for(wake.wait(), self.poll_interval)
                except asyncio.TimeoutError:
                    run = await self.get_run(run_id)
                    if run is None:
                        return
                    if run["status"] in TERMINAL_STATUSES and \
                            not await self.get_events(run_id, seq):
                        return       # ended without run_finished: nothing more will come
        finally:
            registered = waiters.get(run_id)
            if registered is not None:
                registered.discard(wake)
                if not registered:
                    del waiters[run_id]
