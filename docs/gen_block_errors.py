"""The errors each block type can raise, read from its code, for the manual.

A block module (and the private helper modules it imports: `blocks._llm`,
`blocks._toolset`, ...) is parsed, and every `raise` that builds an error is
listed with its kind (the class), the message as the code writes it (a
formatted value shown as `…`; a caught error's own message named as such)
and the line.  A `raise` through a helper that builds the error (`raise
too_many(...)`, agent's `raise block(...)`) is followed to the class it
returns.  Signals (`Suspend`) and re-raises are not errors, and are left
out.

What `on_error` sees is the scheduler's rule (engine/guard.py,
`message_of`): the handler reads `{{<block id>.error}}`, the message of a
`BlockError` without its "block 'x' (type):" prefix, the text of any other
flowforge error, and `ValueError: <text>` for an error outside flowforge's
tree.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["Raised", "block_errors", "errors_section", "COMMON", "SIGNALS"]

SOURCE = Path(__file__).resolve().parents[1] / "src" / "flowforge"

#: not errors: a block that waits, an internal lookup miss turned into None
SIGNALS = {"Suspend", "KeyError", "StopIteration", "NotImplementedError"}


class Raised(NamedTuple):
    kind: str
    message: str
    where: str            # blocks/agent.py:198


def _files(module: str, seen: set[str]) -> list[Path]:
    """A block module's files and those of the private helpers it imports."""
    if module in seen:
        return []
    seen.add(module)
    path = SOURCE / "blocks" / module
    files = sorted(path.glob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    found = list(files)
    for file in files:
        for helper in re.findall(r"from flowforge\.blocks\.(_\w+) import",
                                 file.read_text(encoding="utf-8")):
            found += _files(helper, seen)
    return found


def _text(node: ast.AST | None, caught: str) -> str:
    """A message argument as the reader sees it."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "…"
                       for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left, caught) + _text(node.right, caught)
    source = ast.unparse(node)
    if caught and re.fullmatch(r"str\(\w+\)|\w+\.message|\w+", source):
        return f"(the message of the {caught} it caught)"
    return "…"


def _error_call(call: ast.Call, caught: str) -> tuple[str, str] | None:
    """(kind, message) of `SomeError(...)`, reading the message where each
    class takes it."""
    name = call.func.id if isinstance(call.func, ast.Name) else (
        call.func.attr if isinstance(call.func, ast.Attribute) else "")
    if not re.fullmatch(r"[A-Z]\w*(Error|Exceeded|Timeout|Denied|Large|Failed)", name):
        return None
    args = list(call.args)
    if name in ("BlockError", "BlockTimeout"):
        return name, _text(args[2] if len(args) > 2 else None, caught)
    if name == "BlockRunError":
        stage = args[0].value if args and isinstance(args[0], ast.Constant) else "…"
        return f"BlockRunError ({stage})", _text(args[1] if len(args) > 1 else None, caught)
    return name, _text(args[0] if args else None, caught)


def _builders(tree: ast.AST) -> dict[str, tuple[str, str]]:
    """Functions and lambdas that build an error: name -> (kind, message or
    "" when the caller passes it)."""
    found: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and isinstance(inner.value, ast.Call):
                    made = _error_call(inner.value, "")
                    if made:
                        found[node.name] = made
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda) \
                and isinstance(node.value.body, ast.Call) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            made = _error_call(node.value.body, "")
            if made:
                found[node.targets[0].id] = (made[0], "")
    return found


@functools.lru_cache(maxsize=None)
def _parsed(path: Path) -> tuple[ast.Module, dict[str, tuple[str, str]]]:
    """A file's tree and its error builders, read once per process: the
    helper modules (`_llm`, `_toolset`) are shared by many block types, and
    each page and the error reference ask again (~1.5 s of CPU per build)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return tree, _builders(tree)


def _raises(path: Path, builders: dict[str, tuple[str, str]]) -> list[Raised]:
    tree, own = _parsed(path)
    builders = {**builders, **own}
    where = str(path.relative_to(SOURCE))
    found: list[Raised] = []

    def visit(node: ast.AST, caught: str, checking: bool = False) -> None:
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught = ast.unparse(node.type).strip("()")
        if isinstance(node, ast.FunctionDef):      # a config model's validator
            checking = any("validator" in ast.unparse(d) for d in node.decorator_list)
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            call = node.exc
            made = _error_call(call, caught)
            name = call.func.id if isinstance(call.func, ast.Name) else ""
            if made is None and name in builders:
                kind, message = builders[name]
                made = (kind, message or _text(call.args[0] if call.args else None, caught))
            if made and made[0] not in SIGNALS:
                kind = f"{made[0]} (config check)" if checking else made[0]
                found.append(Raised(kind, made[1], f"{where}:{node.lineno}"))
        for child in ast.iter_child_nodes(node):
            visit(child, caught, checking)

    visit(tree, "")
    return found


def block_errors(module_name: str) -> list[Raised]:
    """Every error a block module (with its helpers) raises, in file order,
    each kind and message once."""
    return list(_block_errors(module_name))


@functools.lru_cache(maxsize=None)
def _block_errors(module_name: str) -> tuple[Raised, ...]:
    seen: dict[tuple[str, str], Raised] = {}
    files = _files(module_name.rsplit(".", 1)[-1], set())
    builders: dict[str, tuple[str, str]] = {}
    for path in files:                  # `too_many` lives in one helper, raised in another
        builders.update(_parsed(path)[1])
    for path in files:
        for raised in _raises(path, builders):
            seen.setdefault((raised.kind, raised.message), raised)
    return tuple(seen.values())


def _reads(kind: str) -> str:
    """What `{{x.error}}` holds for an error of this kind (engine/guard.py)."""
    from flowforge.errors import FlowforgeError

    def tree(cls: type) -> set[str]:
        return {cls.__name__}.union(*(tree(sub) for sub in cls.__subclasses__()))

    if kind.endswith("(config check)"):
        return ("refused by `validate` when written; when a template gives the value: "
                "`invalid configuration after resolving templates: with.<field>: ` and "
                "the message")
    name = kind.split(" ")[0]
    return "the message" if name in tree(FlowforgeError) else f"`{name}: ` and the message"


#: What any block can fail with, whatever its type (engine/scheduler.py, guard.py).
COMMON = [
    ("a refused configuration", "a value of `with:`, once its templates are rendered, "
     "is not what the block's `Config` accepts (a wrong type, a missing field); written "
     "as a plain value, `flowforge validate` refuses it first",
     "`invalid configuration after resolving templates: with.<field>: <problem>`"),
    ("ValueTooLarge", "a rendered template, the block's output or the run's total passed "
     "its size limit (`FLOWFORGE_MAX_*_MB`)", "the value, its size, the limit and the "
     "setting to raise"),
    ("BlockTimeout", "the block ran longer than its `timeout` (each try, with `retry`)",
     "`timed out after <timeout>s`"),
    ("any other exception", "a bug, in flowforge or in your function: the run's events "
     "carry its traceback (the CLI, Python) or an `error_id` the server logged it under",
     "its class name and message"),
]


def errors_section(module_name: str, anchor_common: str) -> list[str]:
    """The "Errors" section of a block type's page."""
    from gen_common import cell

    raised = block_errors(module_name)
    lines = ["## Errors", "",
             "A failure of this block fails the blocks after it, unless the block has "
             "`on_error: <handler id>`: the handler runs instead and reads "
             "`{{<block id>.error}}`. Besides the failures every block can have "
             f"([common to all blocks]({anchor_common})), the code of this type raises "
             "the errors below. A `ToolError` raised while a tool runs is the tool's answer "
             "to the model (it may call again); it fails the block only where the table's "
             "`BlockError` wraps it.", ""]
    if not raised:
        return ["## Errors", "", "A failure of this block fails the blocks after it, unless "
                "the block has `on_error: <handler id>`: the handler runs instead and reads "
                "`{{<block id>.error}}`. This type raises nothing of its own beyond the "
                f"failures every block can have ([common to all blocks]({anchor_common})).", ""]
    lines += ["| kind | when (the message, as the code writes it) | `{{x.error}}` holds | "
              "raised in |", "| --- | --- | --- | --- |"]
    lines += [f"| `{cell(r.kind)}` | {cell(r.message) or '(no message)'} | "
              f"{_reads(r.kind)} | `{r.where}` |" for r in raised]
    return lines + [""]


def by_type_section(types: dict[str, Any]) -> list[str]:
    """The errors page's table: each block type, the kinds it raises, a link."""
    lines = ["## Errors by block type", "",
             "Read from each block type's code when the manual is built (every `raise`, "
             "with its message); each page's **Errors** section lists them.", "",
             "## Common to all blocks", "",
             "| kind | when | `{{x.error}}` holds |", "| --- | --- | --- |"]
    lines += [f"| {kind} | {when} | {holds} |" for kind, when, holds in COMMON]
    lines += ["", "| block type | kinds it raises |", "| --- | --- |"]
    for name, cls in sorted(types.items()):
        kinds = sorted({r.kind.split(" ")[0] for r in block_errors(cls.__module__)})
        lines.append(f"| [`{name}`](blocks/{name}.md#errors) | "
                     f"{', '.join(f'`{k}`' for k in kinds) or 'only the common ones'} |")
    return lines + [""]
