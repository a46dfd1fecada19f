"""The live view of a run's blocks, and the summary printed when it ends.

The view is just another consumer of the event stream: it keeps a small
table of block states updated from events and lets rich redraw it.  Child
blocks of loops and parallel maps are folded into their container's row
("pass 3", "item 7") so a long loop does not scroll the screen away.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from flowforge.engine.result import RunResult
from flowforge.workflow.graph import CompiledWorkflow

__all__ = ["LiveProgress", "print_summary", "STATUS_STYLE"]

STATUS_STYLE = {"pending": "dim", "running": "cyan", "succeeded": "green", "failed": "bold red",
                "skipped": "yellow", "cancelled": "magenta", "waiting": "blue"}
_ICON = {"pending": "·", "succeeded": "✔", "failed": "✘", "skipped": "↷", "cancelled": "■",
         "waiting": "⏸"}


class LiveProgress:
    def __init__(self, workflow: CompiledWorkflow, console: Console) -> None:
        self.console = console
        self.rows: dict[str, dict[str, Any]] = {
            bid: {"type": node.type, "status": "pending", "started": None, "ms": None,
                  "detail": ""} for bid, node in workflow.graph.nodes.items()}
        self.title = workflow.doc.name or workflow.id
        self.live: Live | None = None
        self.spinner = Spinner("dots")

    def start(self) -> None:
        if not self.console.is_terminal:
            return
        self.live = Live(get_renderable=self.render, console=self.console,
                         refresh_per_second=10, transient=False)
        self.live.start()

    def stop(self) -> None:
        if self.live is not None:
            self.live.refresh()
            self.live.stop()

    def on_event(self, event: dict) -> None:
        kind = event["type"]
        scope = event.get("scope")
        block_id = event.get("block_id")
        if kind == "warning":
            # Above the live table (or a plain line): something the run did not do as written.
            where = f"{scope}/{block_id}" if scope else block_id
            self.console.print(Text.assemble(("warning: ", "yellow"),
                                             f"{where}: {event.get('message', '')}"),
                               highlight=False, soft_wrap=True)
            return
        if scope:
            top = scope.split("/")[0].split("[")[0]
            row = self.rows.get(top)
            if row is not None and kind == "block_started":
                index = scope.split("/")[0].partition("[")[2].rstrip("]")
                label = "item" if row["type"] == "parallel" else "pass"
                row["detail"] = f"{label} {int(index) + 1 if index.isdigit() else index}: {block_id}"
            return
        row = self.rows.get(block_id) if block_id else None
        if row is None:
            return
        if kind == "block_started":
            row["status"], row["started"] = "running", time.time()
            if not self.live:
                # Not a terminal (a log, CI): a line when a block starts, too, so a
                # slow block is visible while it runs.
                self.console.print(f"▶ {block_id} started", highlight=False, soft_wrap=True)
        elif kind in ("block_succeeded", "block_failed", "block_skipped", "block_cancelled",
                      "block_waiting"):
            row["status"] = kind.removeprefix("block_")
            if row["started"] is not None:
                row["ms"] = (time.time() - row["started"]) * 1000
            if kind == "block_failed":
                # Whole: the live table cuts it to fit, plain lines never do.
                row["detail"] = str(event.get("error") or "")
            elif kind == "block_skipped":
                row["detail"] = str(event.get("reason") or "")
            elif kind == "block_succeeded" and not scope:
                row["detail"] = ""
        elif kind == "llm_delta":
            text = (row.get("stream", "") + str(event.get("text") or event.get("delta") or ""))
            row["stream"] = text[-200:]
            row["detail"] = text.replace("\n", " ")[-60:]
        elif kind == "llm_restart":
            # A cut stream is answered again from the start: drop what was shown.
            row["stream"] = ""
            row["detail"] = "answer restarted"
        elif kind == "tool_called":
            row["detail"] = f"tool {event.get('name', '')}"
        if not self.live and kind in ("block_succeeded", "block_failed", "block_skipped"):
            # Not a terminal: one plain line per settled block.
            ms = f" {row['ms']:.0f} ms" if row["ms"] is not None else ""
            self.console.print(f"{_ICON.get(row['status'], '?')} {block_id} "
                               f"{row['status']}{ms} {row['detail']}".rstrip(), highlight=False,
                               soft_wrap=True)

    def render(self) -> Any:
        table = Table(title=self.title, title_justify="left", expand=False, box=None,
                      padding=(0, 1))
        table.add_column("", width=2)
        table.add_column("block")
        table.add_column("type", style="dim")
        table.add_column("status")
        table.add_column("time", justify="right")
        table.add_column("", style="dim", overflow="ellipsis", max_width=60)
        now = time.time()
        for bid, row in self.rows.items():
            status = row["status"]
            icon: Any = self.spinner if status == "running" else _ICON.get(status, "?")
            ms = row["ms"] if row["ms"] is not None else (
                (now - row["started"]) * 1000 if row["started"] else None)
            table.add_row(icon, bid, row["type"], Text(status, style=STATUS_STYLE.get(status, "")),
                          f"{ms:,.0f} ms" if ms is not None else "", row["detail"])
        return Group(table)


def print_summary(result: RunResult, console: Console, stored: bool) -> None:
    style = STATUS_STYLE.get(result.status, "")
    console.print(Text.assemble(("run ", "bold"), (result.run_id, "dim"), " ",
                                (result.status, style)))
    table = Table(box=None, padding=(0, 1))
    table.add_column("block")
    table.add_column("status")
    table.add_column("time", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("note", style="dim", overflow="fold")
    per_block = result.usage.get("blocks", {})
    for bid, record in result.blocks.items():
        tokens = per_block.get(bid, {}).get("tokens", {}).get("total")
        note = record.error or (record.reason if record.status in ("skipped", "pending")
                                else "") or ""
        table.add_row(bid, Text(record.status, style=STATUS_STYLE.get(record.status, "")),
                      f"{record.duration_ms:,.1f} ms" if record.duration_ms is not None else "",
                      str(tokens) if tokens else "", note)
    console.print(table)
    for bid, output in result.outputs.items():
        message = output.get("message") if isinstance(output, dict) else None
        shown = message if message is not None else output
        console.print(Text.assemble((f"{bid}: ", "bold"),
                                    str(shown) if not isinstance(shown, (dict, list))
                                    else _json(shown)))
    tokens = result.usage.get("tokens", {})
    if tokens.get("total"):
        console.print(f"tokens: {tokens.get('prompt', 0)} prompt + {tokens.get('completion', 0)} "
                      f"completion = {tokens['total']}; cost ${result.usage.get('cost', 0):.6f}")
    if result.error:
        console.print(Text(f"error: {result.error}", style="red"))
    if stored:
        console.print(Text(f"details: flowforge runs show {result.run_id}", style="dim"))


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, default=str)
