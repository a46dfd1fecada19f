"""Persisting a run as it happens: a subscriber of the event bus.

Every event goes to the event log, and every block event also updates that
block's row (its checkpoint: status, inputs, output, error, timing), in one
transaction per batch.  Writes are batched by a single writer task so a
burst of events costs one commit and the scheduler never waits on the disk;
`close()` drains what is left, so a run's record is complete when the run
returns, however it ended.  Consumers that must only see stored events (the
server's SSE) register `on_stored` callbacks.

Environment variables are never written: the values of variables the
workflow's templates read are replaced by `***` before anything is stored.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable

from flowforge.storage.base import Storage

__all__ = ["Recorder", "redactor"]

_BLOCK_STATUS = {"block_started": "running", "block_succeeded": "succeeded",
                 "block_failed": "failed", "block_skipped": "skipped",
                 "block_cancelled": "cancelled", "block_waiting": "waiting"}


def redactor(secrets: Iterable[str]) -> Callable[[Any], Any]:
    """A function replacing every secret value inside nested data by `***`."""
    values = sorted({s for s in secrets if isinstance(s, str) and len(s) >= 4},
                    key=len, reverse=True)
    if not values:
        return lambda data: data

    def clean(data: Any) -> Any:
        if isinstance(data, str):
            for secret in values:
                if secret in data:
                    data = data.replace(secret, "***")
            return data
        if isinstance(data, dict):
            return {k: clean(v) for k, v in data.items()}
        if isinstance(data, (list, tuple)):
            return [clean(v) for v in data]
        return data

    return clean


class Recorder:
    """Writes one run's events and block checkpoints to storage."""

    def __init__(self, storage: Storage, run_id: str,
                 redact: Callable[[Any], Any] = lambda data: data) -> None:
        self.storage = storage
        self.run_id = run_id
        self.redact = redact
        self.pending: list[dict] = []
        self.on_stored: list[Callable[[list[dict]], None]] = []
        self.error: BaseException | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    def __call__(self, event: dict) -> None:
        """The bus subscriber: O(1), never blocks."""
        self.pending.append(event)
        self._wake.set()

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self.pending:
                batch, self.pending = self.pending, []
                await self._write(batch)
            if self._closing:
                return

    async def _write(self, batch: list[dict]) -> None:
        events = [self.redact(event) for event in batch]
        blocks: dict[tuple[str, str], dict] = {}
        for event in events:
            status = _BLOCK_STATUS.get(event["type"])
            if status is None or event.get("resumed"):
                continue            # a checkpoint restored on resume keeps its row (and times)
            key = (event.get("scope") or "", event["block_id"])
            row = blocks.setdefault(key, {"scope": key[0], "block_id": key[1]})
            row["status"] = status
            if event.get("block_type"):
                row["type"] = event["block_type"]
            if status == "running":
                row["inputs"] = event.get("inputs")
                row["started_at"] = event["time"]
            else:
                row["finished_at"] = event["time"]
                if status == "succeeded":
                    row["output"] = event.get("output")
                    row["duration_ms"] = event.get("duration_ms")
                elif status == "failed":
                    row["error"] = event.get("error")
                else:
                    row["reason"] = event.get("reason")
                    if status == "waiting":         # the state to resume from
                        row["output"] = event.get("output")
        try:
            await self.storage.record(self.run_id, events, list(blocks.values()))
        except Exception as exc:  # noqa: BLE001 - kept, reported by close()
            self.error = exc
            return
        for callback in list(self.on_stored):
            callback(events)

    async def close(self) -> None:
        """Store everything still pending; raises the first storage error seen."""
        self._closing = True
        self._wake.set()
        await self._writer
        if self.error is not None:
            raise self.error
