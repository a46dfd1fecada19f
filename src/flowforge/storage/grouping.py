"""Group commit, the part every back end shares: the writes a run makes
(created, its events and block checkpoints, its outcome) gathered per loop
turn and turned into as few statements as keep their order.

A commit costs far more than its rows, and so does a statement: 500
concurrent runs made ~3,000 commits a second, each its own transaction.
A back end commits a group in one transaction (`Statements` holds its SQL),
retries a failed group write by write so one run's bad data never fails
another's, and stores writes in the order they were made.

A run's write made `after` another one (`record_later(after=...)`) is never
committed once that one failed: a run's stored events never have a gap, so
its recorder can retry what failed and everything behind it, in order
(`service/recorder.py`).

A run's write may be fenced by its lease (`recorded(fence=(owner, ttl))`):
it is stored only while `owner` still holds the run's lease, checked in the
transaction that stores it, which also extends a lease that is running out.
A process stalled past its lease (a database away for longer than it) whose
run another process took over then stores nothing more (`LeaseLost`): the
gate's write, which holds a block's start, fails, so the block never starts.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from flowforge.errors import StorageError
from flowforge.storage.base import (BLOCK_FIELDS, RUN_FIELDS, AlreadyExists,
                                    IdempotencyKeyTaken, LeaseLost)
from flowforge.storage.encoding import dumps, dumps_each, loads

__all__ = ["WriteFuture", "JSON_RUN_FIELDS", "JSON_BLOCK_FIELDS", "decoded_run", "decoded_block", "Statements",
           "Step", "Write", "block_row", "created", "plan", "split_group",
           "fence_rows",
           "recorded", "settle", "updated", "key_taken", "IDEMPOTENCY_INDEX", "behind", "behind_failed",
           "refuse_behind"]

#: The unique index on (user_id, idempotency_key) (migration 0014).
IDEMPOTENCY_INDEX = "runs_by_idempotency_key"

#: Run columns stored as JSON text.
JSON_RUN_FIELDS = frozenset({"inputs", "outputs", "usage", "memory", "document", "budget"})
#: Block checkpoint columns stored as JSON text.
JSON_BLOCK_FIELDS = frozenset({"inputs", "output"})


def decoded_run(row: dict[str, Any]) -> dict[str, Any]:
    """A run's row as read (a dict of its columns), its JSON columns decoded in place."""
    for key in JSON_RUN_FIELDS:
        if key in row:
            row[key] = loads(row[key])
    return row


def decoded_block(row: dict[str, Any]) -> dict[str, Any]:
    """A block checkpoint's row as read, its JSON columns decoded in place."""
    for key in JSON_BLOCK_FIELDS:
        row[key] = loads(row[key])
    return row


class WriteFuture(asyncio.Future):
    """A write's future (`record_later`, `create_run`...), which refuses
    `cancel()`: the write is committed with its group or not, whoever waits
    for it, so its outcome stays known to the run's recorder, and a write made
    `after` it is not refused for a cancellation.  A task cancelled while it
    awaits one gets its CancelledError once the write has settled (the run's
    `close()` waits for it anyway); a gated block can therefore await it
    directly, without an `asyncio.shield` (an extra future and two loop
    steps) per block."""

    __slots__ = ()

    def cancel(self, msg: Any = None) -> bool:
        return False


class Write:
    """One write waiting for its group, stored with the other runs' of the group
    in one statement per table: a new run (`run_row`), a run's `events` and
    block checkpoints (`blocks`), new values for its columns (`update`: names,
    values).  Made by `created`, `updated` and `recorded`; `what` is its verb
    ("record"), the message of a failure names the run (a message per write
    cost a string per write, for the rare one that fails)."""

    __slots__ = ("what", "notify", "run_id", "events", "blocks", "run_row", "update",
                 "future", "after", "fence", "encoded")

    def __init__(self, what: str, run_id: str, *, notify: str | None = None,
                 events: Sequence[dict[str, Any]] = (),
                 blocks: Sequence[dict[str, Any]] = (), run_row: list[Any] | None = None,
                 update: tuple[tuple[str, ...], list[Any]] | None = None) -> None:
        self.what, self.notify, self.run_id = what, notify, run_id
        self.events, self.blocks = events, blocks
        self.run_row, self.update = run_row, update
        self.future: asyncio.Future | None = None
        self.after: asyncio.Future | None = None    # stored only if this one was
        self.fence: tuple[str, float] | None = None  # (lease owner, ttl): stored only
        #                                               while the owner holds the lease
        self.encoded: list[Any] | None = None       # its events as JSON, once encoded


def created(run: dict[str, Any]) -> Write:
    """`create_run`: the run's row (StorageError for an idempotency key without
    a user: the key is unique per user, and NULL users never collide)."""
    if run.get("idempotency_key") is not None and run.get("user_id") is None:
        raise StorageError(f"run {run.get('run_id')}: an idempotency key needs the run's "
                           f"user_id (keys are unique per user)")
    row = [dumps(run.get(f)) if f in JSON_RUN_FIELDS else run.get(f) for f in RUN_FIELDS]
    return Write("create", row[0], run_row=row)


