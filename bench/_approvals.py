"""bench/chaos.py --approvals N: runs that wait on an approval, followed over
SSE and WebSocket across the decision (issue 41).

A `flowforge serve` process (`--workers none`: runs in the server's process,
on SQLite) starts N runs of `prepare -> ok (approval) -> pay | refuse`
(`refuse` is the approval's `on_reject`), `--parallel` at a time.  For each
run, as soon as it is started, an SSE client and a WebSocket client follow it
from its first event; each stream must end at `run_waiting` (the run waits:
`pay` and `refuse` pending).  Each client then connects again after that
event's seq (SSE: `Last-Event-ID`, WebSocket: `?after=`) and waits; once both
wait, the bench approves or rejects the run through the API (at random,
within `--decide-within` s) and the clients follow it to `run_finished`.
With `--server-restarts K` the server is killed with SIGKILL K times (every
`--server-every` s on average, once every run is started) and started again
on the same port; a client whose connection breaks connects again after the
last event it got, and a decision that found no server is sent again.

Counted per run (targets 0):
  twice / missing / out of order / unknown
                     per client, against the stored events: each stored
                     event received exactly once, in order
  not at waiting     a client's first stream did not end at `run_waiting`
  no terminal        the last event a client got is not the stored `run_finished`
  skipped early      `block_skipped` received before the decision, or stored
                     before the run's `run_waiting`
  waiting not once / finished not once
                     stored `run_waiting` / `run_finished` count is not 1
  wrong outcome      the run did not succeed through the branch decided
  client errors      a refusal, an `error` message, a client that gave up
and the decision -> `run_finished` latency each client saw (from sending the
decision's POST to receiving `run_finished`; with restarts it includes the
time the server took to come back).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import httpx
import websockets
from _pool import SRC, pct
from _sse import ServerProcess, check_events, sse_events

from flowforge.service.users import create_user
from flowforge.storage import storage_from_url

ENDED = ("succeeded", "failed", "cancelled")
WORKFLOW = {"id": "approve-chaos", "blocks": [
    {"id": "prepare", "type": "set", "with": {"amount": 30}},
    {"id": "ok", "type": "approval", "after": ["prepare"],
     "with": {"message": "Refund {{prepare.amount}} EUR?", "on_reject": "refuse"}},
    {"id": "pay", "type": "set", "after": ["ok"], "with": {"paid": "{{prepare.amount}}"}},
    {"id": "refuse", "type": "set", "after": ["ok"], "with": {"refused": True}}]}
BRANCH = {"approve": "pay", "reject": "refuse"}
DEFECTS = ("twice", "missing", "out_of_order", "unknown", "not_at_waiting", "no_terminal",
           "skipped_early", "waiting_not_once", "finished_not_once", "wrong_outcome",
           "client_errors", "stuck")


@dataclass
class Follower:
    """What one client saw of one run, over every connection it took."""
    kind: str
    events: list[dict[str, Any]] = field(default_factory=list)
    received: list[float] = field(default_factory=list)     # monotonic, per event
    ends: list[str | None] = field(default_factory=list)    # last type at each clean end
    broken: int = 0                 # connections that broke (not counting refused ones)
    errors: list[str] = field(default_factory=list)

    @property
    def after(self) -> int:
        return self.events[-1]["seq"] if self.events else 0

    def got(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self.received.append(time.monotonic())


class Bench:
    def __init__(self, folder: Path, args: Any) -> None:
        self.folder, self.args = folder, args
        self.rng = random.Random(args.seed)
        self.database = f"sqlite:///{folder / 'approvals.db'}"
        env = {**os.environ, "PYTHONPATH": str(SRC),
               # the bench measures followers, not the per-user limits
               "FLOWFORGE_MAX_USER_RATE": "0", "FLOWFORGE_MAX_USER_RUNS": "0",
               "FLOWFORGE_KNOWLEDGE_URL": f"sqlite:///{folder / 'kb.db'}"}
        self.server = ServerProcess(folder, env, self.database, workers="none")
        self.storage = storage_from_url(self.database)
        self.key = ""
        self.runs: dict[str, dict[str, Any]] = {}
        self.restarts: list[float] = []      # boot seconds of each restart
        self.down: list[tuple[float, float]] = []   # (killed, answering again), monotonic
        self.decisions_resent = 0

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    async def follow_sse(self, http: httpx.AsyncClient, run_id: str, seen: Follower,
                         opened: Callable[[], None] = lambda: None) -> None:
        """Until the stream ends cleanly; a broken one is taken again after the
        last event received."""
        while True:
            headers = {"Accept": "text/event-stream"}
            if seen.events:
                headers["Last-Event-ID"] = str(seen.after)
            connected = False
            try:
                async with http.stream("GET", f"/api/runs/{run_id}/events",
                                       headers=headers) as response:
                    if response.status_code >= 500:
                        raise httpx.TransportError(f"status {response.status_code}")
                    if response.status_code != 200:
                        seen.errors.append(f"{response.status_code}: "
                                           f"{(await response.aread())[:200]!r}")
                        return
                    opened()
                    connected = True
                    async for event in sse_events(response):
                        seen.got(event)
                seen.ends.append(seen.events[-1]["type"] if seen.events else None)
                return
            except httpx.TransportError:
                seen.broken += connected
                await asyncio.sleep(0.1)

    async def follow_ws(self, run_id: str, seen: Follower,
                        opened: Callable[[], None] = lambda: None) -> None:
        base = self.server.url.replace("http://", "ws://")
        while True:
            connected = False
            try:
                async with websockets.connect(f"{base}/ws/runs/{run_id}?after={seen.after}",
                                              additional_headers=self.headers,
                                              open_timeout=10) as socket:
                    opened()
                    connected = True
                    async for message in socket:
                        event = json.loads(message)
                        if "seq" not in event:          # an error message, then a close
                            seen.errors.append(str(event)[:200])
                            continue
                        seen.got(event)
                    code = socket.close_code
                if code == 1000:
                    seen.ends.append(seen.events[-1]["type"] if seen.events else None)
                    return
                if code is not None and code >= 4000:
                    seen.errors.append(f"closed with {code}")
                    return
                seen.broken += 1
            except (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException):
                seen.broken += connected
                await asyncio.sleep(0.1)

    async def decide(self, http: httpx.AsyncClient, run_id: str, decision: str) -> int:
        """POST the decision until a server answers it (the last answer's status)."""
        while True:
            try:
                response = await http.post(f"/api/runs/{run_id}/approvals/ok",
                                           json={"decision": decision})
                if response.status_code < 500:
                    return response.status_code
            except httpx.TransportError:
                pass
            self.decisions_resent += 1
            await asyncio.sleep(0.1)

    async def one(self, http: httpx.AsyncClient, run_id: str) -> None:
        """Follow one run to its stop, then across its decision to its end."""
        record = self.runs[run_id]
        sse, ws = record["sse"], record["ws"]
        give_up = self.args.timeout
        try:
            await asyncio.wait_for(asyncio.gather(self.follow_sse(http, run_id, sse),
                                                  self.follow_ws(run_id, ws)), give_up)
            waits = [asyncio.Event(), asyncio.Event()]
            rest = [asyncio.ensure_future(self.follow_sse(http, run_id, sse, waits[0].set)),
                    asyncio.ensure_future(self.follow_ws(run_id, ws, waits[1].set))]
            await asyncio.wait_for(asyncio.gather(*(w.wait() for w in waits)), give_up)
            await asyncio.sleep(self.rng.uniform(0, self.args.decide_within))
            record["decision"] = self.rng.choice(("approve", "reject"))
            record["decided_at"] = time.monotonic()
            record["answer"] = await self.decide(http, run_id, record["decision"])
            await asyncio.wait_for(asyncio.gather(*rest), give_up)
        except asyncio.TimeoutError:
            record["stuck"] = True

    async def restart_server(self) -> None:
        for _ in range(self.args.server_restarts):
            await asyncio.sleep(self.rng.uniform(0.5, 2 * self.args.server_every - 0.5))
            rows = [await self.storage.get_run(run_id) for run_id in self.runs]
            if all(row and row["status"] in ENDED for row in rows):
                return
            killed = time.monotonic()
            self.server.kill()
            self.restarts.append(await self.server.start())
            self.down.append((killed, time.monotonic()))

    async def run(self) -> dict[str, Any]:
        await self.storage.open()
        try:
            _user, self.key = await create_user(self.storage, "chaos", "user")
            await self.server.start()
            began = time.monotonic()
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=20)
            async with httpx.AsyncClient(base_url=self.server.url, headers=self.headers,
                                         timeout=httpx.Timeout(10.0, read=60.0),
                                         limits=limits) as http:
                saved = await http.post("/api/workflows", json=WORKFLOW)
                if saved.status_code not in (200, 201):
                    raise RuntimeError(f"saving the workflow: {saved.status_code} {saved.text}")
                gate = asyncio.Semaphore(self.args.parallel)
                followers: list[asyncio.Task] = []

                async def start() -> None:
                    async with gate:
                        answer = await http.post(f"/api/workflows/{WORKFLOW['id']}/runs",
                                                 json={})
                    if answer.status_code != 202:
                        raise RuntimeError(f"starting a run: {answer.status_code} "
                                           f"{answer.text}")
                    run_id = answer.json()["run_id"]
                    self.runs[run_id] = {"sse": Follower("sse"), "ws": Follower("ws")}
                    followers.append(asyncio.ensure_future(self.one(http, run_id)))

                await asyncio.gather(*(start() for _ in range(self.args.approvals)))
                restarting = asyncio.ensure_future(self.restart_server())
                await asyncio.gather(*followers)
                restarting.cancel()
            seconds = time.monotonic() - began
            report = await self.check()
        finally:
            self.server.stop()
            await self.storage.close()
        report["seconds"] = round(seconds, 1)
        return report

    async def check(self) -> dict[str, Any]:
        totals = dict.fromkeys(DEFECTS, 0)
        # decision -> run_finished per client kind; "across": a restart in between
        latencies: dict[str, list[float]] = {"sse": [], "ws": [], "across": []}
        bad: list[dict[str, Any]] = []
        broken = {"sse": 0, "ws": 0}
        for run_id, record in self.runs.items():
            stored = await self.storage.get_events(run_id)
            row = await self.storage.get_run(run_id)
            kinds = [event["type"] for event in stored]
            found = dict.fromkeys(DEFECTS, 0)
            found["stuck"] = int(bool(record.get("stuck")))
            found["waiting_not_once"] = int(kinds.count("run_waiting") != 1)
            found["finished_not_once"] = int(kinds.count("run_finished") != 1)
            stop = next((n for n, kind in enumerate(kinds) if kind == "run_waiting"), len(kinds))
            found["skipped_early"] = kinds[:stop].count("block_skipped")
            branch = BRANCH.get(record.get("decision", ""))
            ran = {event.get("block_id") for event in stored if event["type"] ==
                   "block_succeeded"}
            found["wrong_outcome"] = int(row is None or row["status"] != "succeeded"
                                         or branch not in ran or set(BRANCH.values()) - {branch}
                                         <= ran)
            decided = record.get("decided_at", float("inf"))
            for kind in ("sse", "ws"):
                seen: Follower = record[kind]
                for name, count in check_events(seen.events, stored).items():
                    found[name] += count
                found["not_at_waiting"] += int(not seen.ends or seen.ends[0] != "run_waiting")
                found["skipped_early"] += sum(
                    1 for event, at in zip(seen.events, seen.received)
                    if event["type"] == "block_skipped" and at < decided)
                found["client_errors"] += len(seen.errors)
                broken[kind] += seen.broken
                finished = [at for event, at in zip(seen.events, seen.received)
                            if event["type"] == "run_finished"]
                if finished and decided != float("inf"):      # the last: the run's end
                    across = any(decided < up and killed < finished[-1]
                                 for killed, up in self.down)
                    latencies["across" if across else kind].append(finished[-1] - decided)
            for name, count in found.items():
                totals[name] += count
            if any(found.values()) and len(bad) < 5:
                bad.append({"run_id": run_id, "decision": record.get("decision"),
                            "answer": record.get("answer"), "stored": kinds,
                            "sse": [e["type"] for e in record["sse"].events],
                            "ws": [e["type"] for e in record["ws"].events],
                            "errors": record["sse"].errors + record["ws"].errors,
                            **{k: v for k, v in found.items() if v}})
        decisions = [record.get("decision") for record in self.runs.values()]
        report: dict[str, Any] = {
            "mode": "approvals", "runs": len(self.runs), "approved": decisions.count("approve"),
            "rejected": decisions.count("reject"), "server_restarts": len(self.restarts),
            "server_boot_p50_s": round(pct(self.restarts, 0.5), 2) if self.restarts else None,
            "sse_broken": broken["sse"], "ws_broken": broken["ws"],
            "decisions_resent": self.decisions_resent,
            "decisions_answered_409": sum(1 for r in self.runs.values()
                                          if r.get("answer") == 409),
            "defects": sum(totals.values()), **totals}
        report["latencies_across_a_restart"] = len(latencies["across"])
        for kind, values in latencies.items():
            report[f"latency_{kind}_p50_ms"] = round(pct(values, 0.5) * 1000) if values else None
            report[f"latency_{kind}_p99_ms"] = round(pct(values, 0.99) * 1000) if values else None
        report["bad_runs"] = bad
        return report


