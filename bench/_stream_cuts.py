"""bench/chaos.py --stream-cuts N: answers cut short by a closed connection,
in bulk (issue 41).

N runs of one `llm` or `agent` block (alternately) that streams from
`openai-compatible/primary/m`, a loopback fake (bench/_fake_openai.py) that
closes the connection in the middle of the answer in a fraction `--cut-rate`
of its answers, with `openai-compatible/backup/m` (a second fake, cutting at
`--fallback-cut-rate`) as the fallback; then N more runs with no fallback.
The runs go `--parallel` at a time in this process, on a SQLite store, with
the providers' default retry policy (3 attempts, backoff from 0.5 s).

Before issue 41 a cut answer was the block's output with status `succeeded`.
Now every cut is retried, then given to the fallback, and a block that no
model answered whole fails saying the stream was cut.  Counted per variant:
  whole          runs that succeeded with the whole answer of the model that
                 answered (the fake's answer is a function of the prompt)
  partial        runs that succeeded with any other text (target 0)
  failed cut     runs that failed with a located error: the run's error names
                 the block and says "the stream was cut"
  failed other   runs that failed any other way (target 0)
  kept partial   failed runs whose stored output still holds text (target 0)
  restarts off   runs whose `llm_restart` events do not match the cuts their
                 requests met: every cut after which a model answered is
                 announced once (the text shown so far is void), so a
                 follower never shows the same text twice (target 0)
  shown != kept  succeeded runs whose `llm_delta` text after the last
                 `llm_restart` is not the stored answer (target 0)
and `llm_restart` / `llm_retry` events, requests and cuts injected per server.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from _fake_openai import FakeOpenAI, answer_for

import flowforge
from flowforge.storage import storage_from_url

PRIMARY, BACKUP = "openai-compatible/primary/m", "openai-compatible/backup/m"
DEFECTS = ("partial", "failed_other", "kept_partial", "restarts_off", "shown_not_kept")


def _workflow(index: int, variant: str, fallback: bool) -> tuple[dict, str]:
    prompt = f"question {variant}-{index}: what is six times seven?"
    block = {"prompt": prompt, "model": PRIMARY, "stream": True}
    if fallback:
        block["fallback"] = [BACKUP]
    kind = "llm" if index % 2 == 0 else "agent"
    return {"id": f"cut-{kind}", "blocks": [{"id": "ask", "type": kind, "with": block}]}, prompt


def _classify(result: Any, prompt: str, cuts: int) -> dict[str, int]:
    """One run's counts (see the module docstring)."""
    kinds = [event["type"] for event in result.events]
    restarts = kinds.count("llm_restart")
    found = {"restarts": restarts, "retries": kinds.count("llm_retry")}
    output = result.results.get("ask") or {}
    text = output.get("content") or ""
    if result.status == "succeeded":
        model = output.get("model") or ""
        label = "backup" if model == BACKUP else "primary"
        found["by_fallback"] = int(label == "backup")
        found["whole" if text == answer_for(label, prompt) else "partial"] = 1
        found["restarts_off"] = int(restarts != cuts)
        last = max((n for n, kind in enumerate(kinds) if kind == "llm_restart"), default=-1)
        shown = "".join(event.get("text", "") for event in result.events[last + 1:]
                        if event["type"] == "llm_delta")
        found["shown_not_kept"] = int(shown != text)
    else:
        error = result.error or ""
        located = "the stream was cut" in error and "ask" in error
        found["failed_cut" if located else "failed_other"] = 1
        found["kept_partial"] = int(bool(text))
        # the last cut before giving up may go unannounced: nothing replaces it
        found["restarts_off"] = int(not cuts - 1 <= restarts <= cuts)
    return found


