"""The agent block, driven by scripted models: tool loop, validation,
required tools, structured output, memories, streaming, the run record."""

from __future__ import annotations

import asyncio

import pytest

import flowforge
from flowforge.storage import storage_from_url
from flowforge.tools.spec import ToolContext

from .helpers import events, requests, run_blocks, scripted, statuses

CALLS: list[tuple[str, dict]] = []


@flowforge.function("t_weather")
async def weather(city: str) -> dict:
    """Current weather of a city."""
    CALLS.append(("weather", {"city": city}))
    return {"city": city, "temp": 21}


@flowforge.function("t_rendezvous")
async def rendezvous(name: str) -> str:
    """Returns only once two calls are running at the same time."""
    CALLS.append(("rendezvous", {"name": name}))
    BARRIER.append(name)
    for _ in range(200):
        if len(BARRIER) >= 2:
            return f"met {name}"
        await asyncio.sleep(0.005)
    raise RuntimeError("the other call never started: calls ran one after the other")


BARRIER: list[str] = []


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()
    BARRIER.clear()


def agent(model, **with_):
    return {"id": "agent", "type": "agent", "with": {"model": model, **with_}}


async def test_tool_loop_runs_parallel_calls_and_records_everything():
    def script(messages, tools):
        if messages[-1].role == "user":
            return {"reply": "Let me check.", "tool_calls": [
                {"name": "t_rendezvous", "arguments": {"name": "a"}},
                {"name": "t_rendezvous", "arguments": {"name": "b"}}]}
        results = [m.content for m in messages if m.role == "tool"]
        return "Both: " + ", ".join(results)

    with scripted(script) as model:
        result = await run_blocks([agent(model, system="Be brief.", prompt="Meet twice",
                                         tools=["t_rendezvous"])])
    output = result.results["agent"]
    assert result.status == "succeeded"
    assert output["content"] == "Both: met a, met b"
    assert output["toolCalls"]["count"] == 2
    assert [c["result"] for c in output["toolCalls"]["list"]] == ["met a", "met b"]
    assert set(output["toolCalls"]["list"][0]) == {"name", "arguments", "result", "startTime",
                                                   "endTime", "duration"}
    assert output["providerTiming"]["iterations"] == 2
    assert set(output["providerTiming"]) == {"startTime", "endTime", "duration", "modelTime",
                                             "toolsTime", "iterations"}
    assert output["tokens"]["total"] == output["tokens"]["prompt"] + output["tokens"]["completion"] > 0
    assert output["cost"] == {"input": 0.0, "output": 0.0, "total": 0.0}
    assert output["model"] == model
    # The second request is exactly what the model saw: the calls, then each result paired by id.
    second = requests(result, "agent")[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    call_ids = [c["id"] for c in second[2]["tool_calls"]]
    assert [m["tool_call_id"] for m in second[3:]] == call_ids and len(set(call_ids)) == 2
    assert requests(result, "agent")[0]["tools"][0]["name"] == "t_rendezvous"
    recorded = events(result, "llm_request", "agent")[1]["request"]   # only what was new
    assert recorded["messages_offset"] == 2 and len(recorded["messages"]) == 3
    assert len(events(result, "tool_called", "agent")) == 2
    assert result.usage["tokens"] == output["tokens"]


async def test_max_iterations_is_a_clear_failure():
    def script(messages, tools):
        return {"tool_calls": [{"name": "t_weather", "arguments": {"city": "Oslo"}}]}

    with scripted(script) as model:
        result = await run_blocks([agent(model, prompt="Loop", tools=["t_weather"],
                                         max_iterations=3)])
    assert statuses(result) == {"agent": "failed"}
    error = result.blocks["agent"].error
    assert "still calling tools after max_iterations=3 model turns" in error
    assert len(CALLS) == 3 and len(requests(result, "agent")) == 3


async def test_rejected_call_goes_back_to_the_model_which_retries():
    def script(messages, tools):
        tool_results = [m for m in messages if m.role == "tool"]
        if not tool_results:
            return {"tool_calls": [{"name": "t_weather", "arguments": {"city": 42}}]}
        if len(tool_results) == 1:
            assert tool_results[0].content.startswith("Error: the call to 't_weather' was rejected")
            return {"tool_calls": [{"name": "t_weather", "arguments": {"city": "Oslo"}}]}
        return f"Done: {tool_results[-1].content}"

    with scripted(script) as model:
        result = await run_blocks([agent(model, prompt="Weather?", tools=["t_weather"])])
    output = result.results["agent"]
    assert result.status == "succeeded", result.error
    assert CALLS == [("weather", {"city": "Oslo"})]          # the bad call never ran
    first, second = output["toolCalls"]["list"]
    assert "city: 42 is not of type 'string'" in first["result"]
    assert second["result"] == {"city": "Oslo", "temp": 21}
    assert output["content"] == 'Done: {"city": "Oslo", "temp": 21}'
    statuses_seen = [e["status"] for e in events(result, "tool_called", "agent")]
    assert statuses_seen == ["rejected", "ok"]


async def test_unknown_tool_and_failing_tool_are_results_not_crashes():
    @flowforge.function("t_broken")
    def broken(x: int) -> int:
        raise ValueError("database is down")

    def script(messages, tools):
        if messages[-1].role == "user":
            return {"tool_calls": [{"name": "t_nope", "arguments": {}},
                                   {"name": "t_broken", "arguments": {"x": 1}}]}
        return "ok"

    with scripted(script) as model:
        result = await run_blocks([agent(model, prompt="Go", tools=["t_broken"])])
    found = [c["result"] for c in result.results["agent"]["toolCalls"]["list"]]
    assert found == ["Error: there is no tool named 't_nope'. Available tools: t_broken.",
                     "Error: 't_broken' failed: database is down"]


@pytest.mark.parametrize("obeys, status", [(True, "succeeded"), (False, "failed")])
async def test_required_tools_reask(obeys, status):
    def script(messages, tools):
        last = messages[-1]
        if obeys and last.role == "user" and "without calling 't_weather'" in last.content \
                and "Step 1 of 1" in last.content:
            return {"tool_calls": [{"name": "t_weather", "arguments": {"city": "Rome"}}]}
        if last.role == "tool":
            return "Sunny in Rome."
        return "I think it is sunny."

    with scripted(script) as model:
        result = await run_blocks([agent(model, prompt="Weather in Rome?", tools=["t_weather"],
                                         required_tools=["t_weather"])])
    assert statuses(result) == {"agent": status}
    sent = requests(result, "agent")
    assert sent[1]["tool_choice"] == "t_weather"            # the re-ask forces the tool
    if obeys:
        assert result.results["agent"]["content"] == "Sunny in Rome."
        assert CALLS == [("weather", {"city": "Rome"})]
    else:
        assert len(sent) == 2
        assert ("answered without calling the required tool 't_weather' (it was told 1 "
                "time(s) and still did not call it)") in result.blocks["agent"].error


async def test_required_tool_must_exist():
    with scripted(lambda m, t: "hi") as model:
        result = await run_blocks([agent(model, prompt="x", required_tools=["t_weather"])])
    assert "required_tools names tool(s) the agent does not have: t_weather" in \
        result.blocks["agent"].error


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"},
                                           "confidence": {"type": "number"}},
          "required": ["answer", "confidence"]}


