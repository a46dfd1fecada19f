"""Prompt-chain Agents run on the engine: the shipped movie-script example end
to end (scripted model, a local receiver), located errors, the round trip."""

from __future__ import annotations

import copy
import json

import pytest

import flowforge
from flowforge.apps.chains import (agent_to_workflow, split_variables, workflow_data_if_agent,
                                   workflow_to_agent)
from flowforge.blocks._llm import sent_requests
from flowforge.errors import ValidationFailed
from flowforge.service.loading import load
from flowforge.storage import storage_from_url
from flowforge.tools.network import allowing_private_network

from tests.apps.chains_receiver import EXAMPLES, receiver  # noqa: F401 - a fixture

MOVIE = EXAMPLES / "movie_script.json"
RULES = EXAMPLES.parent / "scripted" / "movie_script.rules.yaml"
SCRIPT = "INT. STATION - NIGHT. Unit 7 powers up. A girl, Mia, hides in a crate."
KEY = "sk-test-chain-key-123456"


def movie() -> dict:
    return json.loads(MOVIE.read_text(encoding="utf-8"))


async def run_agent(agent, variables, **options):
    workflow = load(workflow_data_if_agent(agent) if isinstance(agent, dict) else agent)
    inputs, secrets = split_variables(workflow, variables)
    with allowing_private_network():
        return await flowforge.run(workflow, inputs, model=f"scripted/{RULES}",
                                   run_secrets=secrets, **options)


