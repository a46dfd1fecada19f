"""A registry block's definition: what it does, when to use it, its typed
inputs and outputs, and its body (Python source or an LLM prompt template).

The fields are the seed's (AgentFlow's) so existing block files load as
they are.  `check_definition` goes beyond the model's types: the schemas
must be valid JSON Schemas of objects, Python source must define
`async def execute(inputs, context)` and pass the sandbox's source check, a
prompt template's `{placeholders}` must name declared inputs, and every
example must fit the schemas.  Each problem is located, so a person (or the
thinker's model) can fix it from the message alone.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from flowforge.errors import Problem
from flowforge.hints import did_you_mean
from flowforge.workflow.safe_regex import pattern_problems
from flowforge.workflow.schema_check import schema_problems

__all__ = ["BlockDefinition", "Example", "BlockMetadata", "check_definition",
           "definition_from_data", "schema_problems", "template_fields",
           "CATEGORIES", "EXECUTION_TYPES"]

CATEGORIES = ("input", "process", "action", "memory", "trigger")
EXECUTION_TYPES = ("python", "llm")
_ID = r"^[a-z][a-z0-9_]{1,63}$"


class Example(BaseModel):
    """One run the block must reproduce: the test suite and the thinker run these."""

    model_config = ConfigDict(extra="forbid")

    inputs: dict[str, Any]
    outputs: dict[str, Any] = Field(default_factory=dict)
    """Expected output fields (a subset is enough). For LLM blocks only the
    keys and types are checked: wording varies from model to model."""


class BlockMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    @field_validator("tier", mode="before")
    @classmethod
    def _tier_as_text(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        return value

    created_by: str = "user"
    """`library` (bundled), `user`, or `thinker` (written and tested by the build path)."""
    tier: str = "community"
    """`core` for the bundled library, else `community`; a number (the seed's
    `tier: 2`) is kept as its text."""
    network: bool = False
    """Python blocks only: may call `httpx` (through the parent's SSRF guard)."""
    cpu_seconds: int | None = Field(None, ge=1, le=30)
    """Python blocks only: CPU-time limit for one run (default 2, 1 to 30)."""
    memory_mb: int | None = Field(None, ge=16, le=2048)
    """Python blocks only: memory limit for one run (default 256, 16 to 2048)."""


class BlockDefinition(BaseModel):
    """A block in the registry."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=_ID)
    """Stable id, snake_case: workflows say `uses: <id>`."""
    name: str
    description: str
    """What it does, in one or two sentences (searched)."""
    category: Literal["input", "process", "action", "memory", "trigger"] = "process"
    execution_type: Literal["python", "llm"]
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object",
                                                                  "properties": {}})
    output_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object",
                                                                   "properties": {}})
    prompt_template: str | None = None
    """LLM blocks: the prompt, with `{input_name}` placeholders."""
    system_prompt: str | None = None
    """LLM blocks: optional system message."""
    source_code: str | None = None
    """Python blocks: `async def execute(inputs, context) -> dict`."""
    use_when: str = ""
    """When a planner should pick this block (searched)."""
    tags: list[str] = Field(default_factory=list)
    examples: list[Example] = Field(default_factory=list)
    metadata: BlockMetadata = Field(default_factory=BlockMetadata)
    version: int | None = None
    """Set by the registry when stored; ignored on input."""

    def search_text(self) -> str:
        """What search indexes: description, use_when and tags, never the schemas."""
        return " ".join([self.description, self.use_when, " ".join(self.tags)]).strip()

    def public(self) -> dict[str, Any]:
        """The definition as JSON, without the body (listings, the planner's view)."""
        data = self.model_dump(exclude={"source_code", "prompt_template", "system_prompt"})
        return data


#: `{name}` or `{name.path}`: the same rule as the `llm` block (blocks/llm.py),
#: so other braces (JSON examples in a prompt) are left alone.
_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")


def template_fields(template: str) -> list[str]:
    """The inputs a prompt template's `{placeholders}` read, once each."""
    return list(dict.fromkeys(m.split(".")[0] for m in _PLACEHOLDER_RE.findall(template)))


def _check_schema(schema: dict[str, Any], where: str) -> list[Problem]:
    import jsonschema    # here, not at the top: loading the block types need not pay for it

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return [Problem(where, f"not a valid JSON Schema: {exc.message}")]
    linear = pattern_problems(schema, where)        # patterns run on RE2
    if linear:
        return linear
    if schema.get("type") != "object":
        return [Problem(f"{where}.type", "must be 'object' (a block takes and returns a dict)")]
    return []


def definition_from_data(data: dict[str, Any], where: str = "") -> BlockDefinition:
    """Parse and fully check a definition; raises ValidationFailed listing
    every problem."""
    from flowforge.errors import ValidationFailed

    try:
        definition = BlockDefinition.model_validate(data)
    except ValidationError as exc:
        problems = [Problem(".".join(str(p) for p in error["loc"]) or where, error["msg"])
                    for error in exc.errors()]
        raise ValidationFailed(problems, source=where or None) from None
    problems = check_definition(definition)
    if problems:
        raise ValidationFailed(problems, source=where or None)
    return definition


def check_definition(definition: BlockDefinition) -> list[Problem]:
    """Problems beyond field types (schemas, body, examples)."""
    from flowforge.sandbox import check_source

    problems = _check_schema(definition.input_schema, "input_schema")
    problems += _check_schema(definition.output_schema, "output_schema")
    declared = set((definition.input_schema.get("properties") or {}))
    if definition.execution_type == "python":
        if not definition.source_code:
            problems.append(Problem("source_code", "a python block needs `source_code` "
                                    "defining `async def execute(inputs, context) -> dict`"))
        else:
            problems += [Problem("source_code", p) for p in check_source(definition.source_code)]
        if definition.prompt_template:
            problems.append(Problem("prompt_template", "only llm blocks have a prompt template"))
    else:
        if not definition.prompt_template:
            problems.append(Problem("prompt_template", "an llm block needs a `prompt_template` "
                                    "with `{input}` placeholders"))
        # The system prompt is filled from the inputs too (blocks/registry_block.py):
        # a placeholder no input fills would fail every run of the block.
        for field in ("prompt_template", "system_prompt"):
            for name in template_fields(getattr(definition, field) or ""):
                if name not in declared:
                    problems.append(Problem(field, f"placeholder '{{{name}}}' is "
                                            f"not an input{did_you_mean(name, declared)}; "
                                            f"declared inputs: "
                                            f"{', '.join(sorted(declared)) or 'none'}"))
        if definition.source_code:
            problems.append(Problem("source_code", "only python blocks have source code"))
    if not problems:
        for index, example in enumerate(definition.examples):
            for problem in schema_problems(definition.input_schema, example.inputs):
                problems.append(Problem(f"examples[{index}].inputs", problem))
    return problems
