"""`flowforge runs list|show`: the stored record, rendered."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from flowforge.cli.progress import STATUS_STYLE
from flowforge.errors import InvalidValue, NotFound
from flowforge.service.runs import cancel_run as service_cancel_run
from flowforge.service.runs import open_storage
from flowforge.storage.base import TERMINAL_STATUSES

__all__ = ["list_runs", "show_run", "cancel_run", "find_run", "RUN_STATUSES"]

#: What `runs list --status` accepts.
RUN_STATUSES = ("queued", "running", "waiting", "succeeded", "failed", "cancelled")


async def find_run(storage: Any, run_id: str) -> dict[str, Any]:
    """The run named by its id or by a unique prefix of it (as git does)."""
    row = await storage.get_run(run_id)
    if row is not None:
        return row
    matches = await storage.run_ids_starting(run_id, limit=6)
    if len(matches) == 1:
        return await storage.get_run(matches[0])
    if not matches:
        raise NotFound(f"no run with id '{run_id}' in {storage.url} "
                       f"(`flowforge runs list` shows them)")
    shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
    raise InvalidValue(f"run id prefix '{run_id}' is ambiguous: it starts {shown}; give more "
                       f"characters")


def _when(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _short(value: Any, width: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


async def list_runs(db: str | None, workflow: str | None, status: str | None, user: str | None,
                    limit: int, as_json: bool, console: Console) -> None:
    if status is not None and status not in RUN_STATUSES:
        raise InvalidValue(f"--status {status!r}: use one of {', '.join(RUN_STATUSES)}")
    async with open_storage(db) as storage:
        rows = await storage.list_runs(workflow_id=workflow, status=status, user_id=user,
                                       limit=limit)
    if as_json:
        print(json.dumps(rows, default=str))
        return
    if not rows:
        filters = [f"--{name} {value}" for name, value in
                   (("workflow", workflow), ("status", status), ("user", user)) if value]
        console.print(f"no runs match {' '.join(filters)}" if filters else "no runs stored yet",
                      highlight=False)
        return
    table = Table(box=None, padding=(0, 1))
    # The id is what every other command takes: never cut, whatever the width.
    table.add_column("run id", no_wrap=True, min_width=32, overflow="fold")
    for column in ("workflow", "user", "status", "started", "duration"):
        table.add_column(column)
    for row in rows:
        duration = ""
        if row.get("finished_at") and row.get("started_at"):
            duration = f"{(row['finished_at'] - row['started_at']) * 1000:,.0f} ms"
        status = _shown_status(row)
        table.add_row(row["run_id"], row["workflow_id"], row.get("user_id") or "",
                      Text(status, style=STATUS_STYLE.get(row["status"], "")),
                      _when(row.get("started_at")), duration)
    console.print(table)


def _shown_status(row: dict[str, Any]) -> str:
    """`running`, unless no process runs it any more: then `cut off` (its lease
    lapsed, or its process on this host is gone), which `runs resume` finishes.
    A run waiting while another branch has already failed says so: it will end
    failed, and `--status failed` lists it only then."""
    if row["status"] == "waiting" and row.get("error"):
        return "waiting (a branch failed)"
    if row["status"] != "running":
        return row["status"]
    import time

    from flowforge.service.cancel import lease_holder_alive

    holder, expires = row.get("lease_owner"), row.get("lease_expires_at")
    if lease_holder_alive(holder) is False and holder or (expires and expires < time.time()):
        return "cut off (runs resume)"
    return "running"


async def show_run(db: str | None, run_id: str, as_json: bool, with_events: bool,
                   console: Console) -> None:
    async with open_storage(db) as storage:
        row = await find_run(storage, run_id)
        run_id = row["run_id"]
        blocks = await storage.get_blocks(run_id)
        waiting = row["status"] == "waiting"
        events = await storage.get_events(run_id) if (with_events or as_json or waiting) else []
    if as_json:
        row = {k: v for k, v in row.items() if k != "document"}
        print(json.dumps({**row, "blocks": blocks, "events": events}, default=str))
        return
    console.print(Text.assemble(("run ", "bold"), row["run_id"], "  workflow ", row["workflow_id"],
                                "  user ", str(row.get("user_id")), "  ",
                                (_shown_status(row), STATUS_STYLE.get(row["status"], ""))))
    console.print(f"started {_when(row.get('started_at'))}  finished {_when(row.get('finished_at'))}")
    if row.get("trace_id"):
        console.print(f"trace {row['trace_id']}", highlight=False)
    console.print(f"inputs: {_short(row.get('inputs'), 400)}")
    if row.get("error"):
        console.print(Text(f"error: {row['error']}", style="red"))
    for block in blocks:
        scope = f"{block['scope']}/" if block["scope"] else ""
        duration = f"{block['duration_ms']:,.1f} ms" if block.get("duration_ms") is not None else ""
        console.print(Text.assemble(("● ", STATUS_STYLE.get(block["status"] or "", "")),
                                    (f"{scope}{block['block_id']}", "bold"),
                                    f" ({block.get('type') or '?'}) ",
                                    (block["status"] or "", STATUS_STYLE.get(block["status"] or "", "")),
                                    f" {duration}"))
        if block.get("inputs") is not None:
            console.print(f"    inputs: {_short(block['inputs'], 300)}", highlight=False)
        if block.get("output") is not None:
            console.print(f"    output: {_short(block['output'], 300)}", highlight=False)
        if block.get("error"):
            console.print(Text(f"    error: {block['error']}", style="red"))
        if block.get("reason") and block["status"] in ("skipped", "cancelled"):
            console.print(Text(f"    {block['status']}: {block['reason']}", style="yellow"))
    for block_id, waiting_for in _pending(events).items():
        console.print(Text.assemble(("● ", STATUS_STYLE["pending"]), (block_id, "bold"),
                                    " ", ("pending", STATUS_STYLE["pending"]),
                                    f" - runs after '{waiting_for}' when the run is resumed"))
    if row.get("usage"):
        tokens = row["usage"].get("tokens", {})
        console.print(f"usage: {tokens.get('total', 0)} tokens, cost ${row['usage'].get('cost', 0):.6f}")
    if row.get("outputs"):
        console.print(f"outputs: {_short(row['outputs'], 600)}")
    for event in events if with_events else ():
        note = f"  {event.get('message')}" if event["type"] == "warning" else ""
        console.print(f"  {event['seq']:>4} {event['type']:<16} {event.get('block_id') or ''}"
                      f"{note}", highlight=False)


def _pending(events: list[dict]) -> dict[str, str]:
    """The blocks a waiting run holds back (id -> the block they wait for), as
    its last stop said them; none once the run went on."""
    if not events or events[-1].get("type") != "run_waiting":
        return {}
    pending = events[-1].get("pending")
    return pending if isinstance(pending, dict) else {}


async def cancel_run(db: str | None, run_id: str, wait: float, console: Console) -> bool:
    """Ask whichever process runs `run_id` to cancel it; True once it ended."""
    async with open_storage(db) as storage:
        row = await find_run(storage, run_id)
        run_id = row["run_id"]
        if row["status"] in TERMINAL_STATUSES:
            console.print(f"run {run_id} already ended: {row['status']}")
            return True
        status = await service_cancel_run(run_id, storage=storage, wait=wait)
    if status != "cancelling":
        console.print(f"run {run_id} {status}")
        return True
    console.print(f"asked run {run_id} to cancel; it is still running after {wait:g} s. "
                  f"If no process runs it any more (it was cut off), "
                  f"`flowforge runs resume {run_id}` finishes it instead.")
    return False
