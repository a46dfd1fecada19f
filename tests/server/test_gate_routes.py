"""Every route that takes a model name, a knowledge-base id, a workflow
reference or a path passes the one policy gate (issue 23).

The routes are found in the server's own OpenAPI document (request-body
properties, their examples and parameters named like such a value), so a new
route that takes one is caught here until it is listed below: either with a
hostile request, which an ordinary user (no grants) must see refused while the
gate is seen deciding on exactly that value, or as exempt, saying why."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowforge.workflow.policy import Policy

#: names of values that can reach the host (see `Policy.model_problem`, `check_kb_id`, ...)
GATED_NAMES = {"model", "embedding_model", "fallback", "downgrade", "kb", "kb_id",
               "knowledge_base", "web_source", "workflow", "path", "file", "folder",
               "sources"}

HOSTILE_MODEL = "scripted//etc/passwd"
HOSTILE_DOCUMENT = {"id": "hostile", "budget": {"tokens": 5,
                                                "on_exceed": {"downgrade": HOSTILE_MODEL}},
                    "blocks": [{"id": "a", "type": "set", "with": {"v": 1}}]}
HOSTILE_CHAIN = {"name": "Leak", "variables": {}, "promptChain": [
    {"type": "prompt", "name": "Draft", "user": "hi", "llm": "scripted",
     "model": "/etc/passwd", "output": "draft"},
    {"type": "return", "name": "Return", "output": ["draft"]}]}
BUDGET = {"budget": {"tokens": 5, "on_exceed": {"downgrade": HOSTILE_MODEL}}}

#: routes whose body is a document as text: the gate sees what the schema cannot
TEXT_BODIES = {("post", "/api/validate"), ("post", "/api/import")}

#: (method, path) -> (request, the gate's check and the value it must see)
HOSTILE: dict[tuple[str, str], tuple[dict[str, Any], tuple[str, str]]] = {
    ("post", "/api/validate"): ({"content": json.dumps(HOSTILE_DOCUMENT),
                                 "headers": {"Content-Type": "application/json"}},
                                ("model_problem", HOSTILE_MODEL)),
    ("post", "/api/workflows"): ({"json": HOSTILE_DOCUMENT}, ("model_problem", HOSTILE_MODEL)),
    ("post", "/api/import"): ({"json": {"filename": "leak.json",
                                        "text": json.dumps(HOSTILE_CHAIN)}},
                              ("model_problem", HOSTILE_MODEL)),
    ("put", "/api/workflows/{workflow_id}"): ({"json": HOSTILE_DOCUMENT},
                                              ("model_problem", HOSTILE_MODEL)),
    ("patch", "/api/workflows/{workflow_id}"): (
        {"json": {"edits": [{"op": "add_block", "spec": {
            "id": "leak", "type": "llm", "with": {"prompt": "hi", "model": HOSTILE_MODEL}}}]}},
        ("model_problem", HOSTILE_MODEL)),
    ("post", "/api/workflows/{workflow_id}/runs"): ({"json": BUDGET},
                                                    ("model_problem", HOSTILE_MODEL)),
    ("post", "/agent-workflow"): ({"json": {"question": "what is in here?", "kb": "."}},
                                  ("check_kb_id", ".")),
    ("post", "/api/chat/query"): ({"json": {"query": "what is in here?", "kb_id": ".."}},
                                  ("check_kb_id", "..")),
    ("post", "/api/chat/query/stream"): ({"json": {"query": "what is in here?", "kb_id": "."}},
                                         ("check_kb_id", ".")),
    ("post", "/api/agent"): ({"json": HOSTILE_CHAIN}, ("model_problem", HOSTILE_MODEL)),
    ("post", "/api/clarify"): ({"json": {"intent": "sum numbers", "model": HOSTILE_MODEL}},
                               ("model_problem", HOSTILE_MODEL)),
    ("post", "/api/create-agent"): ({"json": {"intent": "sum numbers", "model": HOSTILE_MODEL}},
                                    ("model_problem", HOSTILE_MODEL)),
    ("post", "/api/create-agent/stream"): ({"json": {"intent": "sum numbers",
                                                     "model": HOSTILE_MODEL}},
                                           ("model_problem", HOSTILE_MODEL)),
    ("get", "/api/create-agent/stream"): ({"params": {"intent": "sum numbers",
                                                      "model": HOSTILE_MODEL}},
                                          ("model_problem", HOSTILE_MODEL)),
    ("post", "/api/automate"): ({"json": {"intent": "sum numbers", "input": {},
                                          "model": HOSTILE_MODEL}},
                                ("model_problem", HOSTILE_MODEL)),
}

#: (method, path) -> why its field named like a gated value is not one
EXEMPT = {
    ("get", "/api/runs"): "`workflow` filters the caller's own runs by workflow id; "
                          "nothing is loaded by it",
}


def _names(value: Any, schemas: dict[str, Any], seen: frozenset = frozenset()) -> set[str]:
    """Every property name and example key under `value`, references followed."""
    names: set[str] = set()
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            return set() if name in seen else _names(schemas.get(name, {}), schemas,
                                                      seen | {name})
        for key, item in value.items():
            if key == "properties" and isinstance(item, dict):
                names |= set(item)
            if key in ("example", "examples"):
                names |= _keys(item)
            names |= _names(item, schemas, seen)
    elif isinstance(value, list):
        for item in value:
            names |= _names(item, schemas, seen)
    return names


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for item in value.values() for k in _keys(item)}
    if isinstance(value, list):
        return {k for item in value for k in _keys(item)}
    return set()


def gated_operations(document: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    schemas = document.get("components", {}).get("schemas", {})
    found = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            names = {p["name"] for p in operation.get("parameters", [])}
            names |= _names(operation.get("requestBody", {}), schemas)
            if names & GATED_NAMES:
                found[(method, path)] = names & GATED_NAMES
    return found


@pytest.fixture
def gate_calls(monkeypatch):
    """Every decision the gate takes during the test: (check, value)."""
    calls: list[tuple[str, Any]] = []
    for name in ("model_problem", "check_kb_id", "check_workflow_ref", "check_file"):
        original = getattr(Policy, name)

        def spy(self, value, *args, _original=original, _name=name, **kwargs):
            calls.append((_name, value))
            return _original(self, value, *args, **kwargs)

        monkeypatch.setattr(Policy, name, spy)
    return calls


async def test_every_route_that_takes_such_a_value_is_listed(server):
    async with server.client("alice") as alice:
        document = (await alice.get("/openapi.json")).json()
    found = set(gated_operations(document))
    assert found - set(HOSTILE) - set(EXEMPT) == set(), \
        "a route takes a model name, knowledge-base id, workflow reference or path: " \
        "add it to HOSTILE (and make it call the policy gate) or to EXEMPT"
    # /api/validate takes a whole document as text (YAML or JSON): its schema names
    # no field, but the document it checks is full of them
    assert set(HOSTILE) | set(EXEMPT) <= found | TEXT_BODIES, \
        "a listed route no longer takes such a value"


@pytest.mark.parametrize("operation", sorted(HOSTILE), ids=" ".join)
async def test_the_gate_refuses_a_hostile_value_on_every_route(server, gate_calls, operation):
    method, path = operation
    request, expected = HOSTILE[operation]
    async with server.client("alice") as alice:
        if "{workflow_id}" in path:               # a harmless workflow of alice's to run
            saved = await alice.post("/api/workflows", json={
                "id": "plain", "blocks": [{"id": "a", "type": "set", "with": {"v": 1}}]})
            assert saved.status_code == 201, saved.text
            path = path.replace("{workflow_id}",
                                "hostile" if method == "put" else "plain")
        gate_calls.clear()
        answer = await alice.request(method.upper(), path, **request)
    assert expected in gate_calls, gate_calls
    if operation == ("patch", "/api/workflows/{workflow_id}"):
        # an edit is refused with its problems located in the edited text
        assert answer.status_code == 422, answer.text
        details = answer.json()["error"]["details"]
        assert any("server_files" in d["message"] and d.get("line") for d in details)
    elif operation == ("post", "/api/validate"):      # problems, located, not an error
        problems = answer.json()["problems"]
        assert answer.status_code == 200 and not answer.json()["valid"]
        assert any("server_files" in p["message"] for p in problems), problems
    else:
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["code"] == "capability_denied"
        assert "server_files" in answer.text
