"""Every tool call is checked before it runs.

A model's arguments are untrusted input: they are checked against the tool's
JSON Schema (types, required fields), string lengths are bounded, and a
configurable set of dangerous patterns is refused (path traversal, shell
metacharacters for tools that run commands, prompt-injection markers that
would be echoed into later prompts).  A rejected call is not an exception:
it goes back to the model as the tool's result, saying what was wrong and
how to fix it, so the model can call again.
"""

from __future__ import annotations

from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field, field_validator

from flowforge.tools.spec import Tool
from flowforge.workflow.safe_regex import compile_pattern, validator_for

__all__ = ["ToolValidation", "DEFAULT_PATTERNS", "COMMAND_PATTERNS", "validate_arguments",
           "rejection_message"]

#: Refused in every string argument (name -> regex, case-insensitive).
DEFAULT_PATTERNS: dict[str, str] = {
    "path traversal": r"(?:^|[\\/])\.\.(?:[\\/]|$)|%2e%2e[\\/%]",
    "prompt injection": (
        r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?(?:the\s+|your\s+)?"
        r"(?:previous|prior|above|earlier)\s+(?:instructions|prompts?|rules)"
        r"|<\|im_start\|>|<\|im_end\|>|<\|system\|>|\[/?INST\]|<<SYS>>"
        r"|\byou\s+are\s+now\s+in\s+developer\s+mode"),
}
#: Refused only for tools that run shell commands (`runs_commands`).
COMMAND_PATTERNS: dict[str, str] = {
    "shell metacharacters": r"[;&|`<>\n\r]|\$\(|\$\{",
}


class ToolValidation(BaseModel):
    """How an agent checks tool arguments (the agent's `tool_validation:`)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    max_string_length: int = Field(10_000, ge=1)
    """Longest string accepted in any argument (a schema's own `maxLength` also applies)."""
    patterns: dict[str, str | None] = Field(default_factory=dict)
    """Extra refused patterns by name (regex, case-insensitive); a built-in name
    ('path traversal', 'prompt injection', 'shell metacharacters') mapped to null turns it off."""
    enabled: bool = True
    """False skips every check (schema included): only for trusted tools."""

    @field_validator("patterns")
    @classmethod
    def _linear_time(cls, patterns: dict[str, str | None]) -> dict[str, str | None]:
        for pattern in patterns.values():
            if pattern is not None:
                compile_pattern(pattern, ignore_case=True)   # RegexError names the pattern
        return patterns


def _compiled(pattern: str) -> Any:
    """A refused pattern on RE2 (linear time: the text is a model's, the pattern an author's)."""
    return compile_pattern(pattern, ignore_case=True)


_VALIDATORS: dict[str, Any] = {}


def _validator(schema: dict[str, Any]) -> Any:
    """One compiled validator per distinct schema (tools are rebuilt per run)."""
    key = repr(schema)
    validator = _VALIDATORS.get(key)
    if validator is None:
        if len(_VALIDATORS) > 1024:
            _VALIDATORS.clear()
        validator = _VALIDATORS[key] = validator_for(schema)(schema)   # patterns on RE2
    return validator


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path or "(value)", value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _active_patterns(tool: Tool, policy: ToolValidation) -> dict[str, Any]:
    table = dict(DEFAULT_PATTERNS)
    if tool.runs_commands:
        table.update(COMMAND_PATTERNS)
    for name, pattern in policy.patterns.items():
        if pattern is None:
            table.pop(name, None)
        else:
            table[name] = pattern
    return {name: _compiled(pattern) for name, pattern in table.items()}


def validate_arguments(tool: Tool, arguments: Any,
                       policy: ToolValidation | None = None) -> list[str]:
    """Problems with `arguments` for `tool`; empty when the call may run."""
    policy = policy or ToolValidation()
    if not policy.enabled:
        return []
    if not isinstance(arguments, dict):
        return [f"arguments must be a JSON object, got {type(arguments).__name__}"]
    if "_raw" in arguments and len(arguments) == 1:
        return ["the arguments were not valid JSON; send a JSON object matching the parameters"]
    problems: list[str] = []
    schema = tool.parameters or {"type": "object"}
    for error in sorted(_validator(schema).iter_errors(arguments), key=lambda e: list(e.path)):
        where = ".".join(str(p) for p in error.path) or "(arguments)"
        problems.append(f"{where}: {error.message}")
    limit = tool.max_string_length or policy.max_string_length
    patterns = _active_patterns(tool, policy)
    for where, text in _strings(arguments, ""):
        if len(text) > limit:
            problems.append(f"{where}: string of {len(text)} characters is longer than the "
                            f"limit of {limit}")
            continue
        for name, pattern in patterns.items():
            if pattern.search(text):
                problems.append(f"{where}: contains a refused pattern ({name})")
    return problems


def rejection_message(tool_name: str, problems: list[str], parameters: dict[str, Any]) -> str:
    """The tool result the model gets instead of running a bad call."""
    lines = "\n".join(f"- {problem}" for problem in problems)
    required = parameters.get("required") or []
    props = ", ".join(f"{name} ({spec.get('type', 'any')})"
                      for name, spec in (parameters.get("properties") or {}).items()
                      if isinstance(spec, dict))
    return (f"Error: the call to '{tool_name}' was rejected and did not run.\n{lines}\n"
            f"Fix the arguments and call '{tool_name}' again. Parameters: {props or 'none'}"
            + (f"; required: {', '.join(required)}." if required else "."))

