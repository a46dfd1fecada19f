"""`code`: Python written inline in the document, run in the sandbox.

The shape Dify's code node and Sim's function block use: the source defines
`def main(...) -> dict`; `inputs` are its keyword arguments (templates
resolved); its output is the dict `main` returns.

    - id: shape
      type: code
      with:
        language: python
        source: |
          def main(name: str, count: int) -> dict:
              return {"greeting": f"hello {name}", "double": count * 2}
        inputs: {name: "{{input.name}}", count: 3}
        outputs: {greeting: string, double: number}

It runs exactly as a registry Python block does (`registry_block.run_sandboxed`):
in another process under the OS sandbox (bubblewrap or the confined
subprocess: no files outside its scratch folder, no network, an
unprivileged user), with the same CPU and memory limits (`cpu_seconds`,
`memory_mb`, defaults 2 s and 256 MB) and, on a server, the same isolation
rule and memory budget.  The same source check runs first, at `validate`
time too, so a forbidden name or import is a located problem before any run
(`blocks[2].with.source: line 3: ...`); it only gives early, readable
errors, the OS is the boundary.  The modules the sandbox allows are the only
ones `import` finds (`json`, `re`, `math`, `datetime`, ...).

`language` other than `python` (Dify's `javascript`) is refused by
`validate`: flowforge reports JavaScript, it does not run it.  `outputs`,
when given, names the fields `main` must return with their types (`string`,
`number`, `integer`, `boolean`, `object`, `array`, `array[string]`, ...):
`validate` then checks references to the block against them and the run
checks the returned dict.
"""

from __future__ import annotations

import ast
from typing import Any

from pydantic import Field

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output
from flowforge.blocks.type_table import register_block
from flowforge.blocks.registry_block import BlockRunError, run_sandboxed
from flowforge.errors import BlockError, Problem
from flowforge.sandbox import check_source
from flowforge.workflow.model import BlockSpec

__all__ = ["CodeConfig", "CodeBlock", "source_problems"]

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "number": (int, float), "integer": (int,), "boolean": (bool,),
    "object": (dict,), "array": (list,), "any": (object,)}