def updated(run_id: str, fields: dict[str, Any]) -> Write:
    """`update_run`: the columns' new values (StorageError for an unknown one)."""
    unknown = fields.keys() - _RUN_FIELDS
    if unknown:
        raise StorageError(f"unknown run fields: {', '.join(sorted(unknown))}")
    names = tuple(fields)
    values = [dumps(fields[n]) if n in JSON_RUN_FIELDS else fields[n] for n in names]
    return Write("update", run_id, update=(names, values))


_RUN_FIELDS = frozenset(RUN_FIELDS)


def recorded(run_id: str, events: Sequence[dict[str, Any]], blocks: Sequence[dict[str, Any]],
             update: dict[str, Any] | None = None, after: asyncio.Future | None = None,
             fence: tuple[str, float] | None = None) -> Write:
    """`record_later`: events and checkpoints, and with `update` the run's
    columns in the same write, stored only if `after` was (and, with `fence`,
    only while its owner holds the run's lease: else `LeaseLost`); followers
    of the run are woken once stored."""
    if update:
        write = updated(run_id, update)
        write.events, write.blocks = events, blocks
    else:
        write = Write("record", run_id, events=events, blocks=blocks)
    write.what, write.notify, write.after, write.fence = "record", run_id, after, fence
    return write


@dataclass(frozen=True)
class Statements:
    """A back end's SQL for the data writes, each taking many rows at once."""

    insert_runs: str                   # RUN_FIELDS' values
    insert_events: str                 # (run_id, seq, type, block_id, time, data), replays ignored
    upsert_blocks: str                 # block_row()'s values
    update_runs: Callable[[tuple[str, ...]], str]    # (*values, run_id) for these columns
    fence: str                         # fence_rows(): LeaseLost unless each owner holds its run
    #: events' `data` as the insert takes them, a list of events at a time
    encode: Callable[[Sequence[Any]], list[Any]] = dumps_each


#: A statement, its rows, and whether to check them for replayed events.
Step = tuple[str, list, bool]


def plan(writes: list[Write], sql: Statements) -> list[Step]:
    """The statements storing `writes`, in their order: the rows of consecutive
    data writes go in one statement per table (a statement per write cost more
    than its rows), new runs before the events of this group."""
    steps: list[Step] = []
    fenced = fence_rows(writes)
    if fenced:                           # first: nothing is stored for a lease lost
        steps.append((sql.fence, fenced, False))
    runs: list[list[Any]] = []
    events: list[tuple] = []
    blocks: list[list[Any]] = []
    updates: list[list[Any]] = []
    updated: set[str] = set()
    names: tuple[str, ...] = ()

    def flush_updates() -> None:
        nonlocal names
        if updates:
            steps.append((sql.update_runs(names), list(updates), False))
            updates.clear()
            updated.clear()
        names = ()

    def flush_data() -> None:
        if runs:
            steps.append((sql.insert_runs, list(runs), False))
            runs.clear()
        if events:
            steps.append((sql.insert_events, list(events), True))
            events.clear()
        if blocks:
            steps.append((sql.upsert_blocks, list(blocks), False))
            blocks.clear()
        flush_updates()

    for write in writes:
        if write.update is not None:
            columns, values = write.update
            if columns != names or write.run_id in updated:
                flush_data()             # one statement updates a run once, with one set
                names = columns
            updates.append([*values, write.run_id])
            updated.add(write.run_id)
        elif updates:
            flush_data()                 # a run's later data after its update
        if write.run_row is not None:
            runs.append(write.run_row)
        run_id = write.run_id
        if write.events:
            events += [(run_id, e["seq"], e["type"], e.get("block_id"), e.get("time"), text)
                       for e, text in zip(write.events, encoded_events(write, sql.encode))]
        if write.blocks:
            blocks += [block_row(run_id, b) for b in write.blocks]
    flush_data()
    return steps


def encoded_events(write: Write, encode: Callable[[Sequence[Any]], list[Any]] = dumps_each
                   ) -> list[Any]:
    """The write's events as JSON (`encode`: the back end's `Statements.encode`),
    encoded once (the group writer may weigh a write before it plans it)."""
    if write.encoded is None:
        write.encoded = encode(write.events)
    return write.encoded


def first_group(writes: list[Write], most_bytes: int,
                encode: Callable[[Sequence[Any]], list[Any]] = dumps_each) -> tuple[int, int]:
    """How many of `writes`, in order, make one group of at most `most_bytes`
    of events (at least one write), and their events' bytes (below
    `most_bytes`: the group needs no `split_group`).  One transaction on the
    event loop's thread holds the loop while SQLite writes it: 16 runs of 4 MB
    values in one group held a server's `/health` for a third of a second."""
    size = 0
    for taken, write in enumerate(writes, 1):
        if write.events:
            size += sum(map(len, encoded_events(write, encode)))
        if size >= most_bytes:
            return taken, size
    return len(writes), size


