"""Group commit, the part every back end shares: the writes a run makes
(created, its events and block checkpoints, its outcome) gathered per loop
turn and turned into as few statements as keep their order.

A commit costs far more than its rows, and so does a statement: 500
concurrent runs made ~3,000 commits a second, each its own transaction.
A back end commits a group in one transaction (`Statements` holds its SQL),
retries a failed group write by write so one run's bad data never fails
another's, and stores writes in the order they were made.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from flowforge.errors import StorageError
from flowforge.storage.base import BLOCK_FIELDS, RUN_FIELDS
from flowforge.storage.encoding import dumps

__all__ = ["JSON_RUN_FIELDS", "Statements", "Step", "Write", "block_row", "plan", "run_update",
           "settle"]

#: Run columns stored as JSON text.
JSON_RUN_FIELDS = frozenset({"inputs", "outputs", "usage", "memory", "document", "budget"})


def run_update(fields: dict[str, Any]) -> tuple[tuple[str, ...], list[Any]]:
    """`update_run`'s fields as a `Write.update`: the column names and values."""
    unknown = set(fields) - set(RUN_FIELDS)
    if unknown:
        raise StorageError(f"unknown run fields: {', '.join(sorted(unknown))}")
    names = tuple(fields)
    return names, [dumps(fields[n]) if n in JSON_RUN_FIELDS else fields[n] for n in names]


class Write:
    """One write waiting for its group: a statement to `apply`, or data that is
    stored with the other runs' of the group in one statement per table: a
    run's `events` and block checkpoints (`blocks`), a new run (`run_row`), or
    new values for a run's columns (`update`: names, values)."""

    __slots__ = ("apply", "what", "notify", "run_id", "events", "blocks", "run_row",
                 "update", "future")

    def __init__(self, apply: Callable[[Any], Any] | None, what: str,
                 notify: str | None = None, run_id: str = "",
                 events: Sequence[dict[str, Any]] = (),
                 blocks: Sequence[dict[str, Any]] = (), run_row: list[Any] | None = None,
                 update: tuple[tuple[str, ...], list[Any]] | None = None) -> None:
        self.apply, self.what, self.notify = apply, what, notify
        self.run_id, self.events, self.blocks = run_id, events, blocks
        self.run_row, self.update = run_row, update
        self.future: asyncio.Future | None = None


@dataclass(frozen=True)
class Statements:
    """A back end's SQL for the data writes, each taking many rows at once."""

    insert_runs: str                   # RUN_FIELDS' values
    insert_events: str                 # (run_id, seq, type, block_id, time, data), replays ignored
    upsert_blocks: str                 # block_row()'s values
    update_runs: Callable[[tuple[str, ...]], str]    # (*values, run_id) for these columns


#: A statement with its rows (and whether to check for replayed events), or a write to apply.
Step = tuple[str, list, bool] | Callable[[Any], Any]


def plan(writes: list[Write], sql: Statements) -> list[Step]:
    """The statements storing `writes`, in their order: the rows of consecutive
    data writes go in one statement per table (a statement per write cost more
    than its rows), new runs before the events of this group."""
    steps: list[Step] = []
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
        elif write.apply is not None:
            flush_data()
            steps.append(write.apply)
        elif updates:
            flush_data()                 # a run's later data after its update
        if write.run_row is not None:
            runs.append(write.run_row)
        run_id = write.run_id
        if write.events:
            events += [(run_id, e["seq"], e["type"], e.get("block_id"), e.get("time"), dumps(e))
                       for e in write.events]
        if write.blocks:
            blocks += [block_row(run_id, b) for b in write.blocks]
    flush_data()
    return steps


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
        else:
            write.future.set_exception(StorageError(f"could not {write.what}: {error}"))


def block_row(run_id: str, block: dict[str, Any]) -> list[Any]:
    """A checkpoint as the row `Statements.upsert_blocks` takes (BLOCK_FIELDS' order)."""
    get = block.get
    return [run_id, get("scope") or "", block["block_id"], get("type"), get("status"),
            dumps(get("inputs")), dumps(get("output")), get("error"), get("reason"),
            get("started_at"), get("finished_at"), get("duration_ms")]


assert BLOCK_FIELDS == ("run_id", "scope", "block_id", "type", "status", "inputs", "output",
                        "error", "reason", "started_at", "finished_at", "duration_ms"), \
    "block_row() writes the columns in BLOCK_FIELDS' order: update it with them"