class CodeConfig(BlockConfig):
    language: str = "python"
    """Only `python` runs; any other language is refused by `validate`."""
    source: str
    """Python source defining the entry function (`def main(...) -> dict`)."""
    inputs: dict[str, Any] = Field(default_factory=dict)
    """The entry function's keyword arguments, by name (templates allowed)."""
    entry: str = Field("main", pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    """The function the block calls."""
    outputs: dict[str, str] | None = None
    """The fields the function returns and their types (`string`, `number`,
    `integer`, `boolean`, `object`, `array`, `array[string]`, `any`); checked
    by `validate` (references) and by the run (the returned dict)."""
    cpu_seconds: int | None = Field(None, ge=1, le=30)
    """CPU-time limit for one run (default 2, 1 to 30), as for registry blocks."""
    memory_mb: int | None = Field(None, ge=16, le=2048)
    """Memory limit for one run (default 256, 16 to 2048), as for registry blocks."""


def _base(type_name: str) -> str:
    return type_name.split("[", 1)[0].strip().lower()


def source_problems(source: str, entry: str, inputs: Any, where: str) -> list[Problem]:
    """The sandbox's source check, and the entry function against `inputs`,
    each located (`<where>.source: line 3: ...`)."""
    problems = [Problem(f"{where}.source", text)       # the wrapper comes after: same lines
                for text in check_source(_wrapped(source, entry))]
    if problems:
        return problems
    tree = ast.parse(source)
    functions = {node.name: node for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    function = functions.get(entry)
    if function is None:
        return [Problem(f"{where}.source", f"defines no top-level function `{entry}` (write "
                        f"`def {entry}(...) -> dict:`, or name another one with `entry:`)")]
    args = function.args
    if args.vararg or args.posonlyargs:
        return [Problem(f"{where}.source", f"line {function.lineno}: `{entry}` takes its "
                        f"inputs by name: no positional-only or `*args` parameters")]
    names = [arg.arg for arg in args.args + args.kwonlyargs]
    given = set(inputs) if isinstance(inputs, dict) else set()
    optional = {arg.arg for arg in args.args[len(args.args) - len(args.defaults):]} | \
        {arg.arg for arg, default in zip(args.kwonlyargs, args.kw_defaults) if default}
    for name in names:
        if name not in given and name not in optional:
            problems.append(Problem(f"{where}.inputs", f"`{entry}` needs the input '{name}' "
                                    f"(line {function.lineno}); add `{name}: ...` to inputs"))
    if args.kwarg is None:
        for name in sorted(given - set(names)):
            problems.append(Problem(f"{where}.inputs.{name}", f"`{entry}` has no parameter "
                                    f"'{name}' (line {function.lineno}); its parameters: "
                                    f"{', '.join(names) or 'none'}"))
    return problems


def _wrapped(source: str, entry: str) -> str:
    """The sandbox runs `execute(inputs, context)`: call the entry with the
    inputs by name.  Appended, so the author's line numbers stay as written."""
    call = f"await {entry}(**inputs)" if f"async def {entry}" in source else \
        f"{entry}(**inputs)"
    return f"{source.rstrip()}\n\n\nasync def execute(inputs, context):\n" \
           f"    return {{'returned': {call}}}\n"


@register_block
class CodeBlock(BlockType):
    type_name = "code"
    Config = CodeConfig
    raw_fields = frozenset({"source"})            # Python, not a template: `}}` is code
    seed_fields = {"code": "source", "code_language": "language", "variables": "inputs"}
    outputs: dict[str, Output] = {}
    more_outputs = ("The dict the entry function returns; with `outputs:` given, exactly "
                    "those fields (`validate` checks references against them).")

    @classmethod
    def check(cls, spec: BlockSpec, where: str, known_ids: set[str]) -> list[Problem]:
        where = f"{where}.with"
        language = str(spec.with_.get("language", "python")).strip().lower()
        if language not in ("python", "python3"):
            return [Problem(f"{where}.language", f"{spec.with_.get('language')} code is not run "
                            f"by flowforge (only Python is, in the sandbox): rewrite it in "
                            f"Python with `language: python`")]
        problems = []
        for name, type_name in (spec.with_.get("outputs") or {}).items():
            if _base(str(type_name)) not in _TYPES:
                problems.append(Problem(f"{where}.outputs.{name}", f"unknown type "
                                        f"'{type_name}'; use one of {', '.join(_TYPES)} "
                                        f"(or array[<type>])"))
        source = spec.with_.get("source")
        if isinstance(source, str):
            problems += source_problems(source, str(spec.with_.get("entry", "main")),
                                        spec.with_.get("inputs") or {}, where)
        return problems

    @classmethod
    def output_fields(cls, spec: BlockSpec, doc: Any) -> set[str] | None:
        declared = spec.with_.get("outputs")
        return set(declared) if isinstance(declared, dict) else None

    @classmethod
    async def run(cls, context: BlockContext, config: CodeConfig) -> Any:
        if config.language.strip().lower() not in ("python", "python3"):
            raise BlockError(context.block_id, cls.type_name,
                             f"{config.language} code is not run by flowforge")
        try:
            result = await run_sandboxed(_wrapped(config.source, config.entry),
                                         dict(config.inputs), context,
                                         cpu_seconds=config.cpu_seconds,
                                         memory_mb=config.memory_mb)
        except BlockRunError as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        returned = result.output.get("returned")
        if not isinstance(returned, dict):
            raise BlockError(context.block_id, cls.type_name,
                             f"`{config.entry}` must return a dict (the block's output), "
                             f"not {type(returned).__name__}")
        for name, type_name in (config.outputs or {}).items():
            if name not in returned:
                raise BlockError(context.block_id, cls.type_name,
                                 f"`{config.entry}` returned no '{name}' (declared in "
                                 f"outputs); it returned: {', '.join(returned) or 'nothing'}")
            expected = _TYPES.get(_base(type_name), (object,))
            value = returned[name]
            if value is not None and (not isinstance(value, expected) or (
                    isinstance(value, bool) and bool not in expected and object not in expected)):
                raise BlockError(context.block_id, cls.type_name,
                                 f"`{config.entry}` returned '{name}' as "
                                 f"{type(value).__name__}, declared {type_name}")
        return returned