def split_group(group: list[Write], most_bytes: int,
                encode: Callable[[Sequence[Any]], list[Any]] = dumps_each
                ) -> tuple[list[Write], Write | None]:
    """`group` (from `first_group`) cut to at most `most_bytes` of events, and
    what of its last write is left for the next group (None: nothing).  One
    run's write may hold megabytes (a turn's, or a run's last: every event of
    blocks that ran in one turn): its first events, whole and in order, become
    a write of their own, stored first; the rest stays the write (its future,
    its `update` and checkpoints, stored only if that part was).  A write
    whose first event alone does not fit waits for the next group, unless it
    is the group's only write: an event is never cut."""
    last = group[-1]
    texts = encoded_events(last, encode) if last.events else []
    room = most_bytes - sum(len(text) for write in group[:-1] if write.events
                            for text in encoded_events(write, encode))
    fits, size = 0, 0
    for text in texts:
        if (fits or len(group) > 1) and size + len(text) > room:
            break
        fits, size = fits + 1, size + len(text)
    if fits == len(texts):
        return group, None
    if fits == 0:
        return group[:-1], last
    part = Write(last.what, last.run_id, notify=last.notify, events=last.events[:fits],
                 run_row=last.run_row)
    part.encoded, part.after, part.fence = texts[:fits], last.after, last.fence
    part.future = WriteFuture(loop=last.future.get_loop()) if last.future else None
    last.events, last.encoded, last.run_row = last.events[fits:], texts[fits:], None
    last.after = part.future
    return [*group[:-1], part], last


def fence_rows(writes: list[Write]) -> list[list[Any]]:
    """`[run_id, owner, until, refresh_below]` per fenced run of `writes`: the
    lease must be `owner`'s; one with less than half its time left (the
    heartbeat, every third of it, is late: the store was away) is extended
    to `until`."""
    now = time.time()
    rows: dict[str, list[Any]] = {}
    for write in writes:
        if write.fence is not None and write.run_id not in rows:
            owner, ttl = write.fence
            rows[write.run_id] = [write.run_id, owner, now + ttl, now + ttl / 2]
    return list(rows.values())


def behind_failed(write: Write, failed: set) -> bool:
    """Whether `write` must not be stored: the write it comes after failed
    (earlier in this group: its future is in `failed`; in an earlier group:
    settled with an error)."""
    after = write.after
    if after is None:
        return False
    if after in failed:
        return True
    return after.done() and (after.cancelled() or after.exception() is not None)


def behind(write: Write) -> StorageError | LeaseLost:
    """The error of a write refused because the one it comes after failed: that
    write's LeaseLost (the run is another process's now), else a StorageError
    naming its cause when known."""
    after = write.after
    cause = after.exception() if after is not None and after.done() and \
        not after.cancelled() else None
    if isinstance(cause, LeaseLost):
        return cause
    return StorageError(f"an earlier write of run {write.run_id} failed"
                        f"{f' ({cause})' if cause is not None else ''}, and a run's "
                        f"events are stored in order, without gaps")


def refuse_behind(batch: list[Write], errors: list[Exception | None], failed: set
                  ) -> list[Write]:
    """The writes of `batch` that may be stored; each write behind a failed one
    gets its error in `errors` (same positions as `batch`) and joins `failed`."""
    live = []
    for index, write in enumerate(batch):
        if behind_failed(write, failed):
            errors[index] = behind(write)
            failed.add(write.future)
        else:
            live.append(write)
    return live


def key_taken(write: Write) -> IdempotencyKeyTaken | None:
    """The error for `write` when the idempotency index refused it: a back end
    calls this once it knows that index, not another constraint, failed."""
    if write.run_row is None:
        return None
    row = dict(zip(RUN_FIELDS, write.run_row))
    if row.get("idempotency_key") is None:
        return None
    return IdempotencyKeyTaken(row["user_id"], row["idempotency_key"])


def settle(batch: list[Write], errors: list[Exception | None],
           notify: Callable[[str], None]) -> None:
    """Hand each write its outcome; wake the followers of runs with new events."""
    for write, error in zip(batch, errors):
        if error is None and write.notify is not None:
            notify(write.notify)
        if write.future is None or write.future.done():
            continue
        if error is None:
            write.future.set_result(None)
        elif isinstance(error, (AlreadyExists, LeaseLost)):  # the caller acts on it: kept
            write.future.set_exception(error)
        else:
            failure = StorageError(f"could not {write.what} run {write.run_id}: {error}")
            failure.__cause__ = error          # what failed: the recorder retries only
            write.future.set_exception(failure)   # what may succeed later


def block_row(run_id: str, block: dict[str, Any]) -> list[Any]:
    """A checkpoint as the row `Statements.upsert_blocks` takes (BLOCK_FIELDS' order)."""
    get = block.get
    return [run_id, get("scope") or "", block["block_id"], get("type"), get("status"),
            dumps(get("inputs")), dumps(get("output")), get("error"), get("reason"),
            get("started_at"), get("finished_at"), get("duration_ms")]


assert BLOCK_FIELDS == ("run_id", "scope", "block_id", "type", "status", "inputs", "output",
                        "error", "reason", "started_at", "finished_at", "duration_ms"), \
    "block_row() writes the columns in BLOCK_FIELDS' order: update it with them"
