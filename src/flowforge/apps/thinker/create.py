"""Create: the model writes each missing block; only blocks that pass their
own examples are saved.

Python source must pass the definition checks (compiles, defines
`async def execute`, imports only whitelisted modules) and reproduce every
example in the sandbox; an LLM block must fill its template and its answer
must validate against the output schema.  A first attempt and up to three
retries (MAX_RETRIES), each retry told the previous attempt's exact error
and answer.  The schemas come from the
plan, so what the wiring expects is what gets built.

A local model writes under `grammar_for(need)`: the source starts with
`async def execute(inputs, context):` after imports of allowed modules only,
the template reads a declared input, and each example's inputs and outputs
are the block's own schemas (issue 47: the 0.5B model wrote `def
convert_temperature(old): ...` four times over and the build failed).
"""

from __future__ import annotations

import json
import re
from typing import Any

from flowforge.blocks.registry_block import run_examples
from flowforge.errors import ValidationFailed
from flowforge.registry import BlockDefinition, Registry, definition_from_data
from flowforge.sandbox import ALLOWED_MODULES
from flowforge.apps.thinker.decompose import RequiredBlock
from flowforge.apps.thinker.events import BuildEvents
from flowforge.apps.thinker.llm import ThinkerError, ThinkerLLM

__all__ = ["create_block", "grammar_for", "MAX_ATTEMPTS", "MAX_RETRIES", "PREVIOUS_FAILED",
           "EXECUTE"]

#: Retries after the first attempt ("up to 3 retries"): four attempts in all.
MAX_RETRIES = 3
MAX_ATTEMPTS = 1 + MAX_RETRIES
#: Start of the feedback an attempt after a failure gets (scripted models match on it).
PREVIOUS_FAILED = "Your previous attempt failed"

_EXAMPLES = {"type": "array", "minItems": 1, "maxItems": 4,
             "items": {"type": "object", "properties": {"inputs": {"type": "object"},
                                                        "outputs": {"type": "object"}},
                       "required": ["inputs", "outputs"]}}
PYTHON_SCHEMA = {"type": "object",
                 "properties": {"name": {"type": "string"}, "source_code": {"type": "string"},
                                "use_when": {"type": "string"},
                                "tags": {"type": "array", "items": {"type": "string"}},
                                "examples": _EXAMPLES},
                 "required": ["source_code", "examples"]}
LLM_SCHEMA = {"type": "object",
              "properties": {"name": {"type": "string"}, "prompt_template": {"type": "string"},
                             "system_prompt": {"type": "string"},
                             "use_when": {"type": "string"},
                             "tags": {"type": "array", "items": {"type": "string"}},
                             "examples": _EXAMPLES},
              "required": ["prompt_template", "examples"]}

#: How a Python block's source starts under a local grammar (after its imports).
EXECUTE = "async def execute(inputs, context):\n    "

# A local grammar's `pattern` is matched against the JSON text of the string
# (llama.cpp's converter puts it between the quotes as it is), so it speaks of
# escapes: one character of a JSON string, and a newline written as `\n`.
_JSON_CHAR = r'([^"\\\x00-\x1F\x7F]|\\["\\/bfnrt])'
_NEWLINE = r"\\n"


def _source_pattern() -> str:
    """Up to three imports of allowed modules, then `async def execute(inputs, context):`."""
    # `[.]`, not `\\.`: a backslash before a dot is no escape in a llama.cpp grammar
    modules = "|".join(m.replace(".", "[.]") for m in sorted(ALLOWED_MODULES))
    head = EXECUTE.split("\n")[0].replace("(", "\\(").replace(")", "\\)")
    # at most three: the 0.5B model imported every module the system prompt lists
    return (f"^(import ({modules}){_NEWLINE}){{0,3}}{head}{_NEWLINE}    {_JSON_CHAR}*$")


def grammar_for(need: RequiredBlock) -> dict[str, Any]:
    """The schema a local model writes `need` under: what `create_block` would
    accept and no more (no optional fields: a small model filled `use_when` with
    the system prompt, 150 tokens an attempt)."""
    examples = {"type": "array", "minItems": 1, "maxItems": 2,
                "items": {"type": "object", "properties": {
                    "inputs": _required_all(need.input_schema),
                    "outputs": _required_all(need.output_schema)},
                    "required": ["inputs", "outputs"]}}
    if need.execution_type == "python":
        return {"type": "object", "properties": {
            "source_code": {"type": "string", "pattern": _source_pattern()},
            "examples": examples}, "required": ["source_code", "examples"]}
    names = "|".join(n for n in need.input_schema.get("properties") or {}
                     if re.fullmatch(r"[A-Za-z0-9_]+", n))
    # braces only around a declared input: `{label}` failed the template's check
    # at every attempt
    free = _JSON_CHAR.replace("\\x7F]", "\\x7F{}]")
    piece = f"({free}|\\{{({names})\\}})"
    template = {"type": "string", "pattern": f"^{free}*$"} if not names else \
        {"type": "string", "pattern": f"^{piece}*\\{{({names})\\}}{piece}*$"}
    return {"type": "object", "properties": {"prompt_template": template,
                                             "examples": examples},
            "required": ["prompt_template", "examples"]}


def _required_all(schema: dict[str, Any]) -> dict[str, Any]:
    """An example gives every declared field (the grammar writes each, in order)."""
    properties = schema.get("properties") or {}
    return {"type": "object", "properties": properties, "required": list(properties)}