async def _variant(folder: Path, name: str, fallback: bool, args: Any,
                   servers: dict[str, FakeOpenAI]) -> dict[str, Any]:
    storage = storage_from_url(f"sqlite:///{folder / f'{name}.db'}")
    await storage.open()
    gate = asyncio.Semaphore(args.parallel)
    totals: dict[str, int] = {}
    before = {label: (server.requests, server.cuts) for label, server in servers.items()}
    bad: list[dict[str, Any]] = []

    async def one(index: int) -> None:
        workflow, prompt = _workflow(index, name, fallback)
        async with gate:
            result = await flowforge.run(workflow, storage=storage)
        cuts = sum(server.cuts_by_prompt[prompt] for server in servers.values())
        found = _classify(result, prompt, cuts)
        stored = await storage.get_run(result.run_id)
        found["stored_status_differs"] = int(stored is None or stored["status"] != result.status)
        for key, value in found.items():
            totals[key] = totals.get(key, 0) + value
        if any(found.get(key) for key in (*DEFECTS, "stored_status_differs")) and len(bad) < 5:
            bad.append({"run_id": result.run_id, "status": result.status, "cuts": cuts,
                        "error": result.error, **found})

    began = time.monotonic()
    try:
        await asyncio.gather(*(one(index) for index in range(args.stream_cuts)))
    finally:
        await storage.close()
    report = {"runs": args.stream_cuts, "fallback": fallback,
              "seconds": round(time.monotonic() - began, 1)}
    for key in ("whole", "partial", "failed_cut", "failed_other", "kept_partial", "restarts",
                "retries", "by_fallback", "restarts_off", "shown_not_kept",
                "stored_status_differs"):
        report[key] = totals.get(key, 0)
    for label, server in servers.items():
        report[f"{label}_requests"] = server.requests - before[label][0]
        report[f"{label}_cuts"] = server.cuts - before[label][1]
    report["cuts"] = sum(report[f"{label}_cuts"] for label in servers)
    report["bad_runs"] = bad
    return report


async def _bench(folder: Path, args: Any) -> dict[str, Any]:
    servers = {"primary": FakeOpenAI(label="primary", cut_rate=args.cut_rate,
                                     seed=args.seed).start(),
               "backup": FakeOpenAI(label="backup", cut_rate=args.fallback_cut_rate,
                                    seed=args.seed).start()}
    os.environ["OPENAI_COMPATIBLE_PRIMARY_BASE_URL"] = servers["primary"].url
    os.environ["OPENAI_COMPATIBLE_BACKUP_BASE_URL"] = servers["backup"].url
    try:
        with_fallback = await _variant(folder, "fallback", True, args, servers)
        alone = await _variant(folder, "alone", False, args, servers)
    finally:
        for server in servers.values():
            server.stop()
    defects = sum(variant[key] for variant in (with_fallback, alone)
                  for key in (*DEFECTS, "stored_status_differs"))
    return {"mode": "stream_cuts", "cut_rate": args.cut_rate,
            "fallback_cut_rate": args.fallback_cut_rate, "parallel": args.parallel,
            "defects": defects, "with_fallback": with_fallback, "no_fallback": alone}


def main(args: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="chaos-cuts-") as name:
        return asyncio.run(_bench(Path(name), args))


ROWS = (("runs", "runs"), ("whole", "succeeded, whole answer"),
        ("by_fallback", "... of them answered by the fallback"),
        ("partial", "succeeded with partial text (target 0)"),
        ("failed_cut", "failed, located \"the stream was cut\""),
        ("failed_other", "failed otherwise (target 0)"),
        ("kept_partial", "failed runs keeping partial text (target 0)"),
        ("cuts", "cuts injected"), ("restarts", "`llm_restart` events"),
        ("retries", "`llm_retry` events"),
        ("restarts_off", "runs whose restarts do not match their cuts (target 0)"),
        ("shown_not_kept", "streamed text after the last restart != stored answer (target 0)"),
        ("primary_requests", "requests to the primary"),
        ("backup_requests", "requests to the fallback"), ("seconds", "seconds"))


def table(report: dict[str, Any]) -> str:
    lines = ["| | with fallback | no fallback |", "| --- | ---: | ---: |"]
    for key, title in ROWS:
        lines.append(f"| {title} | {report['with_fallback'][key]} | "
                     f"{report['no_fallback'][key]} |")
    return "\n".join(lines)
