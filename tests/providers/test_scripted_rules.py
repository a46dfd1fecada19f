"""The scripted provider: rules files and the Python twin answer exactly as written."""

from __future__ import annotations

import pytest

from flowforge.errors import ProviderError
from flowforge.providers import LLMRequest, Message, ToolSpec, resolve_model
from flowforge.providers.resolve import ProviderOptions, clear_provider_cache
from flowforge.providers.scripted import register_script

RULES = """
rules:
  - system: "routing agent"
    match: "refund"
    reply: standard
  - match: "What is"
    tool_calls: [{name: knowledge_search, arguments: {query: refund policy}}]
  - match: "30 days"
    reply: {answer: "Refunds within 30 days", confidence: 0.9}
    usage: {prompt: 11, completion: 7}
  - tools: "^calc$"
    match: "sum"
    reply: "use the calculator"
"""


@pytest.fixture
def rules_file(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(RULES + 'default: "I don\'t know."\n')
    clear_provider_cache()
    return path


def ask(provider, model, *messages, tools=(), stream=False, on_delta=None):
    request = LLMRequest(model, [Message(role, text) for role, text in messages],
                         tools=list(tools), stream=stream)
    import asyncio
    return asyncio.run(provider.complete(request, on_delta))


def test_first_matching_rule_wins_and_system_regex_is_checked(rules_file):
    provider, model = resolve_model(f"scripted/{rules_file}")
    routed = ask(provider, model, ("system", "You are a routing agent."), ("user", "refund?"))
    assert routed.text == "standard" and routed.tool_calls == []
    plain = ask(provider, model, ("system", "You are helpful."), ("user", "refund?"))
    assert plain.text == "I don't know."


def test_tool_calls_mapping_replies_and_usage(rules_file):
    provider, model = resolve_model(f"scripted/{rules_file}")
    call = ask(provider, model, ("user", "What is the refund policy?"))
    assert [(c.name, c.arguments) for c in call.tool_calls] == [
        ("knowledge_search", {"query": "refund policy"})]
    assert call.finish_reason == "tool_calls"
    answer = ask(provider, model, ("user", "What is it?"), ("tool", "Refunds within 30 days."))
    assert answer.text == '{"answer": "Refunds within 30 days", "confidence": 0.9}'
    assert answer.usage.to_dict() == {"prompt": 11, "completion": 7, "total": 18}
    counted = ask(provider, model, ("user", "refund?"))
    assert counted.usage.to_dict() == {"prompt": 1, "completion": 3, "total": 4}


def test_tools_regex_and_streaming(rules_file):
    provider, model = resolve_model(f"scripted/{rules_file}")
    calc = ToolSpec("calc", "adds numbers")
    assert ask(provider, model, ("user", "sum 2 and 3"), tools=[calc]).text == "use the calculator"
    assert ask(provider, model, ("user", "sum 2 and 3")).text == "I don't know."
    pieces = []
    response = ask(provider, model, ("user", "sum it"), tools=[calc], stream=True,
                   on_delta=pieces.append)
    assert "".join(pieces) == response.text == "use the calculator"


def test_no_match_without_default_names_the_message(tmp_path):
    path = tmp_path / "strict.yaml"
    path.write_text(RULES)
    clear_provider_cache()
    provider, model = resolve_model(f"scripted/{path}")
    with pytest.raises(ProviderError, match="no rule in .* matches the message 'hello there'"):
        ask(provider, model, ("user", "hello there"))


def test_bad_rules_files_are_clear(tmp_path):
    clear_provider_cache()
    with pytest.raises(ProviderError, match="rules file not found"):
        resolve_model(f"scripted/{tmp_path / 'missing.yaml'}")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - mach: x\n")
    with pytest.raises(ProviderError, match="rules.0.mach: Extra inputs are not permitted"):
        resolve_model(f"scripted/{bad}")


def test_relative_rules_resolve_against_the_workflow_folder(tmp_path, rules_file):
    provider, _ = resolve_model("scripted/rules.yaml", ProviderOptions(base_dir=rules_file.parent))
    assert provider.rules.default == "I don't know."


def test_python_twin_gets_messages_and_tools():
    seen = {}

    def script(messages, tools):
        seen["roles"] = [m.role for m in messages]
        seen["tools"] = [t.name for t in tools]
        if messages[-1].role == "tool":
            return "done: " + messages[-1].content
        return {"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]}

    register_script("twin-test", script)
    provider, model = resolve_model("scripted/twin-test")
    first = ask(provider, model, ("user", "go"), tools=[ToolSpec("lookup", "find")])
    assert first.tool_calls[0].name == "lookup" and seen == {"roles": ["user"],
                                                             "tools": ["lookup"]}
    second = ask(provider, model, ("user", "go"), ("tool", "42"))
    assert second.text == "done: 42"


def test_model_strings_are_checked_in_one_place():
    with pytest.raises(ProviderError, match="does not name a provider"):
        resolve_model("gpt-4o")
    with pytest.raises(ProviderError, match="unknown provider 'nope'"):
        resolve_model("nope/model")
