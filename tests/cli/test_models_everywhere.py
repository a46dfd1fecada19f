"""Every model a document can name, and every workflow it runs, is checked by
`flowforge validate` and before the run's first block (issue 25): the model
of a block an agent calls as a tool, a router's embedding model, the models
of a nested workflow (a `workflow` block or a workflow tool), each problem
located.  A run that would have failed there stops before any block ran."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.errors import ValidationFailed
from flowforge.providers.scripted import register_script, unregister_script
from tests.cli.test_validate_knows import RAN, cli, write

RULES = "default: fine\n"

TOOL_BLOCK = """\
    id: tooly
    blocks:
      - {id: first, type: function, with: {function: knows_first}}
      - id: helper
        type: agent
        after: [first]
        with:
          prompt: hi
          model: scripted/rules.yaml
          tools:
            - {function: knows_first, name: unrelated}
            - block: {type: llm, name: summarise, description: Summarise a text,
                      with: {model: MODEL}}
    """
WHERE = "blocks[1].with.tools[1].block.with.model"


@pytest.fixture
def folder(tmp_path):
    write(tmp_path, "rules.yaml", RULES)
    RAN.clear()
    return tmp_path


@pytest.mark.parametrize("model, words", [
    ("openai/gpt-4o-mini", "model 'openai/gpt-4o-mini': no API key found - set the "
                           "OPENAI_API_KEY environment variable"),
    ("scripted/missing-rules.yaml", "model 'scripted/missing-rules.yaml': scripted rules file "
                                    "not found: missing-rules.yaml"),
    ("local/missing-model.gguf", "model 'local/missing-model.gguf': local model "
                                 "'missing-model.gguf' is neither 'smollm2' nor an existing "
                                 "GGUF file"),
])
def test_a_tool_blocks_model_fails_validate_located(folder, model, words):
    path = write(folder, "tool.yaml", TOOL_BLOCK.replace("MODEL", model))
    proc = cli("validate", str(path))
    assert proc.returncode == 2, proc.stdout
    assert f"{WHERE}: {words}" in " ".join(proc.stderr.split()), proc.stderr
    proc = cli("run", str(path), "--no-store")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{WHERE}: {words}" in " ".join(proc.stderr.split()), proc.stderr


def test_a_tool_block_without_its_key_fails_the_run_before_its_first_block(folder, no_keys):
    path = write(folder, "tool.yaml", TOOL_BLOCK.replace("MODEL", "anthropic/claude-sonnet-4-5"))
    result = flowforge.run_sync(str(path), {}, storage=False)
    assert result.status == "failed" and result.blocks == {} and RAN == []
    assert result.error.startswith(f"{WHERE}: model 'anthropic/claude-sonnet-4-5': no API key")


def test_a_missing_file_of_a_tool_block_refuses_the_run(folder):
    path = write(folder, "tool.yaml", TOOL_BLOCK.replace("MODEL", "scripted/gone.yaml"))
    with pytest.raises(ValidationFailed) as caught:
        flowforge.run_sync(str(path), {}, storage=False)
    assert [p.where for p in caught.value.problems] == [WHERE]
    assert RAN == []


def test_a_tool_block_that_brings_its_own_key_needs_no_provider_key(folder):
    path = write(folder, "tool.yaml", TOOL_BLOCK.replace(
        "with: {model: MODEL}", "with: {model: openai/gpt-4o-mini, api_key: '{{env.TEAM_KEY}}'}"))
    proc = cli("validate", str(path))
    assert proc.returncode == 0, proc.stderr


def test_tool_blocks_inside_tool_blocks_are_checked(folder, no_keys):
    inner = ("{type: agent, name: researcher, description: Research, with: {model: "
             "scripted/rules.yaml, tools: [{block: {type: llm, name: deep, with: "
             "{model: google/gemini-2.5-flash}}}]}}")
    path = write(folder, "deep.yaml", TOOL_BLOCK.replace(
        "{type: llm, name: summarise, description: Summarise a text,\n"
        "                      with: {model: MODEL}}", inner))
    result = flowforge.run_sync(str(path), {}, storage=False)
    assert result.status == "failed" and result.blocks == {} and RAN == []
    assert result.error.startswith("blocks[1].with.tools[1].block.with.tools[0].block.with."
                                   "model: model 'google/gemini-2.5-flash': no API key"), \
        result.error


ROUTER = """\
    id: routes
    blocks:
      - {id: first, type: function, with: {function: knows_first}}
      - id: pick
        type: router
        after: [first]
        with: {prompt: refund please, strategy: semantic, embedding_model: EMBEDDING}
      - {id: refunds, type: response, after: [pick], with: {message: refunds}}
      - {id: other, type: response, after: [pick], with: {message: other}}
    """


def test_a_routers_hosted_embedding_model_needs_its_key_before_the_run(folder, no_keys):
    path = write(folder, "routes.yaml", ROUTER.replace("EMBEDDING", "openai/text-embedding-3-small"))
    where = "blocks[1].with.embedding_model: model 'openai/text-embedding-3-small': no API key"
    proc = cli("validate", str(path))
    assert proc.returncode == 2 and where in " ".join(proc.stderr.split()), proc.stderr
    result = flowforge.run_sync(str(path), {}, storage=False)
    assert result.status == "failed" and result.blocks == {} and RAN == []
    assert result.error.startswith(where), result.error


def test_an_unknown_embedding_model_fails_validate_and_the_bundled_one_passes(folder):
    path = write(folder, "routes.yaml", ROUTER.replace("EMBEDDING", "minilm-l12"))
    proc = cli("validate", str(path))
    assert proc.returncode == 2
    assert "blocks[1].with.embedding_model: unknown embedding model 'minilm-l12': use " \
           "local/all-minilm-l6-v2" in " ".join(proc.stderr.split()), proc.stderr
    for bundled in ("minilm", "local/all-minilm-l6-v2"):
        path = write(folder, "routes.yaml", ROUTER.replace("EMBEDDING", bundled))
        proc = cli("validate", str(path))
        assert proc.returncode == 0, proc.stderr


# -- nested workflows ---------------------------------------------------------------

CHILD = """\
    id: child
    inputs: {name: {type: string}}
    blocks:
      - {id: ask, type: llm, with: {prompt: "hi {{input.name}}", model: MODEL}}
    """
PARENT = """\
    id: parent
    blocks:
      - {id: first, type: function, with: {function: knows_first}}
      - {id: kid, type: workflow, after: [first], with: {workflow: child.yaml,
                                                        inputs: {name: bob}}}
    """
IN_CHILD = "child.yaml: blocks[0].with.model: model 'anthropic/claude-sonnet-4-5': no API key"
USED_BY = "(used by parent.yaml blocks[1] 'kid')"


def test_a_nested_childs_key_is_checked_by_validate_and_before_the_parent_runs(folder,
                                                                               no_keys):
    write(folder, "child.yaml", CHILD.replace("MODEL", "anthropic/claude-sonnet-4-5"))
    parent = write(folder, "parent.yaml", PARENT)
    proc = cli("validate", str(parent))
    text = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and IN_CHILD in text and USED_BY in text, proc.stderr
    result = flowforge.run_sync(str(parent), {}, storage=False)
    assert result.status == "failed" and result.blocks == {} and RAN == []
    assert result.error.startswith(IN_CHILD) and USED_BY in result.error, result.error
    # The child's key in the parent's `env:` (what the nested run's providers read): fine.
    parent.write_text(parent.read_text() + "env: {ANTHROPIC_API_KEY: sk-test}\n")
    assert cli("validate", str(parent)).returncode == 0


def test_a_child_changed_after_the_parent_was_loaded_is_checked_at_run_start(folder,
                                                                             no_keys):
    register_script("everywhere_ok", lambda messages, tools: "hello")
    try:
        child = write(folder, "child.yaml", CHILD.replace("MODEL", "scripted/everywhere_ok"))
        compiled = flowforge.load(write(folder, "parent.yaml", PARENT))
        assert flowforge.run_sync(compiled, {}, storage=False).status == "succeeded"
        RAN.clear()
        child.write_text(child.read_text().replace("scripted/everywhere_ok",
                                                   "openai/gpt-4o-mini"))
        result = flowforge.run_sync(compiled, {}, storage=False)
        assert result.status == "failed" and result.blocks == {} and RAN == []
        assert result.error.startswith("child.yaml: blocks[0].with.model: model "
                                       "'openai/gpt-4o-mini': no API key"), result.error
        child.unlink()
        result = flowforge.run_sync(compiled, {}, storage=False)
        assert result.status == "failed" and result.blocks == {} and RAN == []
        assert result.error.startswith("blocks[1].with.workflow: nested workflow file not "
                                       "found"), result.error
    finally:
        unregister_script("everywhere_ok")


def test_a_grandchilds_file_is_checked_located_through_each_level(folder):
    write(folder, "grandchild.yaml", CHILD.replace("child", "grandchild")
          .replace("MODEL", "scripted/rules.yaml"))
    write(folder, "child.yaml", PARENT.replace("parent", "child").replace(
        "child.yaml", "grandchild.yaml"))
    compiled = flowforge.load(write(folder, "parent.yaml", PARENT))
    (folder / "rules.yaml").unlink()                  # gone after the load
    result = flowforge.run_sync(compiled, {}, storage=False)
    assert result.status == "failed" and result.blocks == {} and RAN == []
    assert result.error.startswith("child.yaml: grandchild.yaml: blocks[0].with.model: model "
                                   "'scripted/rules.yaml': scripted rules file not found"), \
        result.error
    assert "(used by child.yaml blocks[1] 'kid') (used by parent.yaml blocks[1] 'kid')" in \
        result.error


def test_a_workflow_tools_models_are_checked_before_the_run(folder, no_keys):
    write(folder, "child.yaml", CHILD.replace("MODEL", "openai/gpt-4o-mini"))
    path = write(folder, "agent.yaml", TOOL_BLOCK.replace(
        "- block: {type: llm, name: summarise, description: Summarise a text,\n"
        "                      with: {model: MODEL}}",
        "- {workflow: child.yaml, name: greet, description: Greets}"))
    result = flowforge.run_sync(str(path), {}, storage=False)
    assert result.status == "failed" and result.blocks == {} and RAN == []
    assert result.error.startswith("child.yaml: blocks[0].with.model: model "
                                   "'openai/gpt-4o-mini': no API key"), result.error
    assert "(used by agent.yaml blocks[1] 'helper')" in result.error


def test_a_registered_childs_key_is_checked_before_the_run(no_keys):
    flowforge.register_workflow({"id": "everywhere-child", "blocks": [
        {"id": "ask", "type": "llm", "with": {"prompt": "hi", "model": "openai/gpt-4o"}}]})
    RAN.clear()
    result = flowforge.run_sync({"id": "p", "blocks": [
        {"id": "first", "type": "function", "with": {"function": "knows_first"}},
        {"id": "kid", "type": "workflow", "after": ["first"],
         "with": {"workflow": "everywhere-child"}}]}, {}, storage=False)
    assert result.status == "failed" and result.blocks == {} and RAN == []
    assert result.error.startswith("everywhere-child: blocks[0].with.model: model "
                                   "'openai/gpt-4o': no API key"), result.error


def test_a_model_override_replaces_the_childs_models_too(folder, no_keys):
    register_script("everywhere_ok", lambda messages, tools: "hello")
    try:
        write(folder, "child.yaml", CHILD.replace("MODEL", "openai/gpt-4o-mini"))
        parent = write(folder, "parent.yaml", PARENT)
        result = flowforge.run_sync(str(parent), {}, storage=False,
                                    model="scripted/everywhere_ok")
        assert result.status == "succeeded", result.error
        assert result.results["kid"]["ask"]["content"] == "hello"
    finally:
        unregister_script("everywhere_ok")


@pytest.fixture
def no_keys(monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_the_budget_that_runs_is_the_one_checked(no_keys):
    """A run's `budget=` replaces the document's: its downgrade model is the
    one checked before the first block, and the document's is not."""
    register_script("everywhere_ok", lambda messages, tools: "hello")
    try:
        doc = {"id": "b", "budget": {"tokens": 1000, "on_exceed": {"downgrade": "openai/gpt-4o"}},
               "blocks": [{"id": "ask", "type": "llm",
                           "with": {"prompt": "hi", "model": "scripted/everywhere_ok"}}]}
        result = flowforge.run_sync(doc, {}, storage=False)
        assert result.status == "failed" and result.blocks == {}
        assert result.error.startswith("budget.on_exceed.downgrade: model 'openai/gpt-4o': "
                                       "no API key"), result.error
        result = flowforge.run_sync(doc, {}, storage=False, budget={"tokens": 1000})
        assert result.status == "succeeded", result.error
        result = flowforge.run_sync({**doc, "budget": None}, {}, storage=False, budget={
            "tokens": 1000, "on_exceed": {"downgrade": "anthropic/claude-sonnet-4-5"}})
        assert result.status == "failed" and result.blocks == {}
        assert result.error.startswith("budget.on_exceed.downgrade: model "
                                       "'anthropic/claude-sonnet-4-5': no API key"), result.error
    finally:
        unregister_script("everywhere_ok")
