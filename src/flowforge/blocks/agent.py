"""`agent`: a model with a system prompt, a user prompt, memories and tools.

    - id: answer
      type: agent
      with:
        system: You are a support assistant. Use the tools; cite the policy.
        prompt: "{{input.query}}"
        model: openai/gpt-4o            # else defaults.model, else the default model;
        fallback: [anthropic/claude-sonnet-4-5]   # --model on the CLI replaces all
        temperature: 0.2
        max_tokens: 800
        conversation: "{{input.session}}"   # stored history, appended after the answer
        memory_window: 20                   # messages of history sent (by count)
        memories: [{role: user, content: ...}, {role: assistant, content: ...}]
        tools:
          - lookup_order                                  # @flowforge.function("lookup_order")
          - {function: refund, description: Issue a refund, runs_commands: false}
          - {block: {type: http, name: fetch_page, with: {method: GET}}}
          - {workflow: escalate.yaml, name: escalate, parameters: {type: object, ...}}
          - {http: {url: "https://api.example.com/orders/{order_id}"}, name: get_order,
             description: Order status by id}
          - {mcp: {command: python, args: [-m, mcp_server_time]}}   # or {url: https://.../mcp}
          - {knowledge_search: {knowledge_base: policies, filters: {category: refunds}}}
        required_tools: [lookup_order]     # answering without them -> told, asked again once
        max_iterations: 10                 # model turns; more -> the block fails
        response_format: {type: object, properties: {answer: {type: string}}, required: [answer]}

The tool loop: each model turn's tool calls are validated (see
`tools.validation`; a rejected call goes back to the model as its result) and
run in parallel; their results are appended and the model is asked again, up
to `max_iterations` turns, then the block fails saying so.  A
`response_format` answer is validated against the schema; an invalid one is
shown to the model with the error once (without tools), then the block fails.

`conversation` history is stored per user under `conversation:<id>` in the
run's storage service when there is one (the CLI and server pass it), else in
this process only.  Every request and response is in the run's events
(`llm_request`, `llm_response`), tool calls as `tool_called`.
"""

from __future__ import annotations

import dataclasses

import time
from contextlib import AsyncExitStack
from datetime import datetime, timezone
from typing import Any

from pydantic import Field

from flowforge.blocks._llm import (USAGE_OUTPUTS, LLMBlockConfig, ModelCalls,
                                   choose_model, setting)
from flowforge.blocks._agent_turns import (call_key, early_finish, finish_output, guided_turn,
                                          last_error, over_limit, reask, record_outcome, repeats,
                                          spend_reask, with_ids, with_refusals)
from flowforge.blocks._memory import append_history, load_history
from flowforge.blocks._toolset import ToolEntry, build_tools, tool_capabilities, tool_context
from flowforge.blocks.base import BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError, ToolError
from flowforge.providers.base import Message
from flowforge.providers.structured import (StructuredAnswerError, ask_structured,
                                            parse_against, repair_message, schema_fields)
from flowforge.tools.mcp_client import close_quietly
from flowforge.tools.executor import ToolOutcome, result_text, run_tool_calls
from flowforge.tools.validation import ToolValidation

__all__ = ["AgentBlock", "AgentConfig", "run_agent"]