@pytest.mark.parametrize("second, status", [
    ('{"answer": "Yes", "confidence": 0.9}', "succeeded"),
    ('{"answer": "Yes"}', "failed")])
async def test_response_format_spread_and_one_repair(second, status):
    answers = iter(['Sure! ```json\n{"answer": "Yes"}\n```', second])

    with scripted(lambda messages, tools: next(answers)) as model:
        result = await run_blocks([agent(model, prompt="Refund?", response_format=SCHEMA)])
    assert statuses(result) == {"agent": status}
    sent = requests(result, "agent")
    assert sent[0]["response_format"] == SCHEMA
    repair = sent[1]["messages"][-1]["content"]
    assert "'confidence' is a required property" in repair
    if status == "succeeded":
        output = result.results["agent"]
        assert output["answer"] == "Yes" and output["confidence"] == 0.9
        assert output["content"] == second
        assert output["tokens"]["total"] > 0
    else:
        assert "response_format" in result.blocks["agent"].error
        assert "'confidence' is a required property" in result.blocks["agent"].error


async def test_memories_and_windowed_conversation_with_storage(tmp_path):
    seen: list[list[tuple[str, str]]] = []

    def script(messages, tools):
        seen.append([(m.role, m.content) for m in messages])
        return f"answer {len(seen)}"

    storage = storage_from_url(f"sqlite:///{tmp_path / 'memory.db'}")
    with scripted(script) as model:
        block = agent(model, prompt="{{input.q}}", conversation="c1", memory_window=2,
                      memories=[{"role": "user", "content": "earlier"}])
        for question in ("first?", "second?"):
            result = await run_blocks([block], {"q": question},
                                      declare={"q": {"type": "string"}}, storage=storage,
                                      user="ada")
            assert result.status == "succeeded", result.error
    assert seen[0] == [("user", "earlier"), ("user", "first?")]
    # a window of 2 history messages: the static memory drops out, the stored exchange stays
    assert seen[1] == [("user", "first?"), ("assistant", "answer 1"), ("user", "second?")]
    await storage.open()
    try:
        stored = await storage.get_memory("ada", ["conversation:c1"])
    finally:
        await storage.close()
    assert [m["content"] for m in stored["conversation:c1"]] == [
        "first?", "answer 1", "second?", "answer 2"]


