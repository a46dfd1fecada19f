"""Write the manual's reference pages from the code itself, so they cannot drift.

Run by `make docs` (and by tests/docs/test_manual.py) before `mkdocs build
--strict`: every page under `docs/reference/` is rewritten from what the
code exposes (the block registry and each type's `Config` model, the
expression function table, the typer app, the FastAPI app's OpenAPI
document, the error tree, the `FLOWFORGE_*` and provider variables the source
reads).  The pages are git-ignored: nobody edits them, and a docstring
changed in the code is the page changed in the manual.

    python docs/gen_reference.py [OUT_DIR]      # default: docs/reference
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any

from gen_common import (EXAMPLES, ROOT, SOURCE, allowed_values, annotation_name, cell,
                        dedent_doc, default_text, docstring_markdown, shipped_block_types)
from gen_errors import ENV_PATTERN, environment_page, errors_page, troubleshooting_entries

__all__ = ["generate", "example_problems", "output_problems", "ManualDisagrees",
           "ENV_PATTERN", "troubleshooting_entries", "shipped_block_types"]

def _examples_using(type_name: str) -> list[str]:
    pattern = re.compile(rf"(type:\s*{re.escape(type_name)}\b|\"type\":\s*\"{type_name}\")")
    return sorted(str(p.relative_to(ROOT)) for p in EXAMPLES.rglob("*")
                  if p.suffix in (".yaml", ".json") and "rules" not in p.name
                  and pattern.search(p.read_text(encoding="utf-8")))


def _fields_table(model: Any) -> list[str]:
    """A pydantic model's fields: name, type, default, allowed values, description."""
    if not model.model_fields:
        return []
    lines = ["| field | type | default | allowed values | description |",
             "| --- | --- | --- | --- | --- |"]
    for field_name, field in model.model_fields.items():
        allowed = ", ".join(f"`{v}`" for v in allowed_values(field.annotation))
        lines.append(f"| `{field.alias or field_name}` | "
                     f"`{cell(annotation_name(field.annotation))}` | {cell(default_text(field))} | "
                     f"{allowed} | {cell(field.description or '')} |")
    return lines


def scripted_page(out: Path) -> list[str]:
    """The scripted provider's rules format, from its models."""
    from flowforge.providers import scripted

    lines = ["# Scripted rules", "", docstring_markdown(dedent_doc(scripted)), "",
             "## The file", "", *_fields_table(scripted.ScriptRules), "",
             "## One rule", "", *_fields_table(scripted.Rule), ""]
    (out / "scripted.md").write_text("\n".join(lines), encoding="utf-8")
    return [*scripted.ScriptRules.model_fields, *scripted.Rule.model_fields]


def _elided(value: Any) -> Any:
    """`...` written as a key or an item means "and so on": drop it."""
    if isinstance(value, dict):
        return {k: _elided(v) for k, v in value.items() if k != "..."}
    if isinstance(value, list):
        return [_elided(v) for v in value if v != "..."]
    return value


def _example_documents(type_name: str, markdown: str) -> list[tuple[str, Any]]:
    """Each YAML example of blocks in a block type's docstring, loaded as a
    workflow: (its text, the compiled workflow or the WorkflowError).  Blocks
    it only refers to (`{{answer.content}}`, `on_error: review`) are stood in
    for by `set` blocks giving the fields the example reads of them."""
    import yaml

    import flowforge
    from flowforge.errors import WorkflowError
    from flowforge.workflow.graph import NAMESPACES

    loaded = []
    for body in re.findall(r"```yaml\n(.*?)```", markdown, re.S):
        blocks = _elided(yaml.safe_load(body))
        if not (isinstance(blocks, list) and blocks and isinstance(blocks[0], dict)
                and ("type" in blocks[0] or "uses" in blocks[0])):
            continue                              # an output's shape, not blocks
        ids = {block.get("id") for block in blocks}
        read: dict[str, dict[str, str]] = {}
        for name, field in re.findall(r"\{\{\s*(\w+)\.(\w+)", body):
            if name not in ids:
                read.setdefault(name, {})[field] = "example"     # what the example reads of it
        named = set(read) | set(re.findall(r"(?:on_error|goto|default):\s*(\w+)", body))
        stand_ins = [{"id": n, "type": "set", "with": read.get(n, {})}
                     for n in sorted(named - ids - NAMESPACES)]
        document = {"version": 1, "id": f"example-{type_name}", "blocks": stand_ins + blocks}
        try:
            loaded.append((body, flowforge.load_text(yaml.safe_dump(document))))
        except WorkflowError as exc:
            loaded.append((body, exc))
    return loaded