async def test_movie_script_runs_end_to_end(receiver, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_CHAIN_BASE_URL", receiver.url)
    result = await run_agent(MOVIE, {"script": SCRIPT, "apiKey": KEY})

    assert result.status == "succeeded", result.error
    assert list(result.blocks) == ["plots", "summary", "characters", "parse_characters",
                                   "send_result"]
    assert receiver.requests == [{
        "method": "POST", "path": "/prediction/movie-script/result",
        "body": {"characters": {"character": ["Unit 7", "Mia"]},
                 "summary": "A lonely robot and a stowaway girl bring a dead space station "
                            "back to life."}}]
    # what each model saw: `${script}` filled from the run's variable, `{plots}` from node 1
    plots = sent_requests(result.events, "plots")[0]["messages"]
    assert plots[1] == {"role": "user", "content": f"### {SCRIPT} ###"}
    summary = sent_requests(result.events, "summary")[0]["messages"][1]["content"]
    assert summary.startswith(f"Movie script {SCRIPT} \n\nPlot <plot>A maintenance robot")
    assert result.results["parse_characters"]["data"] == {"character": ["Unit 7", "Mia"]}


async def test_api_key_reaches_no_record(receiver, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_CHAIN_BASE_URL", receiver.url)
    result = await run_agent(MOVIE, {"script": SCRIPT, "apiKey": KEY}, storage=None)
    assert result.status == "succeeded"
    storage = storage_from_url(None)
    await storage.open()
    try:
        row = await storage.get_run(result.run_id)
        stored = await storage.get_events(result.run_id)
    finally:
        await storage.close()
    assert "apiKey" not in row["inputs"]
    assert KEY not in json.dumps([row, stored], default=str)
    assert KEY not in json.dumps(result.to_dict(), default=str)


async def test_api_key_goes_to_the_nodes_provider(monkeypatch):
    """A node's `apiKey` replaces the provider's key for that node only."""
    from flowforge.blocks import _llm

    seen = []

    async def fake(model, request, *, options, **_):
        seen.append((model, options.env.get("ANTHROPIC_API_KEY")))
        raise RuntimeError("stop here")

    monkeypatch.setattr(_llm, "_complete", fake)
    workflow = load(workflow_data_if_agent({"variables": {"k": ""}, "promptChain": [
        {"type": "prompt", "name": "one", "user": "hi", "apiKey": "{k}", "llm": "claude",
         "model": "claude-3-5-haiku-latest", "output": "a"}]}))
    inputs, secrets = split_variables(workflow, {"k": KEY})
    assert inputs == {} and secrets == {"k": KEY}
    result = await flowforge.run(workflow, inputs, run_secrets=secrets, storage=False)
    assert seen == [("anthropic/claude-3-5-haiku-latest", KEY)]
    assert KEY not in json.dumps(result.to_dict(), default=str)


def problems_of(agent, **options) -> str:
    with pytest.raises(ValidationFailed) as caught:
        agent_to_workflow(agent, **options)
    return str(caught.value)


def test_unknown_variable_names_the_node():
    agent = movie()
    agent["promptChain"][1]["user"] = "Movie script ${script} \n\nPlot ${plotz}"
    message = problems_of(agent, base_url="http://127.0.0.1:1")
    assert "promptChain[1] 'summary': unknown variable {plotz} in `user`" in message
    assert "known at this node:" in message and "plots" in message


def test_bad_schema_string_names_the_node():
    agent = movie()
    agent["promptChain"][3]["schema"] = '{"character": "Array<Strin>"}'
    message = problems_of(agent, base_url="http://127.0.0.1:1")
    assert "promptChain[3] 'parse characters': bad `schema` string" in message
    assert "unknown type 'Strin'" in message
    agent["promptChain"][3]["schema"] = '{"character": Array<String>}'
    assert "the schema string is not JSON" in problems_of(agent, base_url="http://127.0.0.1:1")


def test_every_problem_at_once():
    agent = {"variables": {"x": ""}, "promptChain": [
        {"type": "prompt", "name": "a", "user": "{x}", "llm": "chatgpt", "model": "m",
         "output": "a"},
        {"type": "prompt", "name": "b", "user": "{x}", "apiKey": "sk-literal", "output": "b"},
        {"type": "event", "name": "c", "endPoint": "/hook", "data": "{\"a\": {a}"},
        {"type": "teleport", "name": "d"},
        {"type": "prompt", "name": "leak", "user": "my key is {k}", "apiKey": "{k}",
         "output": "z"},
        {"type": "return", "name": "e", "output": ["nope"]},
        {"name": "f", "user": "hi"},
        {"type": "prompt", "name": "g", "user": "{a.b} and {x}", "sytem": "typo"}]}
    message = problems_of(agent)
    assert "promptChain[0] 'a': unknown `llm` 'chatgpt'" in message
    assert "promptChain[1] 'b': `apiKey` must be a variable reference" in message
    assert "promptChain[2] 'c': `endPoint` '/hook' is relative: set FLOWFORGE_CHAIN_BASE_URL" \
        in message
    assert "promptChain[2] 'c': `data` is not JSON once its {fields} are filled" in message
    assert "promptChain[3] 'd': unknown node type 'teleport'" in message
    assert "promptChain[4] 'leak': `user` reads {k}, which holds an API key" in message
    assert "promptChain[5] 'e': unknown variable {nope} in `output`" in message
    assert "promptChain[6] 'f': `type` is required: prompt, parser, event or return" in message
    assert "promptChain[7] 'g': `user` holds {a.b}, which is not a variable name" in message
    assert "promptChain[7] 'g': unknown field(s) sytem for a prompt node" in message


async def test_failing_event_names_the_node(receiver, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_CHAIN_BASE_URL", receiver.url)
    receiver.status = 500
    result = await run_agent(MOVIE, {"script": SCRIPT})
    assert result.status == "failed"
    record = result.blocks["send_result"]
    assert record.status == "failed"
    assert "send_result" in result.error and "answered HTTP 500" in record.error
    assert "/prediction/movie-script/result" in record.error


async def test_parser_mismatch_shows_schema_and_answer(receiver, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_CHAIN_BASE_URL", receiver.url)
    agent = movie()
    agent["promptChain"][3]["schema"] = '{"cast": "Array<String>"}'
    result = await run_agent(agent, {"script": SCRIPT})
    assert result.blocks["parse_characters"].status == "failed"
    error = result.blocks["parse_characters"].error
    assert "'cast' is a required property" in error
    assert 'schema: {"cast": "Array<String>"}' in error
    assert 'got: {"character": ["Unit 7", "Mia"]}' in error
    assert result.blocks["send_result"].status == "skipped" and receiver.requests == []


def test_field_and_output_mappings_follow_the_variables():
    """`{entryPoint}` is the variable as the run received it; a mapping `output`
    writes several variables; later nodes read the newest value."""
    doc = agent_to_workflow({"variables": {"topic": "cats", "note": ""}, "promptChain": [
        {"type": "prompt", "name": "First", "user": "About ${topic}",
         "field": {"topic": "{entryPoint}"},
         "output": {"note": "Draft: {output}", "topic": "{output}"}},
        {"type": "prompt", "name": "Second", "system": "Was {topic}", "user": "{topic} / {note}",
         "field": {"topic": "{entryPoint}"}, "output": "final"},
        {"type": "prompt", "name": "Third", "user": "{topic}", "output": "last"},
        {"type": "return", "name": "Return", "output": ["final", "note"]}]})
    first, second, third, ret = doc["blocks"]
    assert doc["inputs"] == {"topic": {"default": "cats", "description": "chain variable"},
                             "note": {"default": "", "description": "chain variable"}}
    assert first["with"]["prompt"] == "About {topic}"
    assert first["with"]["inputs"] == {"topic": "{{input.topic}}"}
    assert second["with"]["inputs"] == {"topic": "{{input.topic}}",
                                        "note": "Draft: {{first.content}}"}
    assert third["with"]["inputs"] == {"topic": "{{first.content}}"}
    # a return (like an event) waits for every earlier node: `third` is read by
    # nothing, so the return names it in `after`
    assert ret == {"id": "return", "type": "response", "name": "Return", "after": ["third"],
                   "with": {"data": {"final": "{{second.content}}",
                                     "note": "Draft: {{first.content}}"}}}


@pytest.mark.parametrize("notation, schema", [
    ('{"character": "Array<String>"}',
     {"type": "object", "properties": {"character": {"type": "array", "items": {"type": "string"}}},
      "required": ["character"]}),
    ('{"n": "Number", "ok": "boolean", "tags?": "String[]"}',
     {"type": "object", "properties": {"n": {"type": "number"}, "ok": {"type": "boolean"},
                                       "tags": {"type": "array", "items": {"type": "string"}}},
      "required": ["n", "ok"]}),
    ('{"studio": {"name": "String"}, "cast": [{"actor": "String"}]}',
     {"type": "object", "properties": {
         "studio": {"type": "object", "properties": {"name": {"type": "string"}},
                    "required": ["name"]},
         "cast": {"type": "array", "items": {"type": "object", "properties": {
             "actor": {"type": "string"}}, "required": ["actor"]}}},
      "required": ["studio", "cast"]}),
    ("Array<Array<Integer>>", {"type": "array", "items": {"type": "array",
                                                          "items": {"type": "integer"}}}),
])
def test_schema_notation_both_ways(notation, schema):
    from flowforge.workflow.notation import notation_to_schema, schema_to_notation

    assert notation_to_schema(notation) == schema
    assert notation_to_schema(schema_to_notation(schema)) == schema


def test_round_trip_import_export_import():
    agent = movie()
    agent["promptChain"].append({"type": "return", "name": "Return",
                                 "output": ["summary", "listOfCharacters"]})
    first = agent_to_workflow(agent, base_url="http://127.0.0.1:1")
    exported = workflow_to_agent(copy.deepcopy(first))
    assert [node["type"] for node in exported["promptChain"]] == [
        "prompt", "prompt", "prompt", "parser", "event", "return"]
    assert exported["variables"] == {"script": "", "apiKey": ""}
    assert exported["promptChain"][0]["apiKey"] == "{apiKey}"
    assert exported["promptChain"][0]["llm"] == "claude"
    assert exported["promptChain"][3]["schema"] == agent["promptChain"][3]["schema"]
    assert exported["promptChain"][4]["data"] == \
        '{"characters": {parse_characters}, "summary": {summary}}'
    assert exported["promptChain"][5]["output"] == ["summary", "listOfCharacters"]
    again = agent_to_workflow(json.loads(json.dumps(exported)))
    assert again == first


def test_export_refuses_what_a_chain_cannot_say():
    with pytest.raises(ValidationFailed) as caught:
        workflow_to_agent({"id": "w", "blocks": [
            {"id": "a", "type": "agent", "with": {"prompt": "hi"}},
            {"id": "c", "type": "llm", "with": {"prompt": "hi"}},
            {"id": "b", "type": "llm", "with": {"prompt": "{x} {y}", "inputs": {
                "x": "{{c.tokens}}", "y": "{{a.content}}"},
                "output_schema": {"type": "object"}}}]})
    problems = caught.value.problems
    assert [str(p) for p in problems] == [
        "blocks[0]: block 'a' (agent) has no prompt-chain equivalent (llm, parser, http and "
        "response do)",
        "blocks[2]: block 'b': a chain node cannot express with.output_schema",
        "blocks[2].with.inputs.x: reads {{c.tokens}}, which a chain cannot express (a chain "
        "passes the run's variables and each node's result only)"]   # nothing more about 'a'


async def test_an_event_fires_only_when_every_earlier_node_succeeded(receiver):
    """The event reads nothing from the prompt before it, yet waits for it (as in
    the chain): the prompt fails, so the event is skipped and nothing is sent."""
    from flowforge.providers.scripted import register_script, unregister_script

    def refuse(messages, tools):
        raise RuntimeError("the model is down")

    register_script("chain_down", refuse)
    try:
        doc = agent_to_workflow({"variables": {"topic": "tides"}, "promptChain": [
            {"type": "prompt", "name": "draft", "user": "About {topic}", "output": "draft"},
            {"type": "event", "name": "notify", "endPoint": f"{receiver.url}/started",
             "data": '{"topic": "{topic}"}'}]})
        assert doc["blocks"][1]["after"] == ["draft"]
        with allowing_private_network():
            result = await flowforge.run(doc, {}, model="scripted/chain_down", storage=False)
    finally:
        unregister_script("chain_down")
    assert result.status == "failed"
    assert result.blocks["notify"].status == "skipped" and receiver.requests == []


def test_an_agent_in_yaml_loads_like_json(tmp_path, monkeypatch):
    import yaml

    monkeypatch.setenv("FLOWFORGE_CHAIN_BASE_URL", "http://127.0.0.1:1")
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(movie(), sort_keys=False), encoding="utf-8")
    from_yaml = workflow_data_if_agent(path)
    assert from_yaml is not None
    assert from_yaml == agent_to_workflow(movie())


def test_event_data_template_keeps_types_and_fills_strings():
    from flowforge.formats.agent_json_templates import data_template

    refs = {"chars": "{{parse.data}}", "title": "{{input.title}}", "n": "{{count.content}}"}
    body = data_template('{"characters": {chars}, "label": "About {title} (\\"{n}\\")", '
                         '"{title}": [{n}, "x"]}', refs.__getitem__)
    assert body == {"characters": "{{parse.data}}",
                    "label": 'About {{input.title}} ("{{count.content}}")',
                    "{{input.title}}": ["{{count.content}}", "x"]}


async def test_the_chain_runs_in_order_unless_the_agent_asks_for_parallel():
    """Three prompts that read nothing of each other: the seed calls the model
    for node 1, then 2, then 3; `parallel: true` lets them run at once."""
    import asyncio
    import time

    from flowforge.providers.scripted import register_script, unregister_script

    spans: list[tuple[str, float, float]] = []

    async def slow(messages, tools):
        started = time.monotonic()
        await asyncio.sleep(0.05)
        spans.append((messages[-1].content, started, time.monotonic()))
        return "ok"

    chain = [{"type": "prompt", "name": f"Node {n}", "user": f"node {n}", "output": f"o{n}"}
             for n in (1, 2, 3)]
    register_script("chain_order", slow)
    try:
        doc = agent_to_workflow({"variables": {}, "promptChain": chain})
        result = await flowforge.run(doc, {}, model="scripted/chain_order", storage=False)
        assert result.status == "succeeded"
        assert [text for text, _, _ in spans] == ["node 1", "node 2", "node 3"]
        assert all(spans[i][2] <= spans[i + 1][1] for i in range(2))    # one at a time
        spans.clear()
        doc = agent_to_workflow({"variables": {}, "parallel": True, "promptChain": chain})
        result = await flowforge.run(doc, {}, model="scripted/chain_order", storage=False)
        assert result.status == "succeeded"
        assert max(start for _, start, _ in spans) < min(end for _, _, end in spans)  # overlap
    finally:
        unregister_script("chain_order")


def test_the_seeds_system_prompt_and_user_prompt_names_load():
    doc = agent_to_workflow({"variables": {"topic": "tides"}, "promptChain": [
        {"type": "prompt", "name": "ask", "systemPrompt": "You write about {topic}.",
         "userPrompt": "Tell me about ${topic}", "output": "answer"}]})
    ask = doc["blocks"][0]["with"]
    assert ask["system"] == "You write about {topic}." and ask["prompt"] == "Tell me about {topic}"
    with pytest.raises(ValidationFailed, match="`userPrompt` and `user` are the same field"):
        agent_to_workflow({"variables": {}, "promptChain": [
            {"type": "prompt", "name": "ask", "user": "a", "userPrompt": "b"}]})


def test_an_agent_id_that_is_not_a_workflow_id_round_trips():
    """A UUID id becomes `agent-<uuid>` as a workflow id; export gives the
    Agent its own id back (issue 26), and an ordinary id is untouched."""
    for agent_id, workflow_id in (("5f0c2a8e-4d1b-4c7e-9a3f-2b6d8e1c7a90",
                                   "agent-5f0c2a8e-4d1b-4c7e-9a3f-2b6d8e1c7a90"),
                                  ("agent-x7", "agent-x7"), ("movies", "movies")):
        agent = {"id": agent_id, "variables": {"q": ""}, "promptChain": [
            {"type": "prompt", "name": "ask", "user": "{q}", "output": "a"}]}
        doc = agent_to_workflow(agent)
        assert doc["id"] == workflow_id
        assert workflow_to_agent(copy.deepcopy(doc))["id"] == agent_id


async def test_a_parsed_object_reaches_the_next_prompt_as_text_and_code_as_an_object():
    """As the seed does, a parser node's object is turned back into text for the
    next prompt's `{field}`; the block's output keeps the object."""
    from flowforge.providers.scripted import register_script, unregister_script

    seen: list[str] = []

    def model(messages, tools):
        seen.append(messages[-1].content)
        return '{"name": "Mia", "age": 9}' if len(seen) == 1 else "ok"

    register_script("chain_parsed", model)
    try:
        doc = agent_to_workflow({"variables": {"q": "who?"}, "promptChain": [
            {"type": "prompt", "name": "first", "user": "{q}", "output": "raw"},
            {"type": "parser", "name": "parse", "rawData": "{raw}", "parser": "json",
             "schema": '{"name": "String", "age": "Number"}', "output": "person"},
            {"type": "prompt", "name": "second", "user": "Person: {person}", "output": "b"}]})
        result = await flowforge.run(doc, {}, model="scripted/chain_parsed", storage=False)
    finally:
        unregister_script("chain_parsed")
    assert result.status == "succeeded", result.error
    assert seen[1] == 'Person: {"name": "Mia", "age": 9}'
    assert result.results["parse"]["data"] == {"name": "Mia", "age": 9}


def test_export_gives_back_the_prompts_as_the_chain_wrote_them():
    """`${x}` and `{x}` mean the same to a chain; the block reads `{x}`, and the
    prompt as written is kept in the document's metadata so export returns it
    unchanged (issue 26); a prompt edited since is exported as it now reads."""
    agent = {"id": "story", "name": "story", "variables": {"topic": "tides"}, "promptChain": [
        {"type": "prompt", "name": "draft", "system": "Write about ${topic}.",
         "user": "A story on ${topic}, then {topic} again", "output": "d"},
        {"type": "prompt", "name": "plain", "user": "Shorten {d}", "output": "s"}]}
    doc = agent_to_workflow(agent)
    assert doc["blocks"][0]["with"]["prompt"] == "A story on {topic}, then {topic} again"
    exported = workflow_to_agent(copy.deepcopy(doc))
    assert [(n.get("system"), n["user"]) for n in exported["promptChain"]] == [
        ("Write about ${topic}.", "A story on ${topic}, then {topic} again"),
        (None, "Shorten {d}")]
    assert agent_to_workflow(json.loads(json.dumps(exported))) == doc
    edited = copy.deepcopy(doc)
    edited["blocks"][0]["with"]["prompt"] = "Now about {topic}"
    assert workflow_to_agent(edited)["promptChain"][0]["user"] == "Now about {topic}"
