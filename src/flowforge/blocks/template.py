"""`template`: render a Jinja2 template (Dify's template-transform node, and
prompts written in Jinja2) on Jinja2's sandboxed environment.

    - id: report
      type: template
      with:
        template: |
          {% for item in items %}- {{ item.title }} ({{ item.score }})
          {% endfor %}Total: {{ items | length }}
        variables: {items: "{{search.results}}"}

`variables` are resolved as flowforge templates first (`{{search.results}}`
gives the list itself); the Jinja2 template then sees each by name.  The
template is raw Jinja2 (its `{{ item.title }}` is Jinja's, not a flowforge
reference), rendered by `jinja2.sandbox.ImmutableSandboxedEnvironment`: no
access to Python's internals, no mutation of what it is given.  It is
bounded like every value a run makes: the text, and any single operation in
it (`"x" * 10**9`, `"x"|center(10**9)`), may not pass the run's value limit
(`FLOWFORGE_MAX_VALUE_MB`), and rendering stops after 5 s; either fails the
block saying which limit.  `validate` refuses a template with a syntax
error (with its line) and one that reads a name `variables` does not give.
The output is `{output: <the text>}`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jinja2 import TemplateError
from pydantic import Field

from flowforge.blocks import _jinja
from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError, Problem
from flowforge.workflow.model import BlockSpec

__all__ = ["TemplateConfig", "TemplateBlock"]

#: names a Jinja2 template may read without a variable giving them
_JINJA_GLOBALS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace",
                            "loop", "true", "false", "none", "True", "False", "None"})


class TemplateConfig(BlockConfig):
    template: str
    """The Jinja2 template (raw: its `{{ }}` are Jinja's)."""
    variables: dict[str, Any] = Field(default_factory=dict)
    """What the template sees, by name (flowforge templates allowed in the values)."""


@register_block
class TemplateBlock(BlockType):
    type_name = "template"
    pure = True                  # nothing outside the run sees it run
    Config = TemplateConfig
    raw_fields = frozenset({"template"})
    outputs = {"output": Output("string", "The rendered text.")}

    @classmethod
    def check(cls, spec: BlockSpec, where: str, known_ids: set[str]) -> list[Problem]:
        template = spec.with_.get("template")
        if not isinstance(template, str):
            return []
        problem = _jinja.syntax_problem(template)
        if problem is not None:
            return [Problem(f"{where}.with.template", f"Jinja2 {problem}")]
        given = set(spec.with_.get("variables") or {})
        missing = sorted(_jinja.template_variables(template) - given - _JINJA_GLOBALS)
        if missing:
            return [Problem(f"{where}.with.variables", f"the template reads "
                            f"{', '.join(repr(name) for name in missing)}, which `variables` "
                            f"does not give; add e.g. `{missing[0]}: \"{{{{input."
                            f"{missing[0]}}}}}\"`")]
        return []

    @classmethod
    async def run(cls, context: BlockContext, config: TemplateConfig) -> Any:
        limit = _jinja.value_limit(getattr(context, "services", None))
        try:
            text = await asyncio.to_thread(_jinja.render, config.template, config.variables,
                                           limit=limit)
        except _jinja.TemplateLimit as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        except TemplateError as exc:
            line = getattr(exc, "lineno", None)
            where = f"line {line}: " if line else ""
            raise BlockError(context.block_id, cls.type_name,
                             f"the Jinja2 template failed: {where}{exc}") from None
        except Exception as exc:  # noqa: BLE001 - the template's own error (1/0, a bad filter arg)
            raise BlockError(context.block_id, cls.type_name, f"the Jinja2 template failed: "
                             f"{type(exc).__name__}: {exc}") from None
        return {"output": text}
