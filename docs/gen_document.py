"""The workflow document's reference page, written from the models the
validator itself uses (src/flowforge/workflow/model.py), so it cannot drift.

Every key of every model (`Workflow`, `BlockSpec`, `RetryPolicy`, `Join`,
`Trigger`, `Budget`, `Downgrade`) gets a row: its type, its default, its
description (the field's docstring, which is also the JSON Schema's
`description`) and an example (the field's `examples`, also in the JSON
Schema).  A field without a description or an example, an example the model
refuses, or the page's complete example refused by `flowforge validate`'s
loader is a manual that is wrong: `document_problems` lists them and
docs/gen_reference.py stops (`make docs` fails).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import yaml

__all__ = ["document_page", "document_problems", "MODELS", "COMPLETE_EXAMPLE"]

#: model name -> (the smallest valid mapping of that model, the section it is drawn in)
MODELS: dict[str, tuple[dict[str, Any], str]] = {
    "Workflow": ({"id": "example"}, "Top-level keys"),
    "BlockSpec": ({"id": "b", "type": "set"}, "Keys every block has"),
    "RetryPolicy": ({}, "`retry`"),
    "Join": ({"all": ["a"]}, "`after` as a mapping"),
    "Trigger": ({"cron": "0 7 * * *"}, "`triggers`"),
    "Budget": ({"tokens": 1000}, "`budget`"),
    "Downgrade": ({"downgrade": "openai/gpt-4o-mini"}, "`budget.on_exceed`"),
}

#: A document that uses most keys at once; the generator loads it as
#: `flowforge validate` does, so it is valid as printed.
COMPLETE_EXAMPLE = """\
version: 1
id: morning-digest
name: Morning digest
description: Summarises the news on a topic, every weekday at 7.
inputs:
  topic: {type: string, default: news}        # optional: it has a default
  max_items: {type: integer, minimum: 1, default: 5}
  urgent: {type: boolean, optional: true}     # optional, no default: absent if not given
variables: {company: Acme}
defaults: {model: scripted/digest, temperature: 0.2}
memory: [last_summary]
env: {REGION: eu}
concurrency: 4
budget: {tokens: 20000, on_exceed: fail}
triggers:
  - {cron: "0 7 * * 1-5", timezone: Europe/Paris, inputs: {topic: markets}}
metadata: {layout: {write: {x: 120, y: 40}}}
blocks:
  - id: write
    type: llm
    name: Writer
    description: Writes the digest
    timeout: 60
    retry: {attempts: 3, backoff: 1.0}
    on_error: apologise
    with:
      prompt: "For {{vars.company}} ({{env.REGION}}): summarise {{input.max_items}} items about {{input.topic}}."
  - {id: last_summary, type: set, with: {text: "{{write.content}}"}}
  - {id: apologise, type: response, with: {message: "No digest today: {{write.error}}"}}
  - {id: done, type: response, after: [last_summary], with: {message: "{{write.content}}"}}
"""


def _models() -> dict[str, Any]:
    from flowforge.workflow import model

    return {name: getattr(model, name) for name in MODELS}


def document_problems() -> list[str]:
    """Where the models and this page would disagree: a key without a
    description or an example, an example the model refuses, the complete
    example refused."""
    import flowforge
    from pydantic import ValidationError

    from flowforge.errors import WorkflowError

    problems = []
    for name, cls in _models().items():
        smallest, _ = MODELS[name]
        for field_name, field in cls.model_fields.items():
            key = field.alias or field_name
            where = f"`{key}` of {name} (src/flowforge/workflow/model.py)"
            if not (field.description or "").strip():
                problems.append(f"{where} has no description: write its docstring")
            if not field.examples:
                problems.append(f"{where} has no example: add `examples=[...]` to its Field")
            for example in field.examples or []:
                try:
                    cls.model_validate({**smallest, key: example})
                except ValidationError as exc:
                    problems.append(f"{where}: its example {example!r} is refused: "
                                    f"{exc.errors()[0]['msg']}")
    try:
        flowforge.load_text(COMPLETE_EXAMPLE)
    except WorkflowError as exc:
        problems.append(f"the document reference's complete example is refused: {exc}")
    return problems


def _type(annotation: Any) -> str:
    """A field's type as a reader writes it: `RetryPolicy | int | None`."""
    import types
    import typing

    from gen_common import annotation_name

    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _type(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type(arg) for arg in typing.get_args(annotation))
    return "None" if annotation is type(None) else annotation_name(annotation)


