"""Load test of `flowforge serve`: N concurrent clients each start a run of a
5-block workflow (agents on a scripted model answering after 50 ms) and follow
its SSE stream to `run_finished`, against a real server process on loopback,
on SQLite and on PostgreSQL.

    .venv/bin/python bench/server.py                      # 200 clients, both back ends
    .venv/bin/python bench/server.py --clients 50 --backend sqlite

Reports runs/s (runs finished / wall time), the p50/p99 of one client's time
from POST to `run_finished`, failed requests, and checks every run's stored
record: every event the client received is stored, in order, with no gap and
no duplicate, the stream ended with `run_finished`, and every block has a
`succeeded` row.  PostgreSQL is a throwaway server (scripts/postgres.sh) with
fsync on.  Client and server share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from httpx_sse import EventSource

ROOT = Path(__file__).resolve().parents[1]
FLOWFORGE = str(Path(sys.executable).parent / "flowforge")


def workflow(model: str, blocks: int) -> dict:
    items = [{"id": "b0", "type": "agent", "with": {"prompt": "Topic: {{input.topic}}"}}]
    items += [{"id": f"b{i}", "type": "agent", "with": {"prompt": f"Go on: {{{{b{i - 1}.content}}}}"}}
              for i in range(1, blocks)]
    return {"id": "bench", "inputs": {"topic": {"type": "string"}},
            "defaults": {"model": model}, "blocks": items}


@dataclass
class Outcome:
    run_id: str | None = None
    seconds: float = 0.0
    seqs: list[int] = field(default_factory=list)
    last_type: str | None = None
    error: str | None = None


async def one_client(client: httpx.AsyncClient, index: int) -> Outcome:
    outcome = Outcome()
    started = time.perf_counter()
    try:
        response = await client.post("/api/workflows/bench/runs",
                                     json={"inputs": {"topic": f"topic {index}"}})
        if response.status_code != 202:
            outcome.error = f"start: HTTP {response.status_code} {response.text[:200]}"
            return outcome
        outcome.run_id = response.json()["run_id"]
        async with client.stream("GET", response.json()["events_url"]) as stream:
            if stream.status_code != 200:
                outcome.error = f"events: HTTP {stream.status_code}"
                return outcome
            async for sse in EventSource(stream).aiter_sse():
                if not sse.data:
                    continue                  # a ping (httpx-sse passes them on, empty)
                event = json.loads(sse.data)
                outcome.seqs.append(event["seq"])
                outcome.last_type = event["type"]
        outcome.seconds = time.perf_counter() - started
    except Exception as exc:  # noqa: BLE001 - counted as a failed request
        phase = "start" if outcome.run_id is None else f"events after {len(outcome.seqs)}"
        outcome.error = f"{phase}: {type(exc).__name__}: {exc!r}"
    return outcome


async def check_record(client: httpx.AsyncClient, outcome: Outcome, blocks: int) -> str | None:
    """None when the stored run is complete and matches what the client saw."""
    if outcome.error:
        return outcome.error
    detail = (await client.get(f"/api/runs/{outcome.run_id}")).json()
    stored = (await client.get(f"/api/runs/{outcome.run_id}/events",
                               headers={"Accept": "application/json"})).json()["events"]
    stored_seqs = [e["seq"] for e in stored]
    if detail["status"] != "succeeded":
        return f"run {outcome.run_id} is {detail['status']}"
    if outcome.seqs != list(range(1, len(outcome.seqs) + 1)) or outcome.last_type != \
            "run_finished":
        return f"run {outcome.run_id}: stream had gaps/duplicates or no run_finished"
    if stored_seqs != outcome.seqs:
        return f"run {outcome.run_id}: stored {len(stored_seqs)} events, received " \
               f"{len(outcome.seqs)}"
    done = [b for b in detail["blocks"].values() if b["status"] == "succeeded"]
    if len(done) != blocks:
        return f"run {outcome.run_id}: {len(done)}/{blocks} blocks succeeded"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def bench_backend(name: str, url: str, clients: int, blocks: int, rules: Path) -> dict:
    created = subprocess.run([FLOWFORGE, "users", "create", "bench", "--db", url],
                             capture_output=True, text=True, check=True)
    key = created.stdout.splitlines()[-1]
    # the scripted model reads its rules file on the server: a capability to grant
    subprocess.run([FLOWFORGE, "users", "grant", "bench", "server_files", "--db", url],
                   capture_output=True, text=True, check=True)
    port = free_port()
    server = subprocess.Popen([FLOWFORGE, "serve", "--port", str(port), "--db", url,
                               "--log-level", "warning"])
    base = f"http://127.0.0.1:{port}"
    limits = httpx.Limits(max_connections=clients + 20, max_keepalive_connections=clients + 20)
    try:
        async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits,
                                     headers={"Authorization": f"Bearer {key}"}) as client:
            for _ in range(300):
                try:
                    if (await client.get("/health")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            response = await client.post("/api/workflows",
                                         json=workflow(f"scripted/{rules}", blocks))
            if response.status_code != 201 and response.status_code != 200:
                raise SystemExit(f"saving the workflow: {response.status_code} {response.text}")
            await one_client(client, -1)                    # warm-up: imports, compile
            started = time.perf_counter()
            outcomes = await asyncio.gather(*(one_client(client, i) for i in range(clients)))
            wall = time.perf_counter() - started
        # Checking is not part of the load: a fresh pool of 20 connections (the load's
        # idle keep-alive connections may have been closed by the server meanwhile).
        async with httpx.AsyncClient(base_url=base, timeout=120,
                                     limits=httpx.Limits(max_connections=20),
                                     headers={"Authorization": f"Bearer {key}"}) as checker:
            problems = [p for p in await asyncio.gather(
                *(check_record(checker, o, blocks) for o in outcomes)) if p]
    finally:
        os.kill(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    latencies = sorted(o.seconds for o in outcomes if not o.error)
    failed = sum(1 for o in outcomes if o.error)
    events = sum(len(o.seqs) for o in outcomes)
    return {"backend": name, "clients": clients, "wall_s": round(wall, 2),
            "runs_per_s": round((clients - failed) / wall, 1),
            "p50_s": round(statistics.median(latencies), 3) if latencies else None,
            "p99_s": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 3)
            if latencies else None,
            "failed_requests": failed, "events": events,
            "incomplete_records": len(problems), "problems": problems[:5]}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=50)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--results", type=Path, default=None,
                        help="Append a Markdown table to this file (e.g. bench/RESULTS.md).")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from flowforge.storage import testing

    reports = []
    with tempfile.TemporaryDirectory(prefix="flowforge-bench-") as folder:
        rules = Path(folder) / "rules.yaml"
        rules.write_text(f"default: noted\nlatency_ms: {args.latency_ms}\n")
        if args.backend in ("sqlite", "both"):
            reports.append(await bench_backend("SQLite", f"sqlite:///{folder}/bench.db",
                                               args.clients, args.blocks, rules))
        if args.backend in ("postgres", "both"):
            pg = testing.start(durable=True)
            try:
                reports.append(await bench_backend("PostgreSQL 15", pg.url, args.clients,
                                                   args.blocks, rules))
            finally:
                testing.stop(pg)
    print(json.dumps(reports, indent=2))
    if args.results:
        lines = ["", "## Server", "",
                 f"`bench/server.py`: {args.clients} concurrent clients, each starts a run of a "
                 f"{args.blocks}-block workflow (agents, scripted model, {args.latency_ms:g} ms "
                 f"per answer) and follows its SSE stream to `run_finished`; `flowforge serve` "
                 f"on loopback, one process, 2 cores shared with the clients.", "",
                 "| back end | runs/s | p50 | p99 | failed requests | events | incomplete "
                 "records |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in reports:
            lines.append(f"| {r['backend']} | {r['runs_per_s']} | {r['p50_s']} s | "
                         f"{r['p99_s']} s | {r['failed_requests']} | {r['events']} | "
                         f"{r['incomplete_records']} |")
        with args.results.open("a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
    return 0 if all(r["failed_requests"] == 0 and r["incomplete_records"] == 0
                    for r in reports) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