class AgentConfig(LLMBlockConfig):
    system: str | None = None
    """System prompt: who the agent is and how it must answer."""
    prompt: str | None = None
    """The user message (templates allowed)."""
    memories: list[dict[str, Any]] | None = None
    """Earlier messages `{role, content}` sent before the prompt."""
    conversation: str | None = None
    """Conversation id: its stored history is sent, and this exchange is appended to it."""
    memory_window: int = Field(20, ge=0)
    """How many messages of `memories` + history are sent (the most recent)."""
    tools: list[str | ToolEntry] = Field(default_factory=list)
    """Tools the model may call (see the module docstring for every kind)."""
    required_tools: list[str] = Field(default_factory=list)
    """Tools the model must call before its answer counts."""
    required_tools_retries: int = Field(1, ge=0)
    """How many times the model is told to call a missing required tool (per tool)."""
    finish_with: str | None = None
    """A tool whose successful call is the answer (the RAG chat's `generate_response`):
    the loop ends there, and the call's arguments and result are the block's output.
    It is required; called before the other required tools it is refused; in the last
    two turns the missing required tools are asked for by name (`tool_choice`). Every
    turn asks for a tool call (`tool_choice: required`): plain text is never the answer."""
    refuse_repeated_calls: bool = False
    """A call identical to one that already succeeded (same tool, same arguments) is
    not run again: the model is told its result is above and what to call next. Stops
    small models' loops; leave off for tools whose answer changes (polling)."""
    tool_call_limits: dict[str, int] = Field(default_factory=dict)
    """Most successful calls a tool may get in one run of the block, e.g.
    `{knowledge_base_search: 1}`: once spent, the tool is no longer offered and a
    further call is refused, so a small model that keeps rephrasing one search
    (the 0.5B model searched eight times for one fact) answers from what it found."""
    answer_after: list[str] = Field(default_factory=list)
    """Tools after whose successful call the next turn asks for `finish_with` by name:
    the RAG chat answers right after its search (two turns), since the 0.5B model went
    on to the web search even with the answer in the results."""
    answer_text: str | None = None
    """With `finish_with`: its argument that holds the answer's text (the RAG chat's
    `answer`). When the answer tool is asked for by name, the answer is first asked for
    in plain text, then the tool is called with that text as this argument: inside the
    tool call's JSON the 0.5B model wrote the question back as its answer."""
    finish_retries: int = Field(1, ge=0)
    """How many more calls of `finish_with` are allowed after a failed one."""
    reask_message: str | None = None
    """The feedback when a required tool was not called; `{missing}`, `{step}`, `{steps}`
    and `{expected}` are filled in (default: a message naming them)."""
    tool_choice: str | None = None
    """`auto` (default), `required`, `none`, or a tool name (first turn only)."""
    max_iterations: int = Field(10, ge=1)
    """Model turns allowed in the tool loop before the block fails."""
    parallel_tool_calls: bool = True
    """Run several calls of one turn concurrently."""
    tool_timeout: float | None = Field(None, gt=0)
    """Seconds one tool call may take (its result then says it timed out)."""
    tool_validation: ToolValidation = Field(default_factory=ToolValidation)
    """How tool arguments are checked before every call."""
    allow_private_network: bool = False
    """Let http and MCP-over-HTTP tools reach loopback/private addresses."""
    response_format: dict[str, Any] | None = None
    """JSON Schema of the answer; its fields become top-level outputs."""
    stream: bool | None = None
    """Stream text as `llm_delta` events (default: `defaults.stream`, else true)."""


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")


def _windowed(messages: list[dict[str, Any]], window: int) -> list[Message]:
    kept = messages[-window:] if window else []
    out = []
    for item in kept:
        if item.get("role") not in ("system", "user", "assistant", "tool"):
            raise ValueError(f"memory message {item!r} needs a role of system, user, assistant "
                             f"or tool")
        out.append(Message.from_dict({"content": None, **item}))
    return out


