"""The capability policy from Python: the local user is trusted (today's
behaviour), a `Policy` without grants keeps a document inside the run, and
what it refuses is located and names the capability."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.engine.runner import Run
from flowforge.errors import CapabilityDenied
from flowforge.service.loading import load
from flowforge.workflow.policy import CAPABILITIES, TRUSTED, Policy, policy_problems
from tests.echo_server import echo_server, sending

NOBODY = Policy(subject="mallory")


def _doc(*blocks, **extra):
    return {"id": "p", "blocks": list(blocks), **extra}


async def test_the_local_user_is_trusted(monkeypatch):
    monkeypatch.setenv("FF_POLICY_HOME", "/home/me")
    result = await flowforge.run(_doc({"id": "a", "type": "set",
                                       "with": {"v": "{{env.FF_POLICY_HOME}}"}}), storage=False)
    assert result.results["a"]["v"] == "/home/me"
    assert TRUSTED.allows("local_commands") and set(TRUSTED.granted) == set(CAPABILITIES)


@pytest.mark.parametrize("document, capability, where", [
    (_doc({"id": "a", "type": "set", "with": {"v": "{{env.FF_POLICY_HOME}}"}}),
     "server_env", "blocks[0].with"),
    (_doc({"id": "a", "type": "workflow", "with": {"workflow": "../other.yaml"}}),
     "server_files", "blocks[0].with.workflow"),
    (_doc({"id": "a", "type": "knowledge", "with": {"knowledge_base": "k", "query": "q",
                                                     "sources": ["/etc"]}}),
     "server_files", "blocks[0].with.sources"),
    (_doc({"id": "a", "type": "http", "with": {"url": "http://x.test",
                                                "allow_private_network": "{{input.flag}}"}}),
     "private_network", "blocks[0].with.allow_private_network"),
    (_doc({"id": "a", "type": "agent", "with": {
        "prompt": "p", "tools": [{"mcp": {"command": "id"}}]}}),
     "local_commands", "blocks[0].with.tools[0].mcp.command"),
    (_doc({"id": "a", "type": "agent", "with": {
        "prompt": "p", "tools": [{"block": {"type": "http", "with": {
            "url": "http://x.test", "allow_private_network": True}}}]}}),
     "private_network", "blocks[0].with.tools[0].block.with.allow_private_network"),
    (_doc({"id": "a", "type": "agent", "with": {
        "prompt": "p", "tools": [{"workflow": "/srv/flows/x.yaml", "name": "x"}]}}),
     "server_files", "blocks[0].with.tools[0].workflow"),
    (_doc({"id": "a", "type": "agent", "with": {"prompt": "p",
                                                 "model": "scripted//etc/rules.yaml"}}),
     "server_files", "blocks[0].with.model"),
    (_doc({"id": "a", "type": "agent", "with": {"prompt": "p"}},
          defaults={"model": "local//srv/models/x.gguf"}),
     "server_files", "defaults.model"),
    (_doc({"id": "a", "type": "agent", "with": {"prompt": "p"}},
          defaults={"provider_options": {"base_url": "http://evil.test/v1"}}),
     "provider_endpoints", "defaults.provider_options.base_url"),
    (_doc({"id": "outer", "type": "loop", "with": {"times": 2}, "blocks": [
        {"id": "inner", "type": "set", "with": {"v": "{{env.FF_POLICY_HOME}}"}}]}),
     "server_env", "blocks[0].blocks[0].with"),
], ids=["env", "nested-path", "sources", "private-template", "mcp-stdio", "block-tool",
        "workflow-tool", "scripted-model", "local-model-file", "base-url", "inside-a-loop"])
async def test_each_way_into_the_host_is_refused_and_located(document, capability, where):
    problems = policy_problems(load(document), NOBODY)
    assert [(p.capability, p.where) for p in problems] == [(capability, where)]
    assert "flowforge users grant mallory " + capability in problems[0].message
    with pytest.raises(CapabilityDenied) as caught:
        await flowforge.run(document, storage=False, policy=NOBODY)
    assert caught.value.capabilities == [capability]
    granted = Policy([capability], subject="mallory")
    assert policy_problems(load(document), granted) == []


async def test_a_document_inside_the_run_needs_nothing():
    document = _doc({"id": "a", "type": "set", "with": {"v": "{{env.OWN}}"}},
                    {"id": "b", "type": "workflow", "with": {"workflow": "registered-id"}},
                    env={"OWN": "mine"})
    assert policy_problems(load(document), NOBODY) == []


async def test_an_untrusted_run_sees_only_its_documents_env(monkeypatch):
    monkeypatch.setenv("FF_POLICY_HOME", "/home/server")
    monkeypatch.setenv("OWN", "the server's value")
    document = load(_doc({"id": "a", "type": "set", "with": {"v": "{{env.OWN}}"}},
                         env={"OWN": "the document's value"}))
    result = await flowforge.run(document, storage=False, policy=NOBODY)
    assert result.results["a"]["v"] == "the document's value"
    run = Run(document, policy=NOBODY)
    assert "FF_POLICY_HOME" not in run.env and dict(run.env) == {"OWN": "the document's value"}


def test_provider_keys_follow_the_policy(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "https://proxy.admin.test/v1")   # admin setting
    monkeypatch.setenv("FF_POLICY_HOME", "/home/server")
    document = load(_doc({"id": "a", "type": "set", "with": {"v": 1}},
                         env={"OPENAI_API_KEY": "doc-key", "ANTHROPIC_BASE_URL": "http://evil"}))
    run = Run(document, policy=NOBODY, secrets={"ANTHROPIC_API_KEY": "users-key"},
              provider_keys={"OPENAI_API_KEY": "shared-key", "GEMINI_API_KEY": "shared-g"})
    env = run.provider_env()
    assert env["OPENAI_BASE_URL"] == "https://proxy.admin.test/v1"
    assert env["OPENAI_API_KEY"] == "doc-key"              # the user's own wins
    assert env["GEMINI_API_KEY"] == "shared-g" and env["ANTHROPIC_API_KEY"] == "users-key"
    assert "ANTHROPIC_BASE_URL" not in env                 # choosing endpoints is a capability
    assert "FF_POLICY_HOME" not in env
    chosen = run.provider_env(endpoint_chosen=True)
    assert "GEMINI_API_KEY" not in chosen                  # shared keys stay with their URL
    trusted = Run(document, secrets={"ANTHROPIC_API_KEY": "users-key"}).provider_env()
    assert trusted["FF_POLICY_HOME"] == "/home/server" and trusted["ANTHROPIC_API_KEY"] == \
        "users-key"


async def test_secrets_reach_templates_and_never_the_result():
    with echo_server() as url:
        document = _doc(sending("a", url, "Bearer {{secrets.TOKEN}}"),
                        sending("b", url, "{{secrets.TOKEN}}"))
        seen: list[dict] = []
        result = await flowforge.run(document, storage=False, secrets={"TOKEN": "tok-123456"},
                                     on_event=seen.append)
    assert result.results["a"]["data"] == {"auth": "Bearer ***"}        # sent, then redacted
    assert result.results["b"]["data"] == {"auth": "***"}
    assert "tok-123456" not in repr(result.to_dict())