def _table(cls: Any) -> list[str]:
    from gen_common import cell, default_text

    lines = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    for field_name, field in cls.model_fields.items():
        lines.append(f"| `{field.alias or field_name}` | "
                     f"`{cell(_type(field.annotation))}` | {cell(default_text(field))} | "
                     f"{cell(field.description or '')} |")
    return lines


def _examples(cls: Any, nest: str = "") -> list[str]:
    """One YAML example per key, as it is written in a document."""
    lines = []
    for field_name, field in cls.model_fields.items():
        key = field.alias or field_name
        lines += [f"### `{nest}{key}`", "", inspect.cleandoc(field.description or ""), ""]
        for example in field.examples or []:
            nested = isinstance(example, (dict, list))
            text = yaml.safe_dump({key: example}, sort_keys=False, allow_unicode=True,
                                  default_flow_style=None if nested else False,
                                  width=90).rstrip()
            lines += ["```yaml", text, "```", ""]
    return lines


def document_page(out: Path) -> list[str]:
    """Write reference/document.md; returns every key it documents, as
    `Model.key`."""
    from flowforge.service import webhooks
    from flowforge.workflow import model

    models = _models()
    lines = ["# The workflow document", "",
             "Every key a workflow file may hold, generated from the models that "
             "`flowforge validate` and every run check a document against "
             "(`src/flowforge/workflow/model.py`); `flowforge schema` prints the same models "
             "as JSON Schema, for an editor's completion. An unknown key is refused, with "
             "the closest known one suggested. What each block type takes under `with:` is "
             "on its own page: [block types](blocks/index.md).", "",
             "## A complete example", "", "```yaml", COMPLETE_EXAMPLE.rstrip(), "```", ""]
    documented = []
    for name, cls in models.items():
        _, title = MODELS[name]
        doc = inspect.cleandoc(cls.__doc__ or "")
        lines += [f"## {title}", "", doc, ""]
        if name == "Workflow":
            lines += ["`id` is the only key a document needs; `blocks` is the graph."]
        lines += ["", *_table(cls), ""]
        if name == "Workflow":
            lines += ["### Inputs and their types", "",
                      "Each input is a JSON Schema (draft 2020-12): `type` is one of "
                      "`string`, `integer`, `number`, `boolean`, `array`, `object`, `null`, "
                      "with any other keyword (`enum`, `minimum`, `items`, `pattern`, "
                      "`description`, ...). `optional: true` makes an input without a "
                      "default optional. On the command line `--input name=value` reads "
                      "the value as JSON when it parses (`--input n=3` is the number 3, "
                      "`--input tags='[\"a\"]'` a list), else as text; `--input "
                      "name=@notes.txt` reads the text of a file (`@@` for a literal "
                      "`@`); `--inputs-file inputs.yaml` gives them all as a mapping.",
                      ""]
        prefix = {"Workflow": "", "BlockSpec": "blocks[].", "RetryPolicy": "retry.",
                  "Join": "after.", "Trigger": "triggers[].", "Budget": "budget.",
                  "Downgrade": "budget.on_exceed."}[name]
        lines += _examples(cls, prefix)
        if name == "Trigger":
            lines += ["A trigger fires only on a worker pool (`flowforge worker`, see "
                      "[scaling out](../guides/scaling-out.md)): `flowforge run` and a "
                      "server without a pool never fire it. `flowforge schedules list` shows "
                      "what is due.", ""]
        documented += [f"{name}.{field.alias or key}" for key, field in cls.model_fields.items()]
    lines += ["## `webhook`", "", model.Workflow.model_fields["webhook"].description or "", "",
              _webhook_doc(webhooks), ""]
    (out / "document.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return documented


def _webhook_doc(webhooks: Any) -> str:
    from gen_common import docstring_markdown

    return docstring_markdown(inspect.cleandoc(webhooks.__doc__ or ""), "text")