def main(args: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="chaos-approvals-") as name:
        report = asyncio.run(Bench(Path(name), args).run())
    report.update({"parallel": args.parallel, "decide_within_s": args.decide_within,
                   "server_every_s": args.server_every if args.server_restarts else None})
    return report


ROWS = (("runs", "runs (approved / rejected)"), ("server_restarts", "server kill -9 + restart"),
        ("sse_broken", "SSE connections broken"), ("ws_broken", "WebSocket connections broken"),
        ("decisions_resent", "decisions sent again (no server)"),
        ("twice", "events received twice"), ("missing", "stored events not received"),
        ("out_of_order", "events out of order"), ("unknown", "events received, not stored"),
        ("not_at_waiting", "first stream not ended at `run_waiting`"),
        ("no_terminal", "last event received != stored `run_finished`"),
        ("skipped_early", "`block_skipped` before the decision"),
        ("waiting_not_once", "runs without exactly one `run_waiting`"),
        ("finished_not_once", "runs without exactly one `run_finished`"),
        ("wrong_outcome", "runs not succeeded through the decided branch"),
        ("client_errors", "client errors"), ("stuck", "runs a client gave up on"))


def table(report: dict[str, Any]) -> str:
    lines = ["| | |", "| --- | ---: |"]
    for key, title in ROWS:
        value = report[key]
        if key == "runs":
            value = f"{value} ({report['approved']} / {report['rejected']})"
        lines.append(f"| {title} | {value} |")
    for kind, title in (("sse", "SSE"), ("ws", "WebSocket"),
                        ("across", "either, a restart in between")):
        lines.append(f"| decision -> `run_finished`, {title}, p50 / p99 ms | "
                     f"{report[f'latency_{kind}_p50_ms']} / {report[f'latency_{kind}_p99_ms']} |")
    return "\n".join(lines)
