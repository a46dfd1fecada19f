"""The HTTP reference page: every operation of the OpenAPI document with its
request body's fields and an answer it really gave, and the WebSocket routes.

The answers are not written by hand: `record()` starts the app in this
process on a scratch database (scripted models, no network), sends one
request to every operation in an order that makes each possible (a workflow
saved before it runs, a run before its events), and keeps what came back.
A route that answers an error while recording stops the build: the example
would be a lie.  Long values are cut (`…`) so an answer stays readable.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["http_page", "record", "body_fields", "websocket_routes", "WEBSOCKETS"]

#: What each WebSocket route carries, from `server/websocket.py` (checked against
#: a real server by tests/docs/test_http_reference.py).
WEBSOCKETS = {
    "/ws/runs/{run_id}": {
        "summary": "Follow one run's events live, and cancel it.",
        "query": [("after", "Only the events after this `seq` (default 0: from the start).")],
        "client": [("`{\"type\": \"cancel\"}` or the text `cancel`",
                    "Cancel the run. Answered by `{\"type\": \"cancel_requested\", "
                    "\"run_id\": ...}`; the stream then shows the blocks being cancelled "
                    "and `run_finished` with `status: cancelled`."),
                   ("anything else", "Answered by an `error` message (400) naming `cancel`; "
                                     "the stream goes on.")],
        "server": [("each stored event", "A JSON object: `seq`, `type` (`run_started`, "
                                         "`block_started`, `block_succeeded`, ..., "
                                         "`run_finished`), `run_id`, `time`, and the event's "
                                         "own fields, exactly as `GET /api/runs/{run_id}/"
                                         "events` gives them."),
                   ("`{\"type\": \"error\", \"error\": {\"code\", \"message\"}}`",
                    "A refused connection or command, or a stream that failed on the "
                    "server.")],
        "ends": [("1000", "After `run_finished`, or after `run_waiting` (an approval, a long "
                          "wait: connect again with `?after=` its `seq` to go on)."),
                 ("4401", "No key or a bad one (after an `error` message)."),
                 ("4404", "No such run for this user (after an `error` message)."),
                 ("4400", "`after` is not a sequence number."),
                 ("1011", "The stream failed on the server (after an `error` message).")],
    },
    "/ws/agent-workflow/{session_id}": {
        "summary": "Follow a session started by `POST /agent-workflow`.",
        "query": [("after", "Only the messages after this `seq`.")],
        "client": [("`{\"type\": \"cancel\"}` or the text `cancel`",
                    "Cancel the session, as on `/ws/runs/{run_id}`.")],
        "server": [("a workflow session", "The run's events, as on `/ws/runs/{run_id}`."),
                   ("a research session (`question`)",
                    "Session messages, each with `type`, `session_id`, `seq` and `progress` "
                    "(0-100): `status` (`status: running`, the `phase` and, in a pass, its "
                    "`iteration`, `step` and any `score`), `phase` (`status: started` or "
                    "`completed` with the phase's `result`), then one of `complete` "
                    "(`result`: the answer and every phase's output), `status` with "
                    "`status: cancelled`, or `error` (`status: failed`, the failing `phase` "
                    "and `error`).")],
        "ends": [("1000", "After the last message (`complete`, cancelled, `error`, or the "
                          "workflow's `run_finished`)."),
                 ("4401, 4404, 4400, 1011", "As on `/ws/runs/{run_id}`.")],
    },
}


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


# -- request bodies --------------------------------------------------------------------

def _schema_type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        kinds = [_schema_type(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(dict.fromkeys(kinds)) or "null"
    if "enum" in schema:
        return " or ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_schema_type(schema.get('items', {}))}"
    return kind


def body_fields(schema: dict[str, Any], components: dict[str, Any]
                ) -> list[tuple[str, str, bool, str]]:
    """(name, type, required, description) of each field of a request body."""
    if "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    required = set(schema.get("required", []))
    return [(name, _schema_type(field), name in required,
             " ".join((field.get("description") or "").split()))
            for name, field in schema.get("properties", {}).items()]


def _body_section(operation: dict[str, Any], components: dict[str, Any]) -> list[str]:
    body = operation.get("requestBody", {}).get("content", {})
    lines: list[str] = []
    for media, content in body.items():
        schema = content.get("schema", {})
        name = schema.get("$ref", "").rsplit("/", 1)[-1]
        fields = body_fields(schema, components)
        lines += [f"**Body** `{media}`" + (f" ({name})" if name else "") + ":", ""]
        if fields:
            lines += ["| field | type | required | description |", "| --- | --- | --- | --- |"]
            lines += [f"| `{field}` | `{_cell(kind)}` | {'yes' if needed else 'no'} | "
                      f"{_cell(text)} |" for field, kind, needed, text in fields]
        elif media in ("application/yaml", "text/plain"):
            lines.append("The workflow document as YAML text (the same keys as JSON: "
                         "[the workflow document](document.md)).")
        else:
            lines.append("A JSON object read as a whole (its format is the route's: see the "
                         "example below).")
        lines.append("")
        for example in schema.get("examples", [])[:1]:
            lines += ["```json", json.dumps(example, indent=2), "```", ""]
    return lines


# -- examples recorded from a live app -------------------------------------------------

def _trim(value: Any, depth: int = 0, deepest: int = 5) -> Any:
    """A value short enough to read: long strings, lists and deep objects cut."""
    if isinstance(value, str):
        return value if len(value) <= 160 else value[:160] + "…"
    if isinstance(value, list):
        head = [_trim(v, depth + 1, deepest) for v in value[:3]]
        return head + ["…"] if len(value) > 3 else head
    if isinstance(value, dict):
        if depth >= deepest:
            return "{…}"
        items = list(value.items())
        kept = {k: _trim(v, depth + 1, deepest) for k, v in items[:14]}
        if len(items) > 14:
            kept["…"] = f"{len(items) - 14} more"
        return kept
    return value


def _shown(value: Any, lines: int = 80) -> str:
    """The value as indented JSON, cut deeper until it fits in about `lines`."""
    for deepest in (5, 4, 3, 2, 1):
        text = json.dumps(_trim(value, 0, deepest), indent=2, ensure_ascii=False, default=str)
        if text.count("\n") < lines:
            break
    return text


_EXAMPLES: dict[str, dict[str, Any]] | None = None

CHAT_RULES = ROOT / "examples" / "scripted" / "chat.rules.yaml"
BUILD_RULES = ROOT / "examples" / "build" / "word-summary.rules.yaml"
#: the prompt-chain route's own example (an Agent JSON), answered by a one-line rule
from flowforge.server.routes.agent import _EXAMPLE as CHAIN  # noqa: E402
CHAIN_RULES = "default: The tide turns twice a day.\n"

WORKFLOW = """version: 1
id: greet
inputs: {name: {type: string, default: Ada}}
blocks:
  - {id: hello, type: response, with: {message: "Hello, {{input.name}}!"}}
