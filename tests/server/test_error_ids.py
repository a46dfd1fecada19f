"""Tenants read their runs' events over the API, so a failure shows them its
message and, when it is a bug, an error id - never a traceback with the
server's files (issue 23); the traceback is in the server's log under that
id.  A local run keeps the traceback in its events, for debugging."""

from __future__ import annotations

import logging
import re

import flowforge

FAILING = {"id": "fails", "blocks": [
    {"id": "bug", "type": "function", "with": {"function": "srv_fail",
                                              "args": {"message": "the bug"}}},
    {"id": "bad", "type": "parser", "with": {"text": "no json here", "schema": "String"}}]}


def _failed(events: list[dict]) -> dict[str, dict]:
    return {e["block_id"]: e for e in events if e["type"] == "block_failed"}


async def test_a_bug_shows_the_tenant_an_error_id_and_logs_the_traceback(server, caplog):
    caplog.set_level(logging.ERROR, logger="flowforge.errors")
    async with server.client() as alice:
        assert (await alice.post("/api/workflows", json=FAILING)).status_code == 201
        run = (await alice.post("/api/workflows/fails/runs?wait=true", json={})).json()
        events = (await alice.get(f"/api/runs/{run['run_id']}/events",
                                  headers={"Accept": "application/json"})).text
    failed = _failed(run["events"])
    assert failed["bug"]["error"] == "RuntimeError: the bug"
    error_id = failed["bug"]["error_id"]
    assert re.fullmatch(r"[0-9a-f]{12}", error_id) and "traceback" not in failed["bug"]
    # an expected failure: its message is all there is
    assert "no JSON value" in failed["bad"]["error"]
    assert "error_id" not in failed["bad"] and "traceback" not in failed["bad"]
    for text in (str(run), events):
        assert "Traceback" not in text and ".py" not in text
    assert error_id in events
    logged = [r for r in caplog.records if error_id in r.getMessage()]
    assert logged and logged[0].exc_info is not None
    assert "srv_fail" in caplog.text and "Traceback" in caplog.text


async def test_a_local_run_keeps_the_traceback_for_debugging():
    result = await flowforge.run(FAILING, storage=False)
    failed = _failed(result.events)
    assert "Traceback" in failed["bug"]["traceback"] and "srv_fail" in failed["bug"]["traceback"]
    assert "traceback" not in failed["bad"]