async def test_conversation_without_storage_is_kept_in_process():
    seen = []

    def script(messages, tools):
        seen.append(len(messages))
        return "ok"

    with scripted(script) as model:
        for _ in range(2):
            await run_blocks([agent(model, prompt="hello", conversation="in-process-only")],
                             user="bob")
    assert seen == [1, 3]


@pytest.mark.parametrize("stream", [True, False])
async def test_llm_delta_events_when_streaming(stream):
    with scripted(lambda m, t: "Refunds take five business days.") as model:
        result = await run_blocks([agent(model, prompt="How long?", stream=stream)])
    deltas = events(result, "llm_delta", "agent")
    if stream:
        assert "".join(e["text"] for e in deltas) == "Refunds take five business days."
        assert len(deltas) == 5
    else:
        assert deltas == []
    assert requests(result, "agent")[0]["stream"] is stream


async def test_model_choice_block_then_defaults_then_override():
    with scripted(lambda m, t: "from A") as model_a, scripted(lambda m, t: "from B") as model_b:
        blocks = [{"id": "own", "type": "agent", "with": {"prompt": "x", "model": model_a}},
                  {"id": "default", "type": "agent", "with": {"prompt": "x"}}]
        result = await run_blocks(blocks, defaults={"model": model_b, "temperature": 0.3})
        overridden = await run_blocks(blocks, defaults={"model": model_b}, model=model_a)
    assert result.results["own"]["content"] == "from A"
    assert result.results["default"]["content"] == "from B"
    assert requests(result, "default")[0]["temperature"] == 0.3
    assert {k: v["content"] for k, v in overridden.results.items()} == {"own": "from A",
                                                                       "default": "from A"}


async def test_block_used_as_tool_and_tool_context():
    def script(messages, tools):
        if messages[-1].role == "user":
            return {"tool_calls": [{"name": "parse_json",
                                    "arguments": {"text": 'note: {"order": 5}'}}]}
        return messages[-1].content

    with scripted(script) as model:
        result = await run_blocks([agent(model, prompt="Parse", tools=[
            {"block": {"type": "parser", "name": "parse_json",
                       "description": "Extract JSON from text"}}])])
    assert result.status == "succeeded", result.error
    assert result.results["agent"]["toolCalls"]["list"][0]["result"] == {
        "order": 5, "data": {"order": 5}}
    assert requests(result, "agent")[0]["tools"][0]["parameters"]["required"] == ["text"]