async def run_agent(context: BlockContext, config: AgentConfig) -> dict[str, Any]:
    block = lambda message: BlockError(context.block_id, context.node.type, message)  # noqa: E731
    started = time.time()
    model = choose_model(context, config.model)
    calls = ModelCalls(context, model,
                       fallback=tuple(setting(context, config.fallback, "fallback", ()) or ()),
                       stream=bool(setting(context, config.stream, "stream", True)),
                       api_key=config.api_key, config=config)
    temperature = setting(context, config.temperature, "temperature")
    max_tokens = setting(context, config.max_tokens, "max_tokens")

    messages: list[Message] = []
    if config.system:
        messages.append(Message("system", config.system))
    history = list(config.memories or [])
    if config.conversation:
        history += await load_history(context, config.conversation)
    try:
        messages += _windowed(history, config.memory_window)
    except ValueError as exc:
        raise block(str(exc)) from None
    if config.prompt:
        messages.append(Message("user", config.prompt))
    if len(messages) == 0 or all(m.role == "system" for m in messages):
        raise block("nothing to ask: set `prompt` (or `memories` / `conversation`)")

    stack = AsyncExitStack()         # MCP connections live until the loop ends
    try:
        try:
            tools = await build_tools(config.tools, context, stack,
                                      allow_private_network=config.allow_private_network)
        except ToolError as exc:
            raise block(str(exc)) from None
        required = list(dict.fromkeys(config.required_tools + ([config.finish_with]
                                                               if config.finish_with else [])))
        unknown = [name for name in required if name not in tools]
        unlimited = [name for name in config.tool_call_limits if name not in tools]
        if (config.answer_after or config.answer_text) and not config.finish_with:
            raise block("answer_after and answer_text need finish_with: the tool whose call "
                        "is the answer")
        unlimited += [name for name in config.answer_after if name not in tools]
        if unlimited:
            raise block(f"tool_call_limits or answer_after names tool(s) the agent does "
                        f"not have: "
                        f"{', '.join(unlimited)} (tools: {', '.join(tools) or 'none'})")
        if unknown:
            field = "finish_with" if unknown == [config.finish_with] else "required_tools"
            raise block(f"{field} names tool(s) the agent does not have: "
                        f"{', '.join(unknown)} (tools: {', '.join(tools) or 'none'})")
        tool_ctx = tool_context(context)
        records: list[dict[str, Any]] = []
        succeeded: set[str] = set()
        tools_time = 0.0
        iterations = 0
        used_ids: set[str] = set()
        reasks = {name: config.required_tools_retries for name in required}
        finish_failures = 0
        finished: ToolOutcome | None = None
        draft: str | None = None                 # the answer said in plain text (answer_text)
        done_calls: set[str] = set()             # name + arguments of calls that succeeded
        ok_counts: dict[str, int] = {}           # successful calls per tool name
        spent = lambda name: ok_counts.get(name, 0) >= config.tool_call_limits.get(  # noqa: E731
            name, float("inf"))
        choice = config.tool_choice if tools else None
        # with a finishing tool, plain text is never the answer: every turn asks for a call
        every_turn = "required" if config.finish_with and tools else None
        while True:
            if iterations >= config.max_iterations:
                raise block(f"the model was still calling tools after max_iterations="
                            f"{config.max_iterations} model turns; raise `max_iterations` or "
                            f"make the task smaller (tools called: "
                            f"{', '.join(r['name'] for r in records) or 'none'})")
            iterations += 1
            if config.finish_with and iterations >= config.max_iterations - 1 and choice is None:
                # the last turns: what is still missing is asked for by name, the answer
                # tool last, so a model that wanders still ends with an answer
                pending = [name for name in required if name not in succeeded]
                choice = pending[0] if pending else None
            # Rebuilt each turn: a tool may narrow its parameters as the conversation
            # goes (the RAG chat's answer tool accepts only the sources found so far).
            specs = [tool.spec() for name, tool in tools.items() if not spent(name)]
            if choice == config.finish_with and config.answer_text and draft is None:
                said = await calls(messages, tools=specs, temperature=temperature,
                                   max_tokens=max_tokens, tool_choice="none",
                                   purpose=f"turn {iterations}: the answer's text")
                draft = said.text.strip() or None
                if draft is not None:
                    messages += [Message("assistant", draft),
                                 Message("user", f"Now call {config.finish_with} with that "
                                                 f"answer.")]
            response = None
            if config.finish_with and choice == config.finish_with and draft is None \
                    and not finish_failures:
                # a small model's answer step in its short form (once: a refused one
                # is retried as the whole call, with the tool's error in view)
                response = await guided_turn(calls, tools[config.finish_with], temperature,
                                             f"turn {iterations}: the answer, guided")
            if response is None:
                response = await calls(messages, tools=specs or None,
                                       response_format=config.response_format,
                                       temperature=temperature, max_tokens=max_tokens,
                                       tool_choice=choice if choice is not None else every_turn,
                                       purpose=f"turn {iterations}")
            choice = None                      # tool_choice applies to one turn only
            if response.tool_calls and tools:
                if draft is not None:           # the answer is the text the model said
                    response.tool_calls = [dataclasses.replace(
                        call, arguments={**call.arguments, config.answer_text: draft})
                        if call.name == config.finish_with else call
                        for call in response.tool_calls]
                messages.append(Message("assistant", response.text or None,
                                        tool_calls=with_ids(response.tool_calls, used_ids)))
                calls_made = messages[-1].tool_calls or []
                early = early_finish(config.finish_with, calls_made, required, succeeded)
                if early is not None:
                    spend_reask(reasks, early, block, config.required_tools_retries, records)
                refused = (repeats(calls_made, done_calls, required, succeeded)
                           if config.refuse_repeated_calls else {})
                refused.update(over_limit(calls_made, spent, config.tool_call_limits, required,
                                           succeeded))
                if early is not None:
                    refused.update({c.id: reask(early, required, config.reask_message)
                                    for c in calls_made if c.name == config.finish_with})
                pending = [name for name in required if name not in succeeded]
                if early is None and pending and len(refused) == len(calls_made):
                    # Only repeats: they stay out of the conversation and the next turn
                    # is asked for the next step by name.  Shown its repeat and the
                    # refusal, the 0.5B model answered with the refusal's own words.
                    messages.pop()
                    now = time.time()
                    for call in calls_made:
                        record_outcome(context, ToolOutcome(call, "rejected", refused[call.id], now,
                                                     now), records, succeeded)
                    choice = pending[0]
                    continue
                tick = time.perf_counter()
                outcomes = await run_tool_calls(
                    tools, [c for c in calls_made if c.id not in refused], tool_ctx,
                    config.tool_validation, config.tool_timeout, config.parallel_tool_calls)
                tools_time += time.perf_counter() - tick
                if refused:
                    outcomes = with_refusals(calls_made, outcomes, refused)
                    pending = [name for name in required if name not in succeeded
                               and name not in {o.call.name for o in outcomes
                                                if o.status == "ok"}]
                    if pending:
                        choice = pending[0]        # steer a looping model to the next step
                for outcome in outcomes:
                    if outcome.status == "ok":
                        done_calls.add(call_key(outcome.call))
                        ok_counts[outcome.call.name] = ok_counts.get(outcome.call.name, 0) + 1
                for outcome in outcomes:
                    record_outcome(context, outcome, records, succeeded)
                    messages.append(Message("tool", result_text(outcome.result),
                                            tool_call_id=outcome.call.id, name=outcome.call.name))
                    if outcome.call.name == config.finish_with and early is None:
                        if outcome.status == "ok":
                            finished = finished or outcome
                        else:
                            finish_failures += 1
                if finished is not None:
                    break
                if finish_failures > config.finish_retries:
                    raise block(f"'{config.finish_with}' failed {finish_failures} time(s); last "
                                f"error: {last_error(outcomes, config.finish_with)}")
                if config.answer_after and all(n in succeeded for n in required
                                               if n != config.finish_with) and any(
                        o.status == "ok" and o.call.name in config.answer_after
                        for o in outcomes):
                    choice = config.finish_with   # answer from what was found, now
                if any(o.call.name == config.finish_with and o.status != "ok"
                       for o in outcomes) and early is None:
                    choice = config.finish_with   # the retry must be the answer tool again
                continue
            missing = [name for name in required if name not in succeeded]
            if missing:
                spend_reask(reasks, missing, block, config.required_tools_retries, records)
                messages.append(Message("assistant", response.text))
                messages.append(Message("user", reask(missing, required,
                                                       config.reask_message)))
                choice = missing[0]
                continue
            break
    finally:
        await close_quietly(stack)

    content = response.text
    parsed: dict[str, Any] = {}
    if finished is not None:
        content, parsed = finish_output(finished)
    elif config.response_format is not None:
        try:
            value = parse_against(config.response_format, content)
        except ValueError as exc:
            messages.append(Message("assistant", content))
            try:
                value, response, _ = await ask_structured(
                    calls, messages + [repair_message(str(exc), config.response_format)],
                    config.response_format, repairs=0, temperature=temperature,
                    max_tokens=max_tokens)
            except StructuredAnswerError as final:
                raise block(f"response_format: {final}") from None
            content = response.text
        parsed = value if isinstance(value, dict) else {"value": value}
    if config.conversation:
        exchange = [{"role": "user", "content": config.prompt}] if config.prompt else []
        await append_history(context, config.conversation,
                             exchange + [{"role": "assistant", "content": content}])
    ended = time.time()
    output: dict[str, Any] = {"content": content}
    output.update(parsed)
    usage = calls.usage()
    output.update({
        "model": usage["model"], "tokens": usage["tokens"], "cost": usage["cost"],
        "toolCalls": {"list": records, "count": len(records)},
        "providerTiming": {"startTime": _iso(started), "endTime": _iso(ended),
                           "duration": round((ended - started) * 1000, 3),
                           "modelTime": round(calls.model_time * 1000, 3),
                           "toolsTime": round(tools_time * 1000, 3),
                           "iterations": iterations}})
    return output


