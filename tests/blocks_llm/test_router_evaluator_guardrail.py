"""Router, evaluator and guardrail, driven by scripted models."""

from __future__ import annotations

import pytest

from .helpers import requests, run_blocks, scripted, statuses

BRANCHES = [
    {"id": "billing", "type": "agent", "name": "Billing Agent", "after": ["route"],
     "description": "Refunds, invoices and payments",
     "with": {"system": "You handle billing questions.", "prompt": "x", "model": "{{vars.m}}"}},
    {"id": "tech", "type": "response", "name": "Tech Support", "after": ["route"],
     "description": "Bugs and outages", "with": {"message": "tech"}},
    {"id": "fallback", "type": "response", "with": {"message": "router failed"}},
]


def router(model, **with_):
    return {"id": "route", "type": "router", "on_error": "fallback",
            "with": {"prompt": "Customer says: {{input.q}}", "model": model, **with_}}


async def _route(script, q="I want my money back"):
    with scripted(script) as model:
        return await run_blocks([router(model), *BRANCHES], {"q": q},
                                declare={"q": {"type": "string"}}, variables={"m": model})


@pytest.mark.parametrize("answer", ['{"route": "billing"}', "billing", "Billing Agent",
                                    "The best destination is `billing`."])
async def test_router_chooses_and_skips_the_other_branch(answer):
    def script(messages, tools):
        if "routing agent" in (messages[0].content or ""):
            return answer
        return "Refund issued."

    result = await _route(script)
    assert statuses(result) == {"route": "succeeded", "billing": "succeeded",
                                "tech": "skipped", "fallback": "skipped"}
    output = result.results["route"]
    assert output["selectedPath"] == {"blockId": "billing", "blockType": "agent",
                                      "blockTitle": "Billing Agent"}
    assert output["selectedRoute"] == "billing"
    assert output["prompt"] == "Customer says: I want my money back"
    assert set(output) >= {"model", "tokens", "cost"}
    sent = requests(result, "route")[0]
    assert sent["temperature"] == 0.0
    assert sent["response_format"]["properties"]["route"]["enum"] == ["billing", "tech"]
    system = sent["messages"][0]["content"]
    for text in ("ID: billing", "Type: agent", "Title: Billing Agent",
                 "Description: Refunds, invoices and payments",
                 "System Prompt: You handle billing questions.", "ID: tech",
                 "Description: Bugs and outages", "Configuration: {\"message\": \"tech\"}"):
        assert text in system
    assert "fallback" not in system.split("Routing instructions")[0]   # on_error is no route


async def test_router_retries_once_with_the_error_then_succeeds():
    answers = iter(["banana", '{"route": "tech"}'])
    result = await _route(lambda m, t: next(answers))
    assert result.results["route"]["selectedRoute"] == "tech"
    repair = requests(result, "route")[1]["messages"][-1]["content"]
    assert "names none of the candidate blocks; answer with exactly one of: billing, tech" in repair
    assert statuses(result)["billing"] == "skipped"


async def test_router_fails_after_the_retry():
    result = await _route(lambda m, t: "banana")
    assert statuses(result) == {"route": "failed", "billing": "skipped", "tech": "skipped",
                                "fallback": "succeeded"}
    assert "invalid after 1 repair attempt(s)" in result.blocks["route"].error
    assert len(requests(result, "route")) == 2


async def test_router_without_candidates_fails_clearly():
    with scripted(lambda m, t: "x") as model:
        result = await run_blocks([{"id": "route", "type": "router",
                                    "with": {"prompt": "p", "model": model}}])
    assert "a router needs outgoing blocks" in result.blocks["route"].error


METRICS = [{"name": "Accuracy", "description": "Correct per the policy", "range": [0, 10]},
           {"name": "Response Time", "description": "Fast enough", "range": [1, 5]}]


@pytest.mark.parametrize("second, status", [('{"accuracy": 8, "response_time": 3}', "succeeded"),
                                            ('{"accuracy": 11, "response_time": 3}', "failed")])