async def test_bad_tools_config_is_a_clear_failure():
    with scripted(lambda m, t: "x") as model:
        result = await run_blocks([agent(model, prompt="x", tools=["t_not_registered"])])
    error = result.blocks["agent"].error
    assert "tools[0] (function): no function registered as 't_not_registered'" in error


async def test_tools_see_the_run_context():
    seen = {}

    @flowforge.function("t_context")
    def peek(context: ToolContext) -> str:
        seen.update(block_data=dict(context.block_data), names=dict(context.block_name_mapping),
                    variables=dict(context.variables), run_id=context.run_id,
                    workflow_id=context.workflow_id, block_id=context.block_id,
                    has_path="PATH" in context.env)
        return "seen"

    def script(messages, tools):
        if messages[-1].role == "user":
            return {"tool_calls": [{"name": "t_context", "arguments": {}}]}
        return "ok"

    with scripted(script) as model:
        result = await run_blocks([
            {"id": "facts", "name": "Order Facts", "type": "set", "with": {"total": 12}},
            {"id": "agent", "type": "agent", "after": ["facts"],
             "with": {"prompt": "peek", "model": model, "tools": ["t_context"]}}],
            variables={"company": "Acme"})
    assert result.status == "succeeded", result.error
    assert seen["block_data"] == {"facts": {"total": 12}}
    assert seen["names"]["orderfacts"] == "facts"
    assert seen["variables"] == {"company": "Acme"}
    assert seen["run_id"] == result.run_id and seen["workflow_id"] == "t"
    assert seen["block_id"] == "agent" and seen["has_path"] is True


@flowforge.function("t_reply")
async def reply(text: str) -> str:
    """The answer (a finishing tool)."""
    return text


async def test_a_repeated_call_stays_out_of_the_conversation_and_the_next_step_is_asked_for():
    """A small model repeats its search, then copies the last message into its answer:
    shown the refusal of the repeat, its answer was the engine's own words."""
    repeats = []

    def script(messages, tools):
        last = messages[-1]
        if last.role != "tool":
            return {"tool_calls": [{"name": "t_weather", "arguments": {"city": "Rome"}}]}
        if not repeats:
            repeats.append(True)
            return {"tool_calls": [{"name": "t_weather", "arguments": {"city": "Rome"}}]}
        return {"tool_calls": [{"name": "t_reply", "arguments": {"text": last.content}}]}

    with scripted(script) as model:
        result = await run_blocks([agent(model, prompt="Weather in Rome?",
                                         tools=["t_weather", "t_reply"],
                                         required_tools=["t_weather"], finish_with="t_reply",
                                         refuse_repeated_calls=True)])
    assert statuses(result) == {"agent": "succeeded"}
    assert "already called" not in result.results["agent"]["content"]
    assert '"temp": 21' in result.results["agent"]["content"]
    assert CALLS == [("weather", {"city": "Rome"})]               # run once
    listed = result.results["agent"]["toolCalls"]["list"]
    assert [c["name"] for c in listed] == ["t_weather", "t_weather", "t_reply"]
    assert "already called 't_weather'" in listed[1]["result"]    # the repeat, recorded
    sent = requests(result, "agent")
    assert sent[2]["tool_choice"] == "t_reply"                     # the next step, by name
    assert [m["role"] for m in sent[2]["messages"]] == [m["role"] for m in sent[1]["messages"]]


