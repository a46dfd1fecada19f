"""WebSocket progress: the same stored event stream as SSE, plus control.

    WS /ws/runs/{run_id}?after=<seq>     Sec-WebSocket-Protocol: flowforge, bearer.<key>
    WS /ws/agent-workflow/{session_id}          (the seed system's name)

The server sends each event as a JSON object (`seq`, `type`, ...) and closes
with 1000 after `run_finished` (or after `run_waiting`: the run waits; connect
again with `?after=` that seq to go on with it).  A research session (a run of the research
orchestrator) on the agent-workflow path gets the session's own events
instead (`apps.research.session.ResearchEvents`: status, phase, complete, error;
`seq` is the engine event's, for `after=`).  A stream that fails on the
server sends an `error` event before closing with 1011.  The client may send `{"type": "cancel"}`
(or the bare text `cancel`); the server answers `{"type": "cancel_requested"}`
and the stream then shows the blocks being cancelled and the run finishing
`cancelled`.  A bad key closes with 4401, a run that is not the caller's
with 4404, each after an `{"type": "error", ...}` message saying why.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from flowforge.apps.research.session import RESEARCH_WORKFLOW_ID, ResearchEvents
from flowforge.engine.events import STOP_EVENTS
from flowforge.server.auth import is_admin, websocket_protocol, websocket_user
from flowforge.server.errors import error_body

__all__ = ["router"]

router = APIRouter()
log = logging.getLogger("flowforge.server")


async def _refuse(websocket: WebSocket, status: int, message: str) -> None:
    await websocket.send_json({"type": "error", **error_body(status, message)})
    await websocket.close(code=4000 + status, reason=message[:120])


@router.websocket("/ws/runs/{run_id}")
async def run_socket(websocket: WebSocket, run_id: str) -> None:
    await follow_over_websocket(websocket, run_id)


@router.websocket("/ws/agent-workflow/{session_id}")
async def agent_workflow_socket(websocket: WebSocket, session_id: str) -> None:
    await follow_over_websocket(websocket, session_id, research=True)


async def follow_over_websocket(websocket: WebSocket, run_id: str, *,
                                research: bool = False) -> None:
    storage = websocket.app.state.storage
    await websocket.accept(subprotocol=websocket_protocol(websocket))
    user = await websocket_user(websocket)
    if user is None:
        await _refuse(websocket, 401, "missing or invalid API key: send `Authorization: "
                                      "Bearer <key>`, or from a browser the subprotocols "
                                      "`flowforge` and `bearer.<key>`")
        return
    run = await storage.get_run(run_id)
    if run is None or (run.get("user_id") != user["user_id"] and not is_admin(user)):
        await _refuse(websocket, 404, f"no run '{run_id}'")
        return
    raw_after = websocket.query_params.get("after", "0")
    after = _sequence_number(raw_after)
    if after is None:
        await _refuse(websocket, 400, f"after={raw_after[:40]!r} must be an event's sequence "
                                      f"number, from 0 to 2**63 - 1")
        return

    translator = None
    if research and run.get("workflow_id") == RESEARCH_WORKFLOW_ID:
        translator = ResearchEvents(run_id)

    async def send_events() -> None:
        try:
            if translator is None:
                async for event in storage.follow_events(run_id, after):
                    await websocket.send_text(json.dumps(event, default=str,
                                                         ensure_ascii=False))
                return
            # From the first event, so the session's state (phase, progress) is
            # right; only what follows `after` is sent.
            finished = False
            async for event in storage.follow_events(run_id, 0):
                finished = finished or event.get("type") in STOP_EVENTS
                for item in translator.translate(event):
                    if (event.get("seq") or 0) > after:
                        await websocket.send_text(json.dumps(item, default=str,
                                                             ensure_ascii=False))
            if not finished:        # the process running it stopped without finishing it
                await websocket.send_json({
                    "type": "error", "status": "interrupted", "session_id": run_id,
                    "phases": translator.phases,
                    **error_body(409, f"the session stopped without finishing (the process "
                                      f"running it ended): `flowforge runs resume {run_id}` "
                                      f"finishes it")})
        except WebSocketDisconnect:
            raise
        except Exception as exc:
            log.exception("the event stream of run %s failed", run_id)
            try:
                await websocket.send_json({"type": "error", "status": "stream_failed",
                                           **error_body(500, f"the run's event stream failed "
                                                             f"on the server: {exc}")})
            except Exception:           # the client is gone: nothing more to tell it
                pass
            raise

    async def receive_commands() -> None:
        while True:
            text = await websocket.receive_text()
            await websocket.send_json(_command(websocket, run_id, text))

    sender = asyncio.create_task(send_events())
    receiver = asyncio.create_task(receive_commands())
    done, pending = await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    if sender in done and sender.exception() is None:
        await websocket.close(code=1000)
    elif sender in done:              # the stored stream failed: say so, not a bare drop
        await websocket.close(code=1011, reason="the run's event stream failed on the server")
    elif receiver in done and not isinstance(receiver.exception(), WebSocketDisconnect):
        await websocket.close(code=1011)


def _sequence_number(text: str) -> int | None:
    """ASCII digits within 64 bits, else None (`str.isdigit` also accepts
    '²', which `int` refuses, and a 2**64 would overflow the database)."""
    if not re.fullmatch(r"[0-9]{1,19}", text):
        return None
    value = int(text)
    return value if value <= 2**63 - 1 else None


def _command(websocket: WebSocket, run_id: str, text: str) -> dict[str, Any]:
    try:
        message = json.loads(text)
    except json.JSONDecodeError:
        message = {"type": text.strip()}
    kind = message.get("type") if isinstance(message, dict) else None
    if kind != "cancel":
        return {"type": "error", **error_body(400, f"unknown message {text[:80]!r}: send "
                                                   f"{{\"type\": \"cancel\"}}")}
    if websocket.app.state.live.cancel(run_id) is None:
        return {"type": "error", **error_body(409, "the run is not running on this server")}
    return {"type": "cancel_requested", "run_id": run_id}