"""
REVIEW = {"id": "review", "blocks": [
    {"id": "check", "type": "approval", "with": {"message": "Send it?"}},
    {"id": "send", "type": "response", "after": ["check"], "with": {"message": "sent"}}]}
SLOW = {"id": "slow", "blocks": [{"id": "pause", "type": "wait", "with": {"seconds": 60}}]}
#: one agent block tested alone (POST /api/block-tests), answered by the build rules' summariser
SUMMARY = """version: 1
id: summary
inputs: {text: {type: string}}
blocks:
  - {id: clean, type: set, with: {text: "{{input.text}}"}}
  - id: summarise
    type: agent
    with:
      system: Write faithful, concise summaries.
      prompt: "Summarise in one sentence: {{clean.text}}"
"""


def record() -> dict[str, dict[str, Any]]:
    """'METHOD /path' -> {status, body (the request's), answer}: one real
    exchange per operation, made in this process (cached for the process)."""
    global _EXAMPLES
    if _EXAMPLES is None:
        saved = dict(os.environ)
        with tempfile.TemporaryDirectory() as folder:
            os.environ.update(FLOWFORGE_SECRET_KEY_FILE=f"{folder}/secret.key",
                              FLOWFORGE_KNOWLEDGE_URL=f"sqlite:///{folder}/knowledge.db",
                              FLOWFORGE_ALLOW_PRIVATE_NETWORK="1")
            try:
                Path(folder, "chain.rules.yaml").write_text(CHAIN_RULES)
                _EXAMPLES = _record(f"sqlite:///{folder}/server.db", Path(folder))
            finally:
                os.environ.clear()
                os.environ.update(saved)
    return _EXAMPLES


def _record(url: str, folder: Path) -> dict[str, dict[str, Any]]:
    from fastapi.testclient import TestClient

    from flowforge.server import ServerSettings, create_app
    from flowforge.service.users import create_user
    from flowforge.storage import storage_from_url

    seen: dict[str, dict[str, Any]] = {}

    def app(model: str | None = None) -> TestClient:
        settings = ServerSettings(database_url=url, model=model, allow_private_webhooks=True)
        return TestClient(create_app(settings, storage=storage_from_url(url)))

    def call(client: TestClient, key: str, method: str, route: str, path: str | None = None,
             expect: int | None = None, **kwargs: Any) -> Any:
        response = client.request(method, path or route, headers={
            "Authorization": f"Bearer {key}", **kwargs.pop("headers", {})}, **kwargs)
        if response.status_code >= 300 or (expect and response.status_code != expect):
            raise RuntimeError(f"{method} {path or route} answered {response.status_code} "
                               f"while the HTTP reference was recorded: {response.text[:500]}")
        kind = response.headers.get("content-type", "")
        answer: Any = (response.json() if "json" in kind and response.content else
                       response.text)
        body = kwargs.get("json", kwargs.get("content"))
        seen.setdefault(f"{method} {route}", {"status": response.status_code, "body": body,
                                              "answer": answer, "type": kind})
        return answer

    with app() as main:
        keys = {}
        for name, role in (("admin", "admin"), ("alice", "user")):
            user, keys[name] = main.portal.call(create_user, main.app.state.storage, name, role)
        admin, alice = keys["admin"], keys["alice"]
        _record_main(main, call, admin, alice)
    with app(f"scripted/{CHAT_RULES}") as chat:
        _record_chat(chat, call, alice)
    with app(f"scripted/{BUILD_RULES}") as build:
        _record_build(build, call, alice)
    with app(f"scripted/{folder / 'chain.rules.yaml'}") as chains:
        task = call(chains, alice, "POST", "/api/agent", json=CHAIN)
        _wait_ended(chains, alice, task["status_url"])
        call(chains, alice, "GET", "/api/agent/tasks/{task_id}", task["status_url"])
    return seen


def _wait_ended(client: Any, key: str, path: str, field: str = "status") -> None:
    import time

    for _ in range(300):
        answer = client.get(path, headers={"Authorization": f"Bearer {key}"}).json()
        if answer.get(field) not in ("queued", "running"):
            return
        time.sleep(0.05)


def _record_main(client: Any, call: Callable[..., Any], admin: str, alice: str) -> None:
    yaml_type = {"Content-Type": "application/yaml"}
    call(client, alice, "GET", "/health")
    call(client, alice, "GET", "/api/me")
    call(client, admin, "GET", "/api/users")
    call(client, admin, "POST", "/api/users", json={"name": "bob", "role": "user"})
    call(client, admin, "POST", "/api/users/{target}/grants", "/api/users/bob/grants",
         json={"capability": "server_files"})
    call(client, admin, "GET", "/api/capabilities")
    call(client, admin, "DELETE", "/api/users/{target}/grants/{capability}",
         "/api/users/bob/grants/server_files")
    call(client, alice, "POST", "/api/secrets", json={"name": "OPENAI_API_KEY",
                                                      "value": "sk-example"})
    call(client, alice, "GET", "/api/secrets")
    call(client, alice, "DELETE", "/api/secrets/{name}", "/api/secrets/OPENAI_API_KEY")
    call(client, alice, "GET", "/api/schema")
    call(client, alice, "GET", "/api/block-outputs")
    call(client, alice, "GET", "/api/models")
    call(client, alice, "POST", "/api/validate", content=WORKFLOW, headers=yaml_type)
    call(client, alice, "POST", "/api/import", json={
        "filename": "echo.json", "text": json.dumps(CHAIN)})
    call(client, alice, "POST", "/api/workflows", content=WORKFLOW, headers=yaml_type)
    call(client, alice, "PUT", "/api/workflows/{workflow_id}", "/api/workflows/greet",
         content=WORKFLOW.replace("Hello", "Hi"), headers=yaml_type)
    call(client, alice, "PATCH", "/api/workflows/{workflow_id}", "/api/workflows/greet",
         json={"edits": [{"op": "set", "block": "hello", "path": "with.message",
                          "value": "Hello again, {{input.name}}!"}], "base_version": 2})
    call(client, alice, "GET", "/api/workflows")
    call(client, alice, "GET", "/api/workflows/{workflow_id}", "/api/workflows/greet")
    call(client, alice, "GET", "/api/workflows/{workflow_id}/versions",
         "/api/workflows/greet/versions")
    call(client, alice, "GET", "/api/workflows/{workflow_id}/graph", "/api/workflows/greet/graph")
    run = call(client, alice, "POST", "/api/workflows/{workflow_id}/runs",
               "/api/workflows/greet/runs", json={"inputs": {"name": "Grace"}})
    _wait_ended(client, alice, f"/api/runs/{run['run_id']}")
    rid = run["run_id"]
    call(client, alice, "GET", "/api/runs")
    call(client, alice, "GET", "/api/runs/{run_id}", f"/api/runs/{rid}")
    call(client, alice, "GET", "/api/runs/{run_id}/events", f"/api/runs/{rid}/events",
         headers={"Accept": "application/json"})
    call(client, alice, "GET", "/api/runs/{run_id}/graph", f"/api/runs/{rid}/graph")
    call(client, alice, "GET", "/api/runs/{run_id}/deliveries", f"/api/runs/{rid}/deliveries")
    call(client, alice, "GET", "/api/executions")
    call(client, alice, "GET", "/api/executions/{execution_id}", f"/api/executions/{rid}")
    call(client, alice, "GET", "/api/memory/{user_id}", "/api/memory/alice")
    # an approval, then a run cancelled while it waits
    call(client, alice, "POST", "/api/workflows", json=REVIEW)
    waiting = call(client, alice, "POST", "/api/workflows/{workflow_id}/runs",
                   "/api/workflows/review/runs?wait=true", json={})
    call(client, alice, "POST", "/api/runs/{run_id}/approvals/{block_id}",
         f"/api/runs/{waiting['run_id']}/approvals/check",
         json={"decision": "approve", "comment": "looks right"})
    call(client, alice, "POST", "/api/workflows", json=SLOW)
    slow = call(client, alice, "POST", "/api/workflows/{workflow_id}/runs",
                "/api/workflows/slow/runs", json={})
    call(client, alice, "POST", "/api/runs/{run_id}/cancel", f"/api/runs/{slow['run_id']}/cancel")
    session = call(client, alice, "POST", "/agent-workflow", json={"workflow_id": "slow"})
    call(client, alice, "GET", "/agent-workflow/{session_id}", session["status_url"])
    call(client, alice, "POST", "/agent-workflow/{session_id}/cancel", session["cancel_url"])
    call(client, alice, "DELETE", "/api/workflows/{workflow_id}", "/api/workflows/slow")
    # pipelines and registry blocks
    from flowforge.server.routes.pipelines import _EXAMPLE as PIPELINE

    call(client, alice, "POST", "/api/pipeline/run", json={**PIPELINE, "input": {
        "text": "  Hello   world  "}})
    call(client, alice, "POST", "/api/pipelines", json=PIPELINE)
    call(client, alice, "PUT", "/api/pipelines/{pipeline_id}", "/api/pipelines/clean-text",
         json={**PIPELINE, "name": "Clean a text, again"})
    call(client, alice, "GET", "/api/pipelines")
    call(client, alice, "GET", "/api/pipelines/{pipeline_id}", "/api/pipelines/clean-text")
    call(client, alice, "POST", "/api/pipelines/{pipeline_id}/run",
         "/api/pipelines/clean-text/run", json={"input": {"text": "  a   b "}})
    call(client, alice, "DELETE", "/api/pipelines/{pipeline_id}", "/api/pipelines/clean-text")
    call(client, alice, "GET", "/api/blocks")
    call(client, alice, "POST", "/api/blocks/search", json={"query": "clean up a text",
                                                            "limit": 2})
    call(client, alice, "GET", "/api/blocks/{block_id}", "/api/blocks/text_clean")
    call(client, alice, "GET", "/api/blocks/{block_id}/source", "/api/blocks/text_clean/source")
    block = {"id": "shout", "name": "Shout", "description": "Repeats a text in capitals",
             "execution_type": "llm", "prompt_template": "Repeat in capitals: {text}",
             "input_schema": {"type": "object", "properties": {"text": {"type": "string"}},
                              "required": ["text"]},
             "output_schema": {"type": "object", "properties": {"text": {"type": "string"}}}}
    call(client, alice, "POST", "/api/blocks", json=block)
    call(client, alice, "DELETE", "/api/blocks/{block_id}", "/api/blocks/shout")
    call(client, alice, "GET", "/api/apps")
    call(client, alice, "GET", "/api/apps/{app_id}", "/api/apps/rag-chat")
    # knowledge
    call(client, alice, "POST", "/api/knowledge", json={"name": "policies",
                                                        "description": "Shop policies"})
    call(client, alice, "GET", "/api/knowledge")
    call(client, alice, "POST", "/api/knowledge/{name}/documents",
         "/api/knowledge/policies/documents", json={
             "name": "warranty.md", "tags": {"category": "policies"},
             "text": (ROOT / "examples" / "policies" / "warranty.md").read_text()})
    listed = call(client, alice, "GET", "/api/knowledge/{name}/documents",
                  "/api/knowledge/policies/documents")
    call(client, alice, "POST", "/api/knowledge/{name}/search", "/api/knowledge/policies/search",
         json={"query": "How long is the warranty?", "top_k": 2})
    document_id = listed["documents"][0]["id"]
    call(client, alice, "DELETE", "/api/knowledge/{name}/documents/{document_id}",
         f"/api/knowledge/policies/documents/{document_id}")


def _record_chat(client: Any, call: Callable[..., Any], alice: str) -> None:
    call(client, alice, "POST", "/api/knowledge/{name}/documents",
         "/api/knowledge/policies/documents", json={
             "name": "Warranty", "text": (ROOT / "examples" / "policies" /
                                             "warranty.md").read_text()})
    reply = call(client, alice, "POST", "/api/chat/query", json={
        "query": "How long is the warranty?", "kb_id": "policies"})
    call(client, alice, "POST", "/api/chat/query/stream", json={
        "query": "And for Summit gear?", "session_id": reply["session_id"],
        "kb_id": "policies"})
    call(client, alice, "GET", "/api/chat/sessions")
    call(client, alice, "GET", "/api/chat/sessions/{session_id}",
         f"/api/chat/sessions/{reply['session_id']}")
    call(client, alice, "DELETE", "/api/chat/sessions/{session_id}",
         f"/api/chat/sessions/{reply['session_id']}")
    call(client, alice, "DELETE", "/api/knowledge/{name}", "/api/knowledge/policies")


def _record_build(client: Any, call: Callable[..., Any], alice: str) -> None:
    call(client, alice, "POST", "/api/block-tests/reads", json={
        "document": SUMMARY, "block_id": "summarise"})
    call(client, alice, "POST", "/api/block-tests", json={
        "document": SUMMARY, "block_id": "summarise",
        "samples": {"blocks": {"clean": {"text": "Cats purr and sleep. Dogs bark."}}}})
    intent = "Count the words of a text and summarise it"
    call(client, alice, "POST", "/api/clarify", json={"conversation": [
        {"role": "user", "content": intent}]})
    call(client, alice, "POST", "/api/create-agent", json={"intent": intent})
    call(client, alice, "POST", "/api/create-agent/stream", json={"intent": intent})
    call(client, alice, "GET", "/api/create-agent/stream", params={"intent": intent})
    call(client, alice, "POST", "/api/automate", json={"intent": intent,
                                                       "input": {"text": "one two two"}})


def _answer_block(example: dict[str, Any]) -> list[str]:
    status, answer = example["status"], example["answer"]
    if status == 204 or answer == "":
        return [f"Answer `{status}` with no body.", ""]
    if isinstance(answer, str):                           # an event stream: its first lines
        text = "\n".join(answer.strip().splitlines()[:12])
        return [f"Answer `{status}` (`{example['type'].split(';')[0]}`), its first lines:", "",
                "```text", text, "```", ""]
    return [f"Answer `{status}`:", "", "```json",
            _shown(answer), "```", ""]


def _request_block(route: str, example: dict[str, Any]) -> list[str]:
    body = example["body"]
    if body is None:
        return []
    if isinstance(body, (bytes, str)):
        text = body.decode() if isinstance(body, bytes) else body
        return ["Sent:", "", "```yaml", text.strip(), "```", ""]
    return ["Sent:", "", "```json", _shown(body), "```", ""]


def websocket_routes() -> list[str]:
    """The app's WebSocket paths (they are not in the OpenAPI document)."""
    from fastapi.routing import APIWebSocketRoute

    from flowforge.server.app import create_app

    def walk(routes: list[Any]) -> list[Any]:      # FastAPI keeps included routers whole
        found = []
        for route in routes:
            inner = getattr(route, "original_router", None)
            found += walk(inner.routes) if inner is not None else [route]
        return found

    return sorted(r.path for r in walk(create_app().router.routes)
                  if isinstance(r, APIWebSocketRoute))


def _websocket_section() -> list[str]:
    import inspect

    from flowforge.server import websocket

    lines = ["## WebSocket routes", "",
             "Not in the OpenAPI document (it has no words for them). A browser, which "
             "cannot set headers on a WebSocket, offers the subprotocols `flowforge` and "
             "`bearer.<key>` (`new WebSocket(url, [\"flowforge\", \"bearer.\" + key])`); any "
             "other client sends `Authorization: Bearer <key>`.", "",
             "From the code (`server/websocket.py`):", "", "```text",
             inspect.cleandoc(websocket.__doc__ or ""), "```", ""]
    for path in websocket_routes():
        spec = WEBSOCKETS[path]
        lines += [f"### `WS {path}`", "", spec["summary"], "",
                  "| query parameter | description |", "| --- | --- |",
                  *[f"| `{name}` | {_cell(text)} |" for name, text in spec["query"]], "",
                  "| the client sends | what happens |", "| --- | --- |",
                  *[f"| {_cell(what)} | {_cell(text)} |" for what, text in spec["client"]], "",
                  "| the server sends | what it is |", "| --- | --- |",
                  *[f"| {_cell(what)} | {_cell(text)} |" for what, text in spec["server"]], "",
                  "| close code | when |", "| --- | --- |",
                  *[f"| {_cell(code)} | {_cell(text)} |" for code, text in spec["ends"]], ""]
    return lines


def http_page(out: Path, docstring_markdown: Callable[[str], str]) -> list[str]:
    """Every operation with its parameters, body fields and a recorded answer;
    then the WebSocket routes.  Returns the operations documented."""
    import inspect

    from flowforge.server.app import create_app

    schema = create_app().openapi()
    components = schema.get("components", {}).get("schemas", {})
    (out / "openapi.json").write_text(json.dumps(schema, indent=1), encoding="utf-8")
    examples = record()
    lines = ["# HTTP API", "", docstring_markdown(inspect.cleandoc(
        schema["info"].get("description", ""))), "",
        "The full document: [openapi.json](openapi.json) (also served live at "
        "`/openapi.json`, with an interactive page at `/docs`). Each route's example is a "
        "real exchange, recorded from the server when this manual was built (scripted "
        "models; long values cut with `…`). The [WebSocket routes](#websocket-routes) "
        "follow the HTTP ones.", ""]
    documented = []
    for path, operations in sorted(schema["paths"].items()):
        for method, operation in operations.items():
            route = f"{method.upper()} {path}"
            documented.append(route)
            lines += [f"## `{route}`", "", _cell(operation.get("summary", "")), ""]
            if operation.get("description"):
                lines += [operation["description"], ""]
            params = operation.get("parameters", [])
            if params:
                lines += ["| parameter | in | required | description |",
                          "| --- | --- | --- | --- |"]
                lines += [f"| `{p['name']}` | {p['in']} | {p.get('required', False)} | "
                          f"{_cell(p.get('description', ''))} |" for p in params]
                lines.append("")
            lines += _body_section(operation, components)
            statuses = ", ".join(f"`{s}`" for s in operation.get("responses", {}))
            lines += [f"Answers: {statuses}", ""]
            example = examples.get(route)
            if example is None:
                raise RuntimeError(f"{route}: no example was recorded: add a request for it "
                                   f"to docs/gen_http.py")
            lines += ["**Example**", "", *_request_block(route, example),
                      *_answer_block(example)]
    lines += _websocket_section()
    (out / "http.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return documented