async def test_a_spent_tool_call_limit_stops_rephrased_calls_and_the_answer_follows():
    """The 0.5B model searched eight times with ever new wording for one fact until
    max_iterations: with `tool_call_limits` its second search is not run, the tool is
    no longer offered, and the next turn asks for the answer by name."""
    cities = iter(["Rome", "Roma", "Rome, Italy", "Rome city"])
    offered: list[list[str]] = []

    def script(messages, tools):
        offered.append([t.name for t in tools])
        if messages[-1].role == "tool" and offered[-1] == ["t_reply"]:
            return {"tool_calls": [{"name": "t_reply", "arguments": {"text": "21 degrees"}}]}
        return {"tool_calls": [{"name": "t_weather", "arguments": {"city": next(cities)}}]}

    with scripted(script) as model:
        result = await run_blocks([agent(model, prompt="Weather in Rome?", max_iterations=4,
                                         tools=["t_weather", "t_reply"], finish_with="t_reply",
                                         tool_call_limits={"t_weather": 1})])
    assert statuses(result) == {"agent": "succeeded"}
    assert result.results["agent"]["content"] == "21 degrees"
    assert CALLS == [("weather", {"city": "Rome"})]               # the first search only
    assert offered[0] == ["t_weather", "t_reply"] and offered[1] == ["t_reply"]
    sent = requests(result, "agent")
    assert [r["tool_choice"] for r in sent] == ["required", "required"]


async def test_a_tool_call_limit_naming_no_tool_is_a_clear_failure():
    with scripted({"rules": [{"match": ".", "reply": "hi"}]}) as model:
        result = await run_blocks([agent(model, prompt="Hi", tools=["t_weather"],
                                         tool_call_limits={"t_wether": 1})])
    assert statuses(result) == {"agent": "failed"}
    error = result.blocks["agent"].error
    assert "tool_call_limits" in error and "t_wether" in error and "t_weather" in error


async def test_answer_after_asks_for_the_answer_right_after_the_search():
    """The 0.5B model went on to another tool (the web search) with the answer in its
    search results; with `answer_after` the turn after the search asks for the answer."""
    def script(messages, tools):
        if messages[-1].role == "tool":
            return {"tool_calls": [{"name": "t_reply", "arguments": {"text": "21 degrees"}}]}
        return {"tool_calls": [{"name": "t_weather", "arguments": {"city": "Rome"}}]}

    with scripted(script) as model:
        result = await run_blocks([agent(model, prompt="Weather in Rome?",
                                         tools=["t_weather", "t_reply"], finish_with="t_reply",
                                         answer_after=["t_weather"])])
    assert result.results["agent"]["content"] == "21 degrees"
    assert [r["tool_choice"] for r in requests(result, "agent")] == ["required", "t_reply"]
    with scripted(script) as model:
        result = await run_blocks([agent(model, prompt="Hi", tools=["t_weather"],
                                         answer_after=["t_weather"])])
    assert "answer_after and answer_text need finish_with" in result.blocks["agent"].error


async def test_answer_text_is_said_in_plain_text_then_given_to_the_answer_tool():
    """Inside the answer tool's JSON the 0.5B model wrote the question back as its
    answer; said in plain text first, its answer was the fact."""
    def script(messages, tools):
        last = messages[-1]
        if last.role == "tool":
            return "It is 21 degrees in Rome."
        if last.role == "user" and last.content.startswith("Now call t_reply"):
            return {"tool_calls": [{"name": "t_reply", "arguments": {"text": "Weather?"}}]}
        return {"tool_calls": [{"name": "t_weather", "arguments": {"city": "Rome"}}]}

    with scripted(script) as model:
        result = await run_blocks([agent(model, prompt="Weather in Rome?",
                                         tools=["t_weather", "t_reply"], finish_with="t_reply",
                                         answer_after=["t_weather"], answer_text="text")])
    assert statuses(result) == {"agent": "succeeded"}
    assert result.results["agent"]["content"] == "It is 21 degrees in Rome."
    sent = requests(result, "agent")
    assert [r["tool_choice"] for r in sent] == ["required", "none", "t_reply"]
    assert [m["role"] for m in sent[2]["messages"][-2:]] == ["assistant", "user"]