@register_block
class AgentBlock(BlockType):
    """A model with a system prompt, a user prompt, memories and tools."""

    type_name = "agent"
    seed_fields = {"systemPrompt": "system", "userPrompt": "prompt"}
    Config = AgentConfig
    outputs = {
        "content": Output("string", "The answer's text (a structured answer's JSON)."),
        **USAGE_OUTPUTS,
        "toolCalls": Output("{list: [{name, arguments, result, startTime, endTime, "
                            "duration}], count}", "Every tool call, in order, with its "
                            "result and timing."),
        "providerTiming": Output("{startTime, endTime, duration, modelTime, toolsTime, "
                                 "iterations}", "Where the time went (milliseconds) and "
                                 "how many model turns it took."),
    }
    more_outputs = ("With a `response_format` (and no tools), the answer's fields are also "
                    "top-level outputs (`{{answer.answer}}`). Otherwise the output is open: "
                    "with tools, a finishing tool (`finish_with`, the RAG chat's "
                    "`generate_response`) adds its arguments and result, so validation does "
                    "not check the fields read of it.")
    credential_fields = ("tools.*.http.headers.*", "tools.*.mcp.headers.*", "tools.*.mcp.env.*")

    @classmethod
    def output_fields(cls, spec: Any, doc: Any) -> set[str] | None:
        # Only a structured answer without tools is known: a finishing tool
        # (the RAG chat's generate_response) gives the fields of its arguments.
        if spec.with_.get("tools") or spec.with_.get("finish_with"):
            return None
        fields = schema_fields(spec.with_.get("response_format"))
        return None if fields is None else fields | {
            "content", "model", "tokens", "cost", "toolCalls", "providerTiming"}

    @classmethod
    def capabilities(cls, spec: Any) -> list[Any]:
        return tool_capabilities(spec.with_.get("tools"), spec.with_.get("allow_private_network"))

    @classmethod
    async def run(cls, context: BlockContext, config: AgentConfig) -> Any:
        return await run_agent(context, config)