async def test_evaluator_schema_scores_and_range_repair(second, status):
    answers = iter(['{"accuracy": 14, "response_time": 3}', second])
    with scripted(lambda m, t: next(answers)) as model:
        result = await run_blocks([{"id": "grade", "type": "evaluator", "with": {
            "content": "Refunds within 30 days.", "metrics": METRICS, "model": model}}])
    assert statuses(result) == {"grade": status}
    sent = requests(result, "grade")
    assert sent[0]["temperature"] == 0.1
    assert sent[0]["response_format"] == {
        "type": "object", "additionalProperties": False, "required": ["accuracy", "response_time"],
        "properties": {
            "accuracy": {"type": "number", "minimum": 0, "maximum": 10,
                         "description": "Correct per the policy (score from 0 to 10)"},
            "response_time": {"type": "number", "minimum": 1, "maximum": 5,
                              "description": "Fast enough (score from 1 to 5)"}}}
    assert "Refunds within 30 days." in sent[0]["messages"][0]["content"]
    assert "accuracy: 14 is greater than the maximum of 10" in sent[1]["messages"][-1]["content"]
    if status == "succeeded":
        output = result.results["grade"]
        assert output["accuracy"] == 8 and output["response_time"] == 3
        assert output["evaluation"] == second                  # the model's own JSON
        assert output["content"] == "Refunds within 30 days."  # what was evaluated (issue 15)
        assert output["tokens"]["total"] > 0 and output["cost"]["total"] == 0
    else:
        assert "accuracy: 11 is greater than the maximum of 10" in result.blocks["grade"].error


async def test_evaluator_metric_names_are_checked_when_loading():
    import flowforge

    with pytest.raises(flowforge.ValidationFailed, match="two metrics have the key 'accuracy'"):
        flowforge.load({"id": "t", "blocks": [{"id": "g", "type": "evaluator", "with": {
            "content": "x", "metrics": [{"name": "Accuracy"}, {"name": "accuracy"}]}}]})


def _guardrail(model, **with_):
    return {"id": "check", "type": "guardrail", "on_error": "flagged",
            "with": {"content": "Refunds take 5 business days.", "model": model,
                     "context": [{"content": "Refunds are processed within 5 business days."}],
                     **with_}}


FLAGGED = {"id": "flagged", "type": "response", "with": {"message": "flagged"}}
SEND = {"id": "send", "type": "response", "with": {"message": "{{check.reasoning}}"}}


@pytest.mark.parametrize("score, expected", [
    (8, {"check": "succeeded", "send": "succeeded", "flagged": "skipped"}),
    (3, {"check": "succeeded", "send": "succeeded", "flagged": "skipped"}),   # threshold 3 passes
    (1, {"check": "failed", "send": "skipped", "flagged": "succeeded"}),
])
async def test_guardrail_pass_and_fail_route_through_on_error(score, expected):
    reply = f'{{"score": {score}, "reasoning": "compared with the policy"}}'
    with scripted(lambda m, t: reply) as model:
        result = await run_blocks([_guardrail(model, fail_on_reject=True), SEND, FLAGGED])
    assert statuses(result) == expected
    sent = requests(result, "check")[0]
    assert "Refunds are processed within 5 business days." in sent["messages"][0]["content"]
    assert sent["response_format"]["required"] == ["score", "reasoning"]
    if score >= 3:
        output = result.results["check"]
        assert output["passed"] is True and output["score"] == score
        assert output["reasoning"] == "compared with the policy" and output["threshold"] == 3
    else:
        assert result.blocks["check"].error == (
            "hallucination check failed: score 1 is below the threshold 3: "
            "compared with the policy")


async def test_by_default_a_failed_check_is_passed_false_and_a_condition_routes():
    """The seed's documents branch on `passed: false`: a low score is an
    answer, not a failure, unless `fail_on_reject: true`."""
    with scripted(lambda m, t: '{"score": 2, "reasoning": "not in the context"}') as model:
        result = await run_blocks([
            _guardrail(model, threshold=5),
            {"id": "gate", "type": "condition",
             "with": {"cases": [{"when": "check.passed", "goto": "send"}], "default": "flagged"}},
            # `flagged` handles a failure of `check` or is the condition's choice: a join
            {**SEND, "after": ["gate"]}, {**FLAGGED, "after": {"any": ["check", "gate"]}}])
    assert result.results["check"]["passed"] is False
    assert statuses(result)["flagged"] == "succeeded" and statuses(result)["send"] == "skipped"


def test_guardrail_needs_a_reference_when_loading():
    import flowforge

    with pytest.raises(flowforge.ValidationFailed, match="give the reference: `context`"):
        flowforge.load({"id": "t", "blocks": [{"id": "check", "type": "guardrail",
                                               "with": {"content": "x"}}]})


SEMANTIC_ROUTES = {"billing": {"examples": ["I want my money back", "I was charged twice"]},
                   "tech": {"description": "Bugs, crashes, error messages and outages"}}


@pytest.mark.parametrize("strategy, margin, asks", [("semantic", 0.05, False),
                                                    ("hybrid", 0.0, False),
                                                    ("hybrid", 2.0, True)])
