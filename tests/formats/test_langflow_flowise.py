"""Langflow and Flowise flows import: the corpus of public starter projects
and marketplace templates (tests/formats/corpus/SOURCES.md) converts,
validates, and the fully converted files without network blocks run on a
scripted model; broken files are named, never a traceback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from flowforge.blocks.code import source_problems
from flowforge.formats import FormatError, ImportRefused, detect, import_data, import_file, \
    read_foreign
from flowforge.formats._flowparts import CALCULATOR_SOURCE
from flowforge.formats._zod import ZodError, zod_schema
from flowforge.providers.scripted import register_script, unregister_script
from flowforge.service.loading import load
from flowforge.service.runs import run

CORPUS = Path(__file__).parent / "corpus"

#: file -> (titles of the nodes without a counterpart, inputs of a scripted run or
#: None: network blocks or tools, a knowledge base the file carries no documents of)
EXPECTED = {
    "langflow/basic_prompting_hello_world.json": ([], {"query": "Hello"}),
    "langflow/memory_chatbot.json": ([], {"query": "Hello", "session_id": "s1"}),
    "langflow/blog_writer.json": ([], None),                 # fetches two web pages
    "langflow/vector_store_rag.json": ([], None),            # searches the base to create
    "langflow/document_qa.json": (["File"], None),
    "langflow/hierarchical_agent.json": (
        ["Hierarchical Task", "CrewAI Agent", "CrewAI Agent", "CrewAI Agent",
         "Hierarchical Crew", "OpenAI", "Search API", "OpenAI"], None),
    "flowise/llm_chain.json": ([], {"query": "socks"}),
    "flowise/prompt_chaining.json": ([], {"query": "Plan a trip"}),
    "flowise/advanced_structured_output_parser.json": ([], {"query": "Top 5 movies"}),
    "flowise/structured_output.json": ([], {"query": "Is water wet?"}),
    "flowise/translator.json": ([], {"query": "Good morning"}),
    "flowise/tool_agent.json": ([], None),                    # a web search tool
    "flowise/conversational_retrieval_qa_chain.json": ([], None),   # must search the base
}


def _answer(messages, tools):
    asked = " ".join(str(message.content) for message in messages)
    if "only output information in JSON" in asked:
        return {"output": [{"title": "Heat", "yearOfRelease": 1995, "genres": ["Thriller"],
                            "shortDescription": "Cops and robbers"}]}
    if "return result only in JSON" in asked:
        return {"output": [{"answer": "yes", "reason": "it is"}]}
    return "Hi there"


def _nodes(name: str) -> list[str]:
    data = json.loads((CORPUS / name).read_text())
    if name.startswith("langflow/"):
        return [node["data"]["node"]["display_name"] for node in data["data"]["nodes"]
                if node.get("type") != "noteNode"]
    return [node["data"]["label"] for node in data["nodes"]
            if node["data"]["name"] != "stickyNote"]


def test_the_corpus_is_the_expected_files():
    files = {f"{path.parent.name}/{path.name}" for folder in ("langflow", "flowise")
             for path in (CORPUS / folder).glob("*.json")}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_imports_and_validates(name):
    missing, _ = EXPECTED[name]
    assert detect(read_foreign(CORPUS / name)).name == name.split("/")[0]
    imported = import_file(CORPUS / name, partial=True)
    assert [node.title for node in imported.report.unsupported] == missing
    assert sorted(node.title for node in imported.report.nodes) == sorted(_nodes(name)), \
        "every node is reported once"
    layout = imported.document["metadata"]["layout"]
    assert layout and set(layout) <= {block["id"] for block in imported.document["blocks"]}
    if missing:
        with pytest.raises(ImportRefused, match=f"{len(missing)} node"):
            import_file(CORPUS / name)
    load(imported.document)


@pytest.mark.parametrize("name", sorted(n for n, (_, inputs) in EXPECTED.items()
                                        if inputs is not None))
def test_fully_converted_file_runs_on_a_scripted_model(name):
    imported = import_file(CORPUS / name)
    assert not {block["type"] for block in imported.document["blocks"]} & \
        {"http", "web_search", "parallel"}
    register_script("flows_corpus", _answer)
    try:
        result = asyncio.run(run(imported.document, EXPECTED[name][1],
                                 model="scripted/flows_corpus", storage=False))
    finally:
        unregister_script("flows_corpus")
    assert result.status == "succeeded", result.error or result.blocks


def test_langflow_prompt_model_and_output_keep_the_authors_words():
    imported = import_file(CORPUS / "langflow/basic_prompting_hello_world.json")
    blocks = {block["id"]: block for block in imported.document["blocks"]}
    assert [b["type"] for b in blocks.values()] == ["input", "template", "llm", "response"]
    assert blocks["prompt"]["with"] == {
        "template": "Answer the user as if you were a pirate.\n\nUser: {{ user_input }}\n\n"
                    "Answer: ", "variables": {"user_input": "{{input.query}}"}}
    assert blocks["openai"]["with"] == {"prompt": "{{prompt.output}}", "model": "openai/gpt-4o",
                                        "temperature": 0.1}
    assert blocks["chat_output"]["with"] == {"message": "{{openai.content}}"}
    assert imported.document["inputs"]["query"]["type"] == "string"


def test_langflow_memory_becomes_the_models_conversation():
    imported = import_file(CORPUS / "langflow/memory_chatbot.json")
    model = next(b for b in imported.document["blocks"] if b["id"] == "openai")
    assert model["type"] == "agent"
    assert model["with"]["conversation"] == "{{input.session_id}}"
    assert model["with"]["memory_window"] == 100
    memory = next(n for n in imported.report.nodes if n.title == "Chat Memory")
    assert memory.became == "conversation of 'OpenAI'"


def test_langflow_rag_searches_a_knowledge_base_to_create():
    imported = import_file(CORPUS / "langflow/vector_store_rag.json")
    search = next(b for b in imported.document["blocks"] if b["type"] == "knowledge")
    assert search["with"] == {"knowledge_base": "langflow", "query": "{{input.query}}",
                              "top_k": 4}
    assert imported.report.knowledge_bases == ["langflow"]
    parse = next(b for b in imported.document["blocks"] if b["id"] == "parse_data")
    assert parse["with"]["variables"] == {"data": "{{astra_db.results}}"}
    assert "item.content" in parse["with"]["template"]


def test_flowise_tool_agent_with_calculator_search_and_memory():
    imported = import_file(CORPUS / "flowise/tool_agent.json")
    agent = imported.document["blocks"][0]
    assert agent["type"] == "agent" and agent["with"]["model"] == "openai/gpt-4o-mini"
    assert [tool.get("name") or next(iter(tool)) for tool in agent["with"]["tools"]] == \
        ["calculator", "web_search"]
    assert agent["with"]["conversation"] == "{{input.session_id}}"
    assert agent["with"]["system"] == "You are a helpful AI assistant."


def test_flowise_prompt_values_fill_the_llm_inputs():
    imported = import_file(CORPUS / "flowise/prompt_chaining.json")
    first, second = imported.document["blocks"]
    assert first["with"]["inputs"] == {"objective": "{{input.query}}"}
    assert second["with"]["inputs"] == {"objective": "{{input.query}}",
                                        "result": "{{llm_chain.content}}"}
    assert "{result}" in second["with"]["prompt"]


def test_flowise_agentflow_html_messages_become_text_and_references():
    imported = import_file(CORPUS / "flowise/translator.json")
    llm = imported.document["blocks"][1]
    assert llm["with"]["model"] == "google/gemini-2.0-flash"
    assert llm["with"]["inputs"]["prompt"] == "English:\n{{input.query}}\nJapanese:"
    assert llm["with"]["system"].startswith("You are a helpful assistant that translates")


def test_calculator_tool_runs_in_the_sandbox_shape():
    assert source_problems(CALCULATOR_SOURCE, "main", {"expression": "1"}, "calc") == []
    scope: dict = {}
    exec(CALCULATOR_SOURCE, scope)                      # the source alone, as a test
    assert scope["main"]("(2 + 3) * 4 - sqrt(16)") == {"result": 16.0}
    assert "error" in scope["main"]("__import__('os')")
    assert "error" in scope["main"]("1 / 0")


def test_zod_schemas_become_json_schema_and_unknown_parts_are_named():
    assert zod_schema('z.object({ name: z.string().describe("who"), age: z.number().int()'
                      '.optional() })') == {
        "type": "object", "required": ["name"],
        "properties": {"name": {"type": "string", "description": "who"},
                       "age": {"type": "integer"}}}
    with pytest.raises(ZodError, match=r"z\.date\(\.\.\.\) is not read"):
        zod_schema("z.date()")


def _langflow(nodes, edges):
    return {"name": "t", "data": {"nodes": nodes, "edges": edges}}


def _lf_node(node_id, kind, **values):
    return {"id": node_id, "type": "genericNode", "position": {"x": 0, "y": 0},
            "data": {"id": node_id, "type": kind, "node": {
                "display_name": kind, "template": {k: {"value": v} for k, v in values.items()}}}}


def _fw_node(node_id, name, **inputs):
    return {"id": node_id, "position": {"x": 0, "y": 0},
            "data": {"id": node_id, "name": name, "label": name, "category": "Chains",
                     "inputs": inputs}}


@pytest.mark.parametrize("data, message", [
    (_langflow([_lf_node("ChatInput-1", "ChatInput"),
                {"id": "Prompt-2", "data": {"node": {"template": {}}}}], []),
     r"<f>: data\.nodes\[1\] \('Prompt-2'\): the node has no `data\.type`"),
    (_langflow([_lf_node("ChatInput-1", "ChatInput")],
               [{"source": "ChatInput-1", "target": "Gone-9"}]),
     r"<f>: data\.edges\[0\]: unknown node 'Gone-9'"),
])
def test_broken_langflow_files_name_the_place(data, message):
    with pytest.raises(FormatError, match=message):
        import_data(data, source="<f>", format="langflow")


@pytest.mark.parametrize("data, message", [
    ({"nodes": [_fw_node("llmChain_0", "llmChain"), {"id": "x_1", "data": {"inputs": {}}}],
      "edges": []},
     r"<f>: nodes\[1\] \('x_1'\): the node has no `data\.name`"),
    ({"nodes": [_fw_node("llmChain_0", "llmChain")],
      "edges": [{"source": "chatOpenAI_0", "target": "llmChain_0"}]},
     r"<f>: edges\[0\]: unknown node 'chatOpenAI_0'"),
    ({"nodes": [_fw_node("llmChain_0", "llmChain", model="{{chatOpenAI_9.data.instance}}")],
      "edges": []},
     r"<f>: llmChain_0\.inputs\.model: unknown node 'chatOpenAI_9'"),
])
def test_broken_flowise_files_name_the_place(data, message):
    with pytest.raises(FormatError, match=message):
        import_data(data, source="<f>", format="flowise")


def test_detection_keeps_each_format_to_its_own_files():
    bare_flowise = {k: v for k, v in json.loads(
        (CORPUS / "flowise/llm_chain.json").read_text()).items() if k in ("nodes", "edges")}
    assert detect(bare_flowise).name == "flowise"          # Flowise's own export shape
    bare_langflow = json.loads((CORPUS / "langflow/blog_writer.json").read_text())["data"]
    assert detect(bare_langflow).name == "langflow"
    for folder in ("dify", "n8n"):
        for path in (CORPUS / folder).iterdir():
            try:
                data = read_foreign(path)
            except FormatError:
                continue                                    # the glued n8n file
            assert detect(data).name == folder, path.name
