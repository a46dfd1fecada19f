"""The editor's routes: `POST /api/validate` locates each problem at its line
of the text; `GET /api/workflows/{id}/graph` is the compiled graph (edges from
templates and `after:`, labelled branches, containers with their children).
And the web app at `/` never shadows the API."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
YAML = {"Content-Type": "application/yaml"}


async def test_validate_locates_each_problem_at_its_line(server):
    text = (EXAMPLES / "support.yaml").read_text()
    broken = text.replace("{{search.context}}\n\n        User Query", "{{serach.context}}\n\n"
                          "        User Query")
    assert broken != text
    line = next(n for n, row in enumerate(broken.splitlines(), 1) if "Support Agent" in row)
    async with server.client("alice") as alice:
        answer = await alice.post("/api/validate", content=broken, headers=YAML)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["valid"] is False and body["graph"] is None
        [problem] = [p for p in body["problems"] if "serach" in p["message"]]
        assert problem["where"] == "blocks[5].with.prompt"
        assert "did you mean 'search'" in problem["message"]
        assert line < problem["line"] <= line + 8
        assert "prompt:" in broken.splitlines()[problem["line"] - 1]

        syntax = await alice.post("/api/validate", content="id: x\nblocks: [\n  - a: b\n",
                                  headers=YAML)
        [bad] = syntax.json()["problems"]
        assert bad["message"].startswith("invalid YAML") and bad["line"] >= 2

        ok = await alice.post("/api/validate", content=text.replace("      sources: [policies]\n",
                                                                    ""), headers=YAML)
        assert ok.json()["valid"] is True and ok.json()["problems"] == []
        assert {n["id"] for n in ok.json()["graph"]["nodes"]} == {
            "question", "search", "order_age", "timing", "window", "answer", "grade", "claim",
            "check", "triage", "standard", "review"}
        # what this user may not save is said too (a server file, not granted)
        refused = await alice.post("/api/validate", content=text, headers=YAML)
        [grant] = refused.json()["problems"]
        assert grant["where"].startswith("blocks[1].with.sources")
        assert "sources:" in text.splitlines()[grant["line"] - 1]
        assert (await server.client(None).post("/api/validate", content=text)).status_code == 401


async def test_graph_of_a_stored_workflow(server):
    document = {"id": "g", "inputs": {"n": {"type": "number", "default": 3}}, "blocks": [
        {"id": "start", "type": "set", "with": {"v": "{{input.n}}"}},
        {"id": "gate", "type": "condition", "after": ["start"],
         "with": {"cases": [{"when": "start.v > 2", "goto": "big"}], "default": "small"}},
        {"id": "big", "type": "set", "with": {"x": 1}},
        {"id": "small", "type": "set", "with": {"x": 2}},
        {"id": "each", "type": "parallel", "with": {"for_each": [1, 2]},
         "blocks": [{"id": "twice", "type": "set", "with": {"v": "{{loop.item}}"}},
                    {"id": "again", "type": "set", "with": {"w": "{{twice.v}}"}}]},
        {"id": "last", "type": "set", "with": {"big": "{{big.x}}", "r": "{{each.results}}"}}]}
    async with server.client("alice") as alice:
        assert (await alice.post("/api/workflows", json=document)).status_code == 201
        graph = (await alice.get("/api/workflows/g/graph")).json()
        async with server.client("bob") as bob:
            assert (await bob.get("/api/workflows/g/graph")).status_code == 404
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert graph["version"] == 1
    assert nodes["twice"]["parent"] == "each" and nodes["each"]["container"] is True
    assert nodes["start"]["parent"] is None
    edges = {(e["source"], e["target"]): e for e in graph["edges"]}
    assert edges[("gate", "big")]["kind"] == "branch"
    assert edges[("gate", "big")]["label"] == "start.v > 2"
    assert edges[("gate", "small")]["label"] == "default"
    assert edges[("start", "gate")]["kind"] == "data"
    assert ("twice", "again") in edges and ("big", "last") in edges and ("each", "last") in edges


async def test_branch_labels_say_which_way_each_edge_goes(server):
    """Two cases to one block are one label, not two run together; an
    approval's edges say approve / reject, not their targets' names."""
    document = {"id": "lbl", "blocks": [
        {"id": "assess", "type": "set", "with": {"amount": 5}},
        {"id": "gate", "type": "condition", "after": ["assess"],
         "with": {"cases": [{"when": "assess.amount >= 1000", "goto": "big"},
                            {"when": "assess.amount < 0", "goto": "big"}],
                  "default": "big"}},
        {"id": "big", "type": "set", "with": {"x": 1}},
        {"id": "ok", "type": "approval", "after": ["big"], "with": {"on_reject": "no"}},
        {"id": "yes", "type": "set", "after": ["ok"], "with": {"x": 1}},
        {"id": "no", "type": "set", "with": {"x": 2}}]}
    async with server.client("alice") as alice:
        assert (await alice.post("/api/workflows", json=document)).status_code == 201
        graph = (await alice.get("/api/workflows/lbl/graph")).json()
    labels = {(e["source"], e["target"]): e.get("label") for e in graph["edges"]}
    assert labels[("gate", "big")] == "assess.amount >= 1000 | assess.amount < 0 | default"
    assert labels[("ok", "yes")] == "approve" and labels[("ok", "no")] == "reject"
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert nodes["assess"]["outputs"] == ["amount"]      # what `{{assess.` may complete to


async def test_the_schema_route_is_the_cli_schema_with_each_type_described(server):
    from flowforge.service.schema import workflow_json_schema

    async with server.client("alice") as alice:
        answer = await alice.get("/api/schema")
        assert (await server.client(None).get("/api/schema")).status_code == 401
    assert answer.status_code == 200
    schema = answer.json()
    assert schema == workflow_json_schema()
    kinds = schema["$defs"]["BlockSpec"]["properties"]["type"]
    described = {entry["const"]: entry["description"] for entry in kinds["oneOf"]}
    assert set(described) == set(kinds["enum"])
    assert described["approval"] == "The run waits for a person to approve or reject."
    assert all(text and "\n" not in text for text in described.values())


async def test_the_web_app_never_shadows_the_api(server):
    async with server.client("alice") as alice:
        page = await alice.get("/workflows/support")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "script-src 'self'" in page.headers["content-security-policy"]
        missing = await alice.get("/api/nothing-here")
        assert missing.status_code == 404 and missing.json()["error"]["code"]
        assert (await alice.get("/openapi.json")).json()["paths"]["/api/validate"]
        assert (await alice.get("/health")).json()["status"] == "ok"
        assert (await alice.get("/assets/..%2F..%2Fapp.py")).status_code == 404


CHARGE = """\
id: charge
inputs: {big: {type: boolean}}
blocks:
  - {id: base, type: set, with: {fee: 3}}
  - id: gate
    type: condition
    with: {cases: [{when: input.big, goto: big}], default: small}
  - {id: big, type: set, with: {v: 1}}
  - {id: small, type: set, with: {v: 1}}
  - {id: charge_small, type: set, after: [small], with: {fee: "{{base.fee}}"}}