def example_problems(type_name: str, markdown: str) -> list[str]:
    """Each YAML example of blocks in a block type's docstring, loaded as a
    workflow: an example the code refuses is a manual that is wrong."""
    return [f"the example of `{type_name}` (in its module docstring) is refused: {loaded}"
            for _, loaded in _example_documents(type_name, markdown)
            if isinstance(loaded, Exception)]


def _listed(names: Any) -> str:
    return ", ".join(f"`{n}`" for n in sorted(names))


def output_problems(type_name: str, cls: Any, markdown: str) -> list[str]:
    """Where a block type's documented output (its `outputs` declaration, the
    manual's table) and what validation accepts of it (`output_fields`, read for
    an empty `with:` and for each example of its docstring) disagree: a field
    documented that a reference may not read, a field a reference may read that
    nothing documents, an open output that does not say so.  `{{x.field}}` in
    the docstring's prose, for an example block `x` of this type, must be a
    field it gives."""
    from types import SimpleNamespace

    from flowforge.workflow.model import BlockSpec

    declared = set(cls.outputs)
    where = f"the output of `{type_name}` (`outputs` in {cls.__module__})"
    problems = [f"{where}: `{field}` needs a type and a description"
                for field, output in cls.outputs.items()
                if not (output.type.strip() and output.description.strip())]
    if not declared and not cls.more_outputs:
        problems.append(f"{where}: nothing says what it gives; declare `outputs`, or say in "
                        f"`more_outputs` why they are open")
    cases = [("an empty `with:`", BlockSpec(id="block", type=type_name),
              SimpleNamespace(inputs={}), "")]
    for body, loaded in _example_documents(type_name, markdown):
        if not isinstance(loaded, Exception):
            cases += [(f"its example block `{spec.id}`", spec, loaded.doc, body)
                      for spec in loaded.doc.blocks if spec.type == type_name
                      or (type_name == "registry" and spec.uses)]
    for label, spec, doc, text in cases:
        try:
            fields = cls.output_fields(spec, doc)
        except Exception:  # noqa: BLE001 - a hook that needs more than the example gives
            continue
        if fields is None:
            if not cls.more_outputs:
                problems.append(f"{where}: validation treats it as open for {label}, and the "
                                f"manual does not say so: say why in `more_outputs`")
            continue
        refused = declared - set(fields)
        if refused:
            problems.append(f"{where}: documents {_listed(refused)}, which validation refuses "
                            f"for {label} (`output_fields` does not give it)")
        # fields the example itself names (a `set` block's keys, a metric, a schema's
        # property); a registry block's come from its own schema (`flowforge blocks show`)
        undocumented = {f for f in set(fields) - declared
                        if not re.search(rf"\b{re.escape(f)}\b", text, re.I)
                        and not spec.uses}
        if undocumented or (set(fields) - declared and not cls.more_outputs):
            problems.append(f"{where}: validation accepts "
                            f"{_listed(undocumented or set(fields) - declared)} for {label}, "
                            f"which the manual does not document")
        accepted = set(fields)
        for field in re.findall(rf"\{{\{{\s*{re.escape(spec.id)}\.(\w+)", markdown):
            if field not in accepted:
                problems.append(f"the documentation of `{type_name}` reads "
                                f"`{{{{{spec.id}.{field}}}}}`, which its output does not give "
                                f"(its outputs: {_listed(accepted)})")
    return list(dict.fromkeys(problems))


def _code(text: str) -> str:
    """A table cell as code, unless it already quotes its own code."""
    return cell(text) if "`" in text else f"`{cell(text)}`"


def _outputs_section(cls: Any) -> list[str]:
    """The output table, from the block type's `outputs` declaration."""
    lines = ["## Output", ""]
    if cls.outputs:
        lines += ["| field | type | description |", "| --- | --- | --- |"]
        lines += [f"| `{field}` | {_code(output.type)} | {cell(output.description)} |"
                  for field, output in cls.outputs.items()]
        lines.append("")
    if cls.more_outputs:
        more = cls.more_outputs
        lines += [f"Besides: {more[0].lower()}{more[1:]}" if cls.outputs else more, ""]
    lines += ["A block with `on_error` that fails gives `{error}` instead, which its handler "
              "reads (`{{x.error}}`). Validation refuses a reference to a field the output "
              "does not give, wherever the document tells what it gives.", ""]
    return lines