async def test_semantic_and_hybrid_routing(strategy, margin, asks):
    def script(messages, tools):
        if "routing agent" in (messages[0].content or ""):
            return '{"route": "billing"}'
        return "Refund issued."

    with scripted(script) as model:
        result = await run_blocks(
            [router(model, strategy=strategy, margin=margin, routes=SEMANTIC_ROUTES,
                    input="{{input.q}}"), *BRANCHES],
            {"q": "Please refund my order, the charge was wrong"},
            declare={"q": {"type": "string"}}, variables={"m": model})
    output = result.results["route"]
    assert output["selectedRoute"] == "billing"
    assert statuses(result)["tech"] == "skipped"
    assert set(output["scores"]) == {"billing", "tech"}
    assert output["scores"]["billing"] > output["scores"]["tech"]
    routed = requests(result, "route")
    assert len(routed) == (1 if asks else 0)
    if asks:   # only the candidates within the margin are offered to the model
        assert routed[0]["response_format"]["properties"]["route"]["enum"] == ["billing", "tech"]
    else:
        assert output["tokens"]["total"] == 0


async def test_router_targets_carry_their_current_state():
    """Each target in the output has `currentState`: its output when the
    router decides (Sim's blockData), else null; a state is shown to the model."""
    def script(messages, tools):
        if "routing agent" in (messages[0].content or ""):
            return '{"route": "tech"}'
        return "Refund issued."

    result = await _route(script)
    targets = result.results["route"]["targets"]
    assert [(t["id"], t["type"], t["title"], t["currentState"]) for t in targets] == [
        ("billing", "agent", "Billing Agent", None), ("tech", "response", "Tech Support", None)]
    assert targets[1]["description"] == "Bugs and outages"

    import flowforge
    from flowforge.blocks.registry_block import DetachedContext
    from flowforge.blocks.router import RouterBlock, RouterConfig

    with scripted(script) as model:
        graph = flowforge.load({"id": "t", "blocks": [router(model), *BRANCHES],
                                "variables": {"m": model}}).graph

        class Deciding(DetachedContext):
            def block_data(self):
                return {"route": {}, "tech": {"content": "Outage fixed at 10:02"}}

            def successors(self):
                return [graph.nodes[d] for d in graph.nodes["route"].dependants]

        seen = []
        context = Deciding(model=model, block_id="route", node=graph.nodes["route"],
                           on_event=seen.append)
        routed = await RouterBlock.run(context, RouterConfig(prompt="Customer: it crashed",
                                                             model=model))
    states = {t["id"]: t["currentState"] for t in routed.output["targets"]}
    assert states == {"billing": None, "tech": {"content": "Outage fixed at 10:02"}}
    assert routed.targets == ("tech",)
    system = next(e for e in seen if e["type"] == "llm_request")["request"]["messages"][0]
    assert 'Current State: {"content": "Outage fixed at 10:02"}' in system["content"]
    assert system["content"].count("Current State") == 1


@pytest.mark.parametrize("content", [{"order": 42, "items": ["tent"]},
                                     '{"order": 42, "items": ["tent"]}'],
                         ids=["object", "json-text"])
async def test_the_evaluator_shows_json_text_pretty_printed_like_an_object(content):
    with scripted(lambda m, t: '{"accuracy": 7}') as model:
        result = await run_blocks([{"id": "grade", "type": "evaluator", "with": {
            "content": content, "model": model, "metrics": [{"name": "accuracy"}]}}])
    shown = '{\n  "order": 42,\n  "items": [\n    "tent"\n  ]\n}'
    assert result.results["grade"]["content"] == shown
    assert shown in requests(result, "grade")[0]["messages"][0]["content"]


async def test_a_router_in_a_loop_sees_what_its_branches_gave_the_pass_before():
    """`targets[].currentState` is the candidate's output as Sim's executor keeps
    it: null before it ever ran, then what it gave in the pass before."""
    seen_prompts: list[str] = []

    def pick(messages, tools):
        seen_prompts.append(messages[0].content)
        return '{"route": "small"}'
    with scripted(pick) as model:
        result = await run_blocks([{"id": "again", "type": "loop", "with": {"times": 2},
                                    "blocks": [
            {"id": "pick", "type": "router", "with": {"prompt": "small or big?",
                                                      "model": model}},
            {"id": "small", "type": "set", "after": ["pick"],
             "with": {"size": "small", "pass": "{{loop.index}}"}},
            {"id": "big", "type": "set", "after": ["pick"], "with": {"size": "big"}}]}])
    assert result.status == "succeeded", result.error
    targets = {t["id"]: t["currentState"] for t in result.results["again"]["pick"]["targets"]}
    assert targets == {"small": {"size": "small", "pass": 0}, "big": None}
    assert '"pass": 0' in seen_prompts[1] and '"pass": 0' not in seen_prompts[0]