"""


async def test_validate_and_save_point_out_a_block_the_explicit_join_rule_changes(server):
    async with server.client("alice") as alice:
        checked = (await alice.post("/api/validate", content=CHARGE, headers=YAML)).json()
        assert checked["valid"] is True and checked["problems"] == []
        [warning] = checked["warnings"]
        assert warning["where"] == "blocks[4]" and warning["line"] == 10
        assert "'charge_small' needs 'small'" in warning["message"]
        saved = await alice.post("/api/workflows", content=CHARGE, headers=YAML)
        assert saved.status_code == 201, saved.text
        assert saved.json()["warnings"] == [f"blocks[4]: {warning['message']}"]
        joined = CHARGE.replace("after: [small]", "after: {all: [small]}")
        again = (await alice.post("/api/validate", content=joined, headers=YAML)).json()
        assert again["valid"] is True and again["warnings"] == []


async def test_a_runs_graph_carries_the_positions_saved_in_the_editor(server):
    """The run view draws a run as its author arranged it in the editor
    (`metadata.layout`); a position that is not two numbers is left out."""
    text = ("id: placed\nmetadata:\n  layout:\n    first: {x: 400, y: 10}\n"
            "    second: {x: 12.5, y: 300}\n    broken: {x: left, y: 3}\n"
            "blocks:\n  - {id: first, type: set, with: {v: 1}}\n"
            "  - {id: second, type: set, with: {w: '{{first.v}}'}}\n")
    async with server.client("alice") as alice:
        assert (await alice.post("/api/workflows", content=text, headers=YAML)).status_code == 201
        ran = await alice.post("/api/workflows/placed/runs?wait=true", json={})
        assert ran.status_code == 200, ran.text
        graph = (await alice.get(f"/api/runs/{ran.json()['run_id']}/graph")).json()
    assert graph["layout"] == {"first": {"x": 400, "y": 10}, "second": {"x": 12.5, "y": 300}}