def _events_of(module_name: str, seen: set[str] | None = None) -> set[str]:
    """Event types a block module emits, itself or through the private helper
    modules (`blocks._llm`, ...) it imports."""
    seen = set() if seen is None else seen
    if module_name in seen:
        return set()
    seen.add(module_name)
    path = SOURCE / "blocks" / module_name.rsplit('.', 1)[-1]
    files = sorted(path.glob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    text = "\n".join(file.read_text(encoding="utf-8") for file in files)    # a package: all
    events = set(re.findall(r"\bemit\(\s*[\"'](\w+)[\"']", text))
    for helper in re.findall(r"from flowforge\.blocks\.(_\w+) import", text):
        events |= _events_of(f"flowforge.blocks.{helper}", seen)
    return events


def block_pages(out: Path) -> dict[str, list[str]]:
    """One page per block type; returns type -> documented config fields."""
    from gen_block_errors import errors_section

    folder = out / "blocks"
    folder.mkdir(parents=True, exist_ok=True)
    documented: dict[str, list[str]] = {}
    index = ["# Block types", "",
             "Every block type the engine knows, from the block registry. Each page lists "
             "the fields its `with:` takes (from the type's `Config` model) and what it "
             "outputs (from its `outputs` declaration, which validation checks references "
             "against).", "", "| type | what it does |", "| --- | --- |"]
    for name, cls in sorted(shipped_block_types().items()):
        module = sys.modules[cls.__module__]
        doc = dedent_doc(module)
        summary = doc.split("\n\n")[0].replace("\n", " ")
        index.append(f"| [`{name}`]({name}.md) | {cell(summary)} |")
        config = cls.Config
        lines = [f"# `{name}`", "", docstring_markdown(doc), ""]
        PROBLEMS.extend(example_problems(name, lines[2]))
        PROBLEMS.extend(output_problems(name, cls, lines[2]))
        flags = [flag for flag, on in (("container (holds child `blocks:`)", cls.container),
                                       ("routing (chooses which outgoing blocks run)",
                                        cls.routes)) if on]
        if flags:
            lines += ["**Kind:** " + "; ".join(flags), ""]
        lines += ["## Fields of `with:`", ""]
        fields = config.model_fields
        lines += _fields_table(config)
        extra = config.model_config.get("extra")
        if extra == "allow":
            lines += ["", "Any other field is accepted: " + cell(dedent_doc(config))]
        elif not fields:
            lines += ["This block type takes no fields."]
        documented[name] = [f.alias or n for n, f in fields.items()]
        lines += ["", *_outputs_section(cls)]
        lines += errors_section(cls.__module__, "../errors.md#common-to-all-blocks")
        events = sorted(_events_of(cls.__module__))
        lines += ["## Events", "",
                  "Like every block: `block_started`, then `block_succeeded`, `block_failed` "
                  "or `block_skipped`."
                  + (" Besides, while it runs: " + ", ".join(f"`{e}`" for e in events) + "."
                     if events else "")]
        uses = _examples_using(name)
        if uses:
            lines += ["", "## Shipped examples that use it", ""]
            lines += [f"- `{path}` (run by `tests/test_examples.py`)" for path in uses]
        lines += ["", "## JSON Schema of `with:`", "", "```json",
                  json.dumps(config.model_json_schema(by_alias=True), indent=2, default=str),
                  "```", ""]
        (folder / f"{name}.md").write_text("\n".join(lines), encoding="utf-8")
    (folder / "index.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    return documented


def expressions_page(out: Path) -> list[str]:
    from flowforge.workflow import expression_limits, expression_methods, expressions
    from flowforge.workflow.expression_ops import FUNCTIONS

    lines = ["# Templates and expressions", "",
             "## Template namespaces", "",
             "`{{ns.dotted.path}}` reads from these roots, or from a block's id or "
             "normalised name:", ""]
    from flowforge.workflow.graph import NAMESPACES
    from flowforge.workflow import templates

    lines += [f"- `{root}`" for root in sorted(NAMESPACES)]
    lines += ["", docstring_markdown(dedent_doc(templates))]
    lines += ["", "## Expressions", "", docstring_markdown(dedent_doc(expressions)), "",
              "## Functions", "", "| function | description |", "| --- | --- |"]
    for name, function in sorted(FUNCTIONS.items()):
        doc = (inspect.getdoc(function) or "").split("\n\n")[0]
        lines.append(f"| `{name}` | {cell(doc)} |")
    lines += ["", "## Methods", "", "| value type | methods |", "| --- | --- |"]
    for kind, methods in expression_methods.METHODS.items():
        lines.append(f"| `{kind.__name__}` | {', '.join(f'`{m}`' for m in sorted(methods))} |")
    lines += ["", "## Limits", "", docstring_markdown(dedent_doc(expression_limits)), "",
              "| limit | value |", "| --- | --- |"]
    for constant in ("MAX_INT_BITS", "MAX_LENGTH", "MAX_ITEMS", "MAX_WORK", "MAX_SECONDS"):
        if hasattr(expression_limits, constant):
            lines.append(f"| `{constant}` | `{getattr(expression_limits, constant)}` |")
    (out / "expressions.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sorted(FUNCTIONS)


def _walk(command: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    found = [(path, command)]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        found += _walk(sub, path + [name])
    return found


def cli_page(out: Path) -> dict[str, list[str]]:
    """Every command and option, from the typer app itself."""
    import typer.main

    from flowforge.cli.main import app

    root = typer.main.get_command(app)
    documented: dict[str, list[str]] = {}
    lines = ["# Command line", "",
             "Every `flowforge` command and option, read from the command line itself "
             "(the same text as `--help`).", "", docstring_markdown(
                 dedent_doc(sys.modules["flowforge.cli.main"])), ""]
    for path, command in _walk(root, ["flowforge"]):
        name = " ".join(path)
        lines += [f"## `{name}`", "", inspect.cleandoc(command.help or ""), ""]
        options = []
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        for param in params:
            kind = annotation_name(param.type_descriptor.annotation) \
                if hasattr(param, "type_descriptor") else getattr(param.type, "name", "")
            if param.param_type_name == "option":
                names = ", ".join(f"`{o}`" for o in param.opts + param.secondary_opts)
                default = "" if param.required or param.default in (None, False, (), []) \
                    else f"`{param.default}`"
                options.append(f"| {names} | `{cell(kind)}` | {default} | "
                               f"{cell(param.help or '')} |")
            else:
                options.append(f"| `{param.name.upper()}` (argument"
                               f"{'' if param.required else ', optional'}) | "
                               f"`{cell(kind)}` | | {cell(param.help or '')} |")
        if options:
            lines += ["| option | type | default | description |", "| --- | --- | --- | --- |",
                      *options, ""]
        documented[name] = [o for p in params for o in
                            (p.opts if p.param_type_name == "option" else [p.name.upper()])]
    (out / "cli.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return documented


def http_page(out: Path) -> list[str]:
    """Every route of the OpenAPI document, with body fields and a recorded
    answer each, and the WebSocket routes (docs/gen_http.py)."""
    import gen_http

    return gen_http.http_page(out, docstring_markdown)


#: Where the code and its documentation disagree, found while generating.
PROBLEMS: list[str] = []


class ManualDisagrees(Exception):
    """The code's own documentation is wrong (an example the code refuses, an
    output documented that validation does not accept, or the reverse)."""


def generate(out: Path = ROOT / "docs" / "reference") -> dict[str, Any]:
    """Write every reference page into `out`; returns what each page documents.
    Raises ManualDisagrees, listing every problem, when the code's own
    documentation is wrong."""
    from gen_document import document_page, document_problems

    PROBLEMS.clear()
    out.mkdir(parents=True, exist_ok=True)
    PROBLEMS.extend(document_problems())
    documented = {"document": document_page(out),"blocks": block_pages(out), "functions": expressions_page(out),
                  "cli": cli_page(out), "routes": http_page(out), "errors": errors_page(out),
                  "environment": environment_page(out),
                  "scripted": scripted_page(out)}
    index = ["# Reference", "",
             "Generated from the code each time the manual is built: nothing here is "
             "edited by hand.", "",
             "- [The workflow document](document.md): every key of a workflow file",
             "- [Block types](blocks/index.md): every block type, its fields and outputs",
             "- [Templates and expressions](expressions.md): namespaces, functions, limits",
             "- [Command line](cli.md): every command and option",
             "- [HTTP API](http.md): every route",
             "- [Errors](errors.md): error classes, HTTP error codes, exit codes",
             "- [Environment variables](environment.md)",
             "- [Scripted rules](scripted.md): the rules format of `scripted/` models"]
    (out / "index.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    if PROBLEMS:
        raise ManualDisagrees("\n".join(PROBLEMS))
    return documented


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "reference")
    except ManualDisagrees as exc:
        sys.exit(f"error: the code and its documentation disagree:\n{exc}")
