"""What `flowforge validate` accepts runs (issue 41): a function nobody
registered, a tool option the run refuses, a prompt placeholder the run
cannot fill each used to pass `validate` and fail the run.  Each is now a
located problem in `validate`, or works in the run."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest

import flowforge
from flowforge.tools.functions import unregister_function
from tests.cli.test_validate_knows import cli


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def plugin(folder: Path) -> tuple[Path, str]:
    """A module registering one function under a name of its own (the test
    process keeps what an --import registered)."""
    name = f"v41_{uuid.uuid4().hex[:8]}"
    return write(folder, f"{name}.py", f"""
        import flowforge

        @flowforge.function("{name}_stats")
        def stats(text: str) -> dict:
            return {{"words": len(text.split())}}
        """), f"{name}_stats"


# -- 1a: functions --------------------------------------------------------------------------

CALLS = """\
    id: calls
    inputs: {text: {type: string}}
    blocks:
      - {id: stats, type: function, with: {function: FUNCTION, args: {text: "{{input.text}}"}}}
      - id: ask
        type: agent
        with: {model: local/smollm2, prompt: hi, tools: [TOOL, {function: TOOL}]}
    """


def test_validate_names_a_function_nobody_registered_with_did_you_mean(tmp_path):
    module, name = plugin(tmp_path)
    typo = name[:-1]                                   # ..._stat for ..._stats
    path = write(tmp_path, "calls.yaml", CALLS.replace("FUNCTION", typo)
                 .replace("TOOL", typo))
    try:
        bare = cli("validate", str(path))
        assert bare.returncode == 2, bare.stdout + bare.stderr
        assert f"blocks[0].with.function: no function registered as '{typo}'" in bare.stderr
        assert "--import" in bare.stderr

        imported = cli("validate", str(path), "--import", str(module))
        assert imported.returncode == 2, imported.stdout + imported.stderr
        text = " ".join(imported.stderr.split())
        for where in ("blocks[0].with.function", "blocks[1].with.tools[0]",
                      "blocks[1].with.tools[1].function"):
            assert f"{where}: no function registered as '{typo}' - did you mean '{name}'?" \
                in text, text

        fixed = write(tmp_path, "fixed.yaml", CALLS.replace("FUNCTION", name)
                      .replace("TOOL", name))
        ok = cli("validate", str(fixed), "--import", str(module))
        assert ok.returncode == 0, ok.stderr
    finally:
        unregister_function(name)


def test_validate_and_run_agree_on_a_registered_function(tmp_path):
    module, name = plugin(tmp_path)
    path = write(tmp_path, "calls.yaml", """\
        id: calls
        inputs: {text: {type: string}}
        blocks:
          - {id: stats, type: function, with: {function: FUNCTION, args: {text: "{{input.text}}"}}}
        """.replace("FUNCTION", name))
    try:
        assert cli("validate", str(path), "--import", str(module)).returncode == 0
        run = cli("run", str(path), "--import", str(module), "-i", "text=a b c", "--no-store",
                  "--json")
        assert run.returncode == 0, run.stdout + run.stderr
        assert '"words": 3' in run.stdout
    finally:
        unregister_function(name)


def test_a_run_names_the_closest_registered_function_too():
    @flowforge.function("v41_lookup_order")
    def lookup(order: str) -> dict:
        return {"order": order}

    try:
        result = flowforge.run_sync({"id": "r", "blocks": [
            {"id": "f", "type": "function", "with": {"function": "v41_lookup_ordr"}}]},
            {}, storage=False)
        assert result.status == "failed"
        assert "did you mean 'v41_lookup_order'?" in result.blocks["f"].error
    finally:
        unregister_function("v41_lookup_order")


# -- 1b: tool options -----------------------------------------------------------------------

def agent_doc(tools: list) -> dict:
    return {"id": "tools", "blocks": [{"id": "ask", "type": "agent", "with": {
        "model": "scripted/v41_answer", "prompt": "hi", "tools": tools}}]}


SIM_SPELLINGS = [
    [{"knowledge_search": {"knowledgeBaseId": "policies", "topK": 3}}],
    [{"knowledge_search": {"knowledgeBaseId": "policies", "tagFilters": {"category": "legal"},
                           "minSimilarity": 0.2}}],
    [{"rag_search": {"knowledgeBaseId": "policies", "topK": 3}}],
    [{"web_search": {"backend": "offline", "maxResults": 3, "knowledgeBaseId": "web"}}],
    [{"block": {"type": "knowledge", "name": "kb",
                "with": {"knowledgeBaseId": "policies", "topK": 3}}}],
]


def test_sim_spellings_of_tool_options_pass_validate_and_run():
    from flowforge.providers.scripted import register_script, unregister_script

    register_script("v41_answer", lambda messages, tools: f"{len(tools)} tool(s)")
    try:
        for tools in SIM_SPELLINGS:
            compiled = flowforge.load(agent_doc(tools))          # what validate checks
            result = flowforge.run_sync(compiled, {}, storage=False)
            assert result.status == "succeeded", (tools, result.error)
            assert result.results["ask"]["content"] == "1 tool(s)"
    finally:
        unregister_script("v41_answer")


def test_the_run_reads_the_canonical_options():
    from flowforge.blocks._toolset import ToolEntry

    entry = ToolEntry.model_validate({"knowledge_search": {"knowledgeBaseId": "policies",
                                                           "topK": 3}})
    assert entry.knowledge_search.model_dump(exclude_none=True) == {
        "knowledge_base": "policies", "top_k": 3}
    block = ToolEntry.model_validate({"block": {"type": "knowledge", "with": {
        "knowledgeBaseId": "policies", "topK": 3}}})
    assert block.block.with_ == {"knowledge_base": "policies", "top_k": 3}


@pytest.mark.parametrize("tools, expected", [
    ([{"knowledge_search": {"knowledge_base": "p", "topk": 3}}],
     "blocks[0].with.tools[0].knowledge_search.topk: unknown field 'topk' - did you mean "
     "'top_k'?"),
    ([{"knowledge_search": {"knowledgeBaseId": "p", "knowledge_base": "q"}}],
     "knowledge_search.knowledgeBaseId: `knowledgeBaseId` and `knowledge_base` are the same "
     "field"),
    ([{"knowledge_search": {"knowledge_base": "p", "mode": "fuzzy"}}],
     "blocks[0].with.tools[0].knowledge_search.mode"),
    ([{"block": {"type": "http", "with": {"methd": "GET"}}}],
     "with.methd: a 'http' block has no field 'methd' - did you mean 'method'?"),
    ([{"block": {"type": "htp"}}], "unknown block type 'htp' - did you mean 'http'?"),
    ([{"block": {"type": "router"}}], "a 'router' block cannot be used as a tool"),
], ids=["typo", "both-spellings", "bad-mode", "block-field", "block-type", "routing-block"])
def test_tool_options_the_run_refuses_are_refused_by_validate(tmp_path, tools, expected):
    import json

    path = tmp_path / "tools.json"
    path.write_text(json.dumps(agent_doc(tools) | {"blocks": [
        {"id": "ask", "type": "agent", "with": {"model": "local/smollm2", "prompt": "hi",
                                                "tools": tools}}]}))
    proc = cli("validate", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in " ".join(proc.stderr.split()), proc.stderr