PYTHON_SYSTEM = f"""You write flowforge Python blocks. The block is untrusted code run in a \
sandbox: define exactly `async def execute(inputs, context) -> dict`, read the inputs from the \
`inputs` dict and return a dict matching the output schema. Allowed imports only: \
{", ".join(sorted(ALLOWED_MODULES))}. No files, no os/sys, no names starting with "_". Give \
1-3 examples whose outputs are exactly what your code returns. Answer with JSON only: \
{{"source_code", "examples": [{{"inputs", "outputs"}}], "use_when", "tags"}}."""

LLM_SYSTEM = """You write flowforge LLM blocks: a prompt template whose {input_name} \
placeholders are filled from the block's inputs (use only declared inputs; write other braces \
freely), an optional system prompt, and 1-2 examples (inputs and a plausible output that \
matches the output schema). The model answering the template is told the output schema. \
Answer with JSON only: {"prompt_template", "system_prompt", "examples", "use_when", "tags"}."""


def _brief(need: RequiredBlock) -> str:
    return (f"Block name: {need.name}\nWhat it does: {need.description}\n"
            f"Input schema: {json.dumps(need.input_schema)}\n"
            f"Output schema: {json.dumps(need.output_schema)}")


def _definition_data(need: RequiredBlock, answer: dict[str, Any],
                     owner: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": need.name, "name": answer.get("name") or need.name.replace("_", " ").capitalize(),
        "description": need.description, "category": need.category,
        "execution_type": need.execution_type, "input_schema": need.input_schema,
        "output_schema": need.output_schema,
        "use_when": answer.get("use_when") or need.use_when,
        "tags": [str(t) for t in answer.get("tags") or []],
        "examples": answer.get("examples") or [],
        "metadata": {"created_by": "thinker", "tier": "community",
                     **({"owner": owner} if owner else {})},
    }
    if need.execution_type == "python":
        data["source_code"] = answer.get("source_code")
    else:
        data["prompt_template"] = answer.get("prompt_template")
        data["system_prompt"] = answer.get("system_prompt") or None
    return data


def _forward(events: BuildEvents, name: str, event: dict[str, Any]) -> None:
    """An LLM block's test call, shown like the thinker's own calls."""
    if event["type"] == "llm_request":
        request = event.get("request") or {}
        messages = request.get("messages", [])
        events.emit("llm_prompt", stage="test", block=name, model=event.get("model"),
                    prompts=messages, messages=messages,
                    response_format=request.get("response_format"))
    elif event["type"] == "llm_response":
        response = event.get("response") or {}
        elapsed = response.get("duration_ms")
        events.emit("llm_response", stage="test", block=name, model=event.get("model"),
                    response=response.get("text"), text=response.get("text"),
                    elapsed=round(elapsed / 1000, 3) if isinstance(elapsed, (int, float))
                    else None, error=event.get("error"))


async def create_block(need: RequiredBlock, llm: ThinkerLLM, events: BuildEvents,
                       registry: Registry, *, owner: str | None = None
                       ) -> BlockDefinition | None:
    """Write, test and save one block (`owner`'s; None: a shared block); None
    after MAX_ATTEMPTS failures."""
    python = need.execution_type == "python"
    system, schema = (PYTHON_SYSTEM, PYTHON_SCHEMA) if python else (LLM_SYSTEM, LLM_SCHEMA)
    error, previous = "", ""
    def failed(attempt: int, error: str, **extra: Any) -> None:
        events.emit("block_test_failed", block_id=need.name, suggested_id=need.name,
                    name=need.name, attempt=attempt, error=error,
                    retry=attempt < MAX_ATTEMPTS, **extra)

    for attempt in range(1, MAX_ATTEMPTS + 1):
        events.emit("creating_block", suggested_id=need.name, name=need.name,
                    description=need.description, execution_type=need.execution_type,
                    attempt=attempt)
        user = _brief(need)
        if error:
            user += (f"\n\n{PREVIOUS_FAILED}: {error}\nYour previous answer was:\n{previous}\n"
                     f"Fix the problem and answer again.")
        try:
            answer = await llm.ask("create", system, user, schema, repairs=0,
                                   grammar=grammar_for(need),
                                   temperature=llm.retry_temperature(attempt))
        except ThinkerError as exc:
            error, previous = str(exc), ""
            failed(attempt, error)
            continue
        previous = json.dumps(answer, ensure_ascii=False)[:6000]
        try:
            definition = definition_from_data(_definition_data(need, answer, owner),
                                              need.name)
        except ValidationFailed as exc:
            error = "; ".join(str(p) for p in exc.problems)
            failed(attempt, error)
            continue
        report = await run_examples(definition, model=llm.model, env=llm.env,
                                    on_event=lambda event: _forward(events, need.name, event))
        if not report.passed:
            error = report.first_error
            failed(attempt, error, results=report.results)
            continue
        saved = await registry.add(definition, created_by="thinker")
        events.emit("block_test_passed", block_id=saved.id, suggested_id=need.name,
                    name=need.name, attempt=attempt, results=report.results)
        block = saved.model_dump(mode="json")
        events.emit("block_created", block_id=saved.id, suggested_id=need.name,
                    version=saved.version, execution_type=saved.execution_type,
                    attempts=attempt, block=block, definition=block)
        return saved
    events.emit("block_create_failed", block_id=need.name, suggested_id=need.name,
                name=need.name, attempts=MAX_ATTEMPTS, error=error,
                message=f"the block failed its tests {MAX_ATTEMPTS} times (a first attempt "
                        f"and {MAX_RETRIES} retries); it was not saved")
    return None
