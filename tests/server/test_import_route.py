"""`POST /api/import`: the web app's "import a file" converts without saving:
200 with the document, its YAML and the report; 422 with the report when nodes
have no counterpart (unless partial); 422 with the located message when the
file is broken.  (The policy gate on it: tests/server/test_gate_routes.py.)"""

from __future__ import annotations

import json

import pytest
import yaml

from flowforge.formats import ImportReport, Imported, NodeReport, room

from tests.apps.chains_receiver import EXAMPLES

#: the example Agent, its event posting to a public address (a relative one needs the
#: server's chain base URL, and a private one a grant)
MOVIE = (EXAMPLES / "movie_script.json").read_text(encoding="utf-8").replace(
    '"/prediction/', '"https://example.com/prediction/')


class _Toy:
    name = "toy"
    title = "Toy flows"

    def detect(self, data):
        return isinstance(data, dict) and "toy" in data

    def convert(self, data, *, source):
        nodes = [NodeReport("ask", "Ask", "question", "set"),
                 NodeReport("mail", "Send mail", "gmail", None, "use an http block")]
        report = ImportReport("toy", nodes, knowledge_bases=["handbook"])
        return Imported({"version": 1, "id": "toy", "blocks": [
            {"id": "ask", "type": "set", "with": {"v": 1}}]}, report)


@pytest.fixture
def toy(monkeypatch):
    known = room.formats()
    monkeypatch.setattr(room, "formats", lambda: [_Toy(), *known])


async def test_an_agent_file_comes_back_as_a_document_its_yaml_and_report(server):
    async with server.client("alice") as alice:
        answer = await alice.post("/api/import", json={"filename": "movie.json",
                                                       "text": MOVIE})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["format"] == "agent"
        assert [b["id"] for b in body["document"]["blocks"]] == [
            "plots", "summary", "characters", "parse_characters", "send_result"]
        assert yaml.safe_load(body["yaml"]) == body["document"]
        report = body["report"]
        assert report["format"] == "agent" and report["unsupported"] == []
        assert [(n["id"], n["became"]) for n in report["nodes"]][3] == \
            ("parse_characters", "parser")
        listed = await alice.get("/api/workflows")                   # nothing was saved
        assert listed.json()["workflows"] == []
        assert (await server.client(None).post(
            "/api/import", json={"filename": "m.json", "text": MOVIE})).status_code == 401


async def test_nodes_without_a_counterpart_are_422_with_the_report_unless_partial(server, toy):
    sent = {"filename": "flow.json", "text": json.dumps({"toy": 1})}
    async with server.client("alice") as alice:
        refused = await alice.post("/api/import", json=sent)
        assert refused.status_code == 422, refused.text
        body = refused.json()
        assert "1 node(s) of this toy file have no flowforge counterpart" in body["detail"]
        assert body["report"]["unsupported"] == ["mail"]
        assert body["report"]["knowledge_bases"] == ["handbook"]
        assert body["error"]["code"] == "import_refused"
        partial = await alice.post("/api/import", json={**sent, "partial": True})
        assert partial.status_code == 200, partial.text
        assert partial.json()["report"]["unsupported"] == ["mail"]
        assert partial.json()["format"] == "toy"


@pytest.mark.parametrize("name, text, says", [
    ("flow.json", '{"nodes": []}\n{"nodes": []}\n',
     "flow.json: two JSON documents glued together: the second starts at line 2, column 1"),
    ("flow.yml", "a: [1, 2\n", "flow.yml: invalid YAML at line"),
    ("flow.json", json.dumps({"variables": {}, "promptChain": [{"name": "Ask"}]}),
     "promptChain[0] 'Ask': `type` is required"),
    ("flow.json", json.dumps({"hello": 1}),
     "flow.json: not a workflow of a format flowforge imports"),
])
async def test_a_broken_file_is_422_with_the_located_message(server, name, text, says):
    async with server.client("alice") as alice:
        answer = await alice.post("/api/import", json={"filename": name, "text": text})
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert says in body["detail"] and body["report"] is None
    assert body["error"]["code"] == "invalid_import" and body["problems"]


async def test_a_named_format_and_a_bad_body(server):
    async with server.client("alice") as alice:
        named = await alice.post("/api/import", json={"filename": "m.json", "text": MOVIE,
                                                      "format": "zapier"})
        assert named.status_code == 422
        assert "unknown format 'zapier'" in named.json()["detail"]
        missing = await alice.post("/api/import", json={"text": MOVIE})
        assert missing.status_code == 422 and "filename" in missing.text


async def test_a_big_file_is_imported_in_another_process_with_the_same_answers(tmp_path):
    from tests.server.conftest import start_server
    from tests.server.test_gate_routes import HOSTILE_CHAIN

    live, stop = await start_server(f"sqlite:///{tmp_path / 's.db'}",
                                    max_body_bytes=1024 * 1024)
    padding = "x" * 20_000                          # past BIG_BODY: the compile pool's job
    big = json.loads(MOVIE)
    big["description"] = padding
    hostile = {**HOSTILE_CHAIN, "description": padding}
    try:
        async with live.client("alice") as alice:
            answer = await alice.post("/api/import", json={"filename": "big.json",
                                                           "text": json.dumps(big)})
            assert answer.status_code == 200, answer.text
            assert answer.json()["document"]["description"] == padding
            denied = await alice.post("/api/import", json={"filename": "leak.json",
                                                           "text": json.dumps(hostile)})
            assert denied.status_code == 403, denied.text
            assert denied.json()["error"]["code"] == "capability_denied"
        assert live.app.state.live.workflows.compiler.jobs == 2
    finally:
        await stop()


async def test_saving_a_foreign_document_asks_the_room_too(server, toy):
    """A save converts what the room recognises, under the same policy: the toy
    file has a node without a counterpart, so it is refused, listed."""
    async with server.client("alice") as alice:
        saved = await alice.post("/api/workflows", json={"toy": 1})
    assert saved.status_code == 422, saved.text
    assert "'Send mail' (mail, gmail): no counterpart" in saved.text
