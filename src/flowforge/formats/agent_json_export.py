"""Native workflows made only of chain-shaped blocks -> Agent definitions.

The inverse of the importer, for teams that keep their Agents in the
prompt-chain format: `llm` blocks become prompt nodes, `parser` parser
nodes, `http` event nodes and a `response` whose `data` names values a
return node.  Each block's result is written to a variable named after the
block (`{output}`), and every native reference becomes that variable
(`{{plots.content}}` -> `{plots}`, `{{input.script}}` -> `{script}`,
`{{secrets.apiKey}}` -> `{apiKey}`), so importing the export gives back the
same workflow.  What a chain cannot say (tools, structured output, routing,
containers, retries, reading a block's other fields) is reported, located,
instead of being dropped.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flowforge.formats.agent_json import ID_PATTERN, LLM_PROVIDERS, secret_names
from flowforge.formats.agent_json_templates import NATIVE_REF_RE, native_to_chain, to_prompt
from flowforge.errors import Problem, ValidationFailed
from flowforge.model_strings import parse_model
from flowforge.workflow.loader import document_from_data
from flowforge.workflow.model import Workflow
from flowforge.workflow.notation import NotationError, schema_to_notation

__all__ = ["workflow_to_agent", "original_id"]

_PROVIDER_LLM = {provider: llm for llm, provider in LLM_PROVIDERS.items()}
_KEYS = {"llm": {"model", "system", "prompt", "inputs", "temperature", "max_tokens", "api_key"},
         "parser": {"text", "schema"}, "http": {"method", "url", "body"},
         "response": {"data"}}
_RESULT = {"llm": "content", "parser": "data", "http": "data"}
_NODE_TYPE = {"llm": "prompt", "parser": "parser", "http": "event"}
_MARK = "\ue000{}\ue000"
_MARK_RE = re.compile('"\ue000(\\d+)\ue000"')


def workflow_to_agent(document: Any) -> dict[str, Any]:
    """The Agent definition of a workflow (plain data, a Workflow or a compiled
    one); ValidationFailed lists every block a chain cannot express."""
    doc = getattr(document, "doc", document)
    if isinstance(doc, dict):
        doc = document_from_data(doc)
    if not isinstance(doc, Workflow):
        raise TypeError(f"cannot export {type(document).__name__} as an Agent")
    return _Exporter(doc).convert()


def original_id(workflow_id: str) -> str:
    """The Agent id a workflow id was imported from: the importer prefixes
    `agent-` only to an id that is not a valid workflow id alone (a UUID that
    starts with a digit), so the prefix comes off exactly then.  (An Agent whose
    own id is `agent-` and a digit-led rest comes back without its prefix: the
    one id the two forms share.)"""
    rest = workflow_id[len("agent-"):] if workflow_id.startswith("agent-") else ""
    return rest if rest and not ID_PATTERN.match(rest) else workflow_id


class _Exporter:
    def __init__(self, doc: Workflow) -> None:
        self.doc = doc
        self.problems: list[Problem] = []
        self.variables: dict[str, Any] = {}
        self.variable_of: dict[str, str] = {}       # native reference -> variable
        self.nodes: list[dict[str, Any]] = []
        self.node_of: dict[str, dict[str, Any]] = {}  # block id -> its node
        self.refused: set[str] = set()    # blocks already reported: reading them is no news
        self.earlier: set[str] = set()    # ids of the blocks before the one being exported

    def add(self, where: str, message: str) -> None:
        self.problems.append(Problem(where, message))

    def convert(self) -> dict[str, Any]:
        doc = self.doc
        for field in ("variables", "memory", "env", "webhook"):
            if getattr(doc, field):
                self.add(field, f"a chain has no `{field}`: remove it to export as an Agent")
        extra_defaults = sorted(set(doc.defaults) - {"model"})
        if extra_defaults:
            self.add("defaults", f"a chain has no workflow-wide {', '.join(extra_defaults)}: "
                                 f"set them on each block")
        for name, schema in doc.inputs.items():
            self.variables[name] = schema.get("default", "")
            self.variable_of[f"input.{name}"] = name
        for name in sorted(secret_names(doc)):
            self.variables.setdefault(name, "")
            self.variable_of[f"secrets.{name}"] = name
        for index, spec in enumerate(doc.blocks):
            self._block(f"blocks[{index}]", spec)
            self.earlier.add(spec.id)
        if self.problems:
            raise ValidationFailed(self.problems, source=f"export of '{doc.id}'")
        agent: dict[str, Any] = {"id": original_id(doc.id), "name": doc.name or doc.id}
        if doc.description:
            agent["description"] = doc.description
        agent["variables"] = self.variables
        agent["promptChain"] = self.nodes
        return agent

    def _translate(self, where: str, value: Any) -> Any:
        if not isinstance(value, str):
            if isinstance(value, (int, float, bool)) or value is None:
                return value
            self.add(where, "a chain field is text: a mapping or list cannot be exported here")
            return ""
        try:
            return native_to_chain(value, self.variable_of)
        except KeyError as exc:
            if str(exc.args[0]).split(".", 1)[0] not in self.refused:
                self.add(where, f"reads {{{{{exc.args[0]}}}}}, which a chain cannot express (a "
                                f"chain passes the run's variables and each node's result "
                                f"only)")
            return ""

    def _block(self, where: str, spec: Any) -> None:
        kind = spec.type
        if kind not in _KEYS:
            self.add(where, f"block '{spec.id}' ({kind or spec.uses}) has no prompt-chain "
                            f"equivalent (llm, parser, http and response do)")
            self.refused.add(spec.id)
            return
        for field in ("blocks", "after", "on_error", "uses", "retry", "timeout"):
            after = spec.after if isinstance(spec.after, list) else None
            if field == "after" and (kind in ("http", "response") or
                                     (after is not None and set(after) <= self.earlier)):
                continue        # a chain runs each node after every earlier one anyway
            if getattr(spec, field):
                self.add(where, f"block '{spec.id}': a chain node has no `{field}`")
        extra = sorted(set(spec.with_) - _KEYS[kind])
        if extra:
            self.add(where, f"block '{spec.id}': a chain node cannot express "
                            f"{', '.join(f'with.{key}' for key in extra)}")
        if kind == "response":
            self._return(where, spec)
            return
        variable = spec.id if spec.id not in self.variables else f"{spec.id}_output"
        node: dict[str, Any] = {"type": _NODE_TYPE[kind], "name": spec.name or spec.id}
        if spec.description:
            node["description"] = spec.description
        config = spec.with_
        if kind == "llm":
            self._prompt(where, config, node, spec.id)
        elif kind == "parser":
            node["rawData"] = self._translate(f"{where}.with.text", config.get("text", ""))
            node["parser"] = "JSON"
            schema = config.get("schema")
            if isinstance(schema, dict):
                try:
                    schema = schema_to_notation(schema)
                except NotationError as exc:
                    self.add(f"{where}.with.schema", str(exc))
            if schema is not None:
                node["schema"] = schema
        else:
            node["endPoint"] = self._translate(f"{where}.with.url", config.get("url", ""))
            node["method"] = config.get("method", "GET")
            if config.get("body") is not None:
                node["data"] = self._body(f"{where}.with.body", config["body"])
        node["output"] = variable             # written at run time, not declared
        self.variable_of[f"{spec.id}.{_RESULT[kind]}"] = variable
        self.nodes.append(node)
        self.node_of[spec.id] = node

    def _prompt(self, where: str, config: dict[str, Any], node: dict[str, Any],
                block_id: str) -> None:
        model = config.get("model") or self.doc.defaults.get("model")
        if isinstance(model, str) and "/" in model and "{{" not in model:
            parsed = parse_model(model)
            node["llm"] = _PROVIDER_LLM.get(parsed.provider, parsed.provider)
            node["model"] = parsed.name
        elif model is not None:
            self.add(f"{where}.with.model", f"model {model!r} cannot be exported")
        if config.get("system"):
            node["system"] = self._written(block_id, "system", config["system"])
        node["user"] = self._written(block_id, "user", config.get("prompt", ""))
        inputs = config.get("inputs") or {}
        if inputs:
            node["field"] = {key: self._translate(f"{where}.with.inputs.{key}", value)
                             for key, value in inputs.items()}
        key = config.get("api_key")
        if key is not None:
            match = re.fullmatch(r"\{\{\s*secrets\.([A-Za-z0-9_\-]+)\s*\}\}", str(key))
            if match is None:
                self.add(f"{where}.with.api_key", "a chain reads a key from a variable: write "
                                                  "api_key as {{secrets.NAME}}")
            else:
                node["apiKey"] = "{" + match.group(1) + "}"
        if config.get("temperature") is not None:
            node["temperature"] = config["temperature"]
        if config.get("max_tokens") is not None:
            node["maxTokens"] = config["max_tokens"]

    def _written(self, block_id: str, key: str, prompt: str) -> str:
        """The prompt as the chain wrote it (`${name}`), when the import kept it
        and the block's prompt is still what it became."""
        chain = (self.doc.metadata or {}).get("chain")
        prompts = chain.get("prompts") if isinstance(chain, dict) else None
        original = prompts.get(f"{block_id}.{key}") if isinstance(prompts, dict) else None
        if isinstance(original, str) and to_prompt(original) == prompt:
            return original
        return prompt

    def _body(self, where: str, body: Any) -> str:
        """The body as the chain's JSON template: a whole reference is written
        bare (`"characters": {characters}`) so the value keeps its type."""
        names: list[str] = []

        def mark(value: Any, at: str) -> Any:
            if isinstance(value, str):
                whole = NATIVE_REF_RE.fullmatch(value.strip())
                if whole and whole.group(1) in self.variable_of:
                    names.append(self.variable_of[whole.group(1)])
                    return _MARK.format(len(names) - 1)
                return self._translate(at, value)
            if isinstance(value, dict):
                return {self._translate(at, str(k)): mark(v, f"{at}.{k}") for k, v in value.items()}
            if isinstance(value, list):
                return [mark(v, f"{at}[{i}]") for i, v in enumerate(value)]
            return value

        text = json.dumps(mark(body, where), ensure_ascii=False)
        return _MARK_RE.sub(lambda m: "{" + names[int(m.group(1))] + "}", text)

    def _return(self, where: str, spec: Any) -> None:
        data = spec.with_.get("data")
        if not isinstance(data, dict):
            self.add(where, f"block '{spec.id}': a return node lists variables: write the "
                            f"response's `data` as a mapping of names to references")
            return
        names = []
        for key, value in data.items():
            whole = NATIVE_REF_RE.fullmatch(value.strip()) if isinstance(value, str) else None
            ref = whole.group(1) if whole else None
            if ref is not None and ref.split(".", 1)[0] in self.refused:
                continue
            if ref is None or ref not in self.variable_of:
                self.add(f"{where}.with.data.{key}", "a return node returns a variable: write a "
                                                     "whole reference such as {{plots.content}}")
                continue
            variable = self.variable_of[ref]
            if key != variable:
                block_id = ref.split(".", 1)[0]
                producer = self.node_of.get(block_id)
                if producer is None:
                    self.add(f"{where}.with.data.{key}", f"returns {{{{{ref}}}}} as '{key}': "
                                                         f"name it '{variable}' to export")
                    continue
                if isinstance(producer["output"], str):
                    producer["output"] = {producer["output"]: "{output}"}
                producer["output"][key] = "{output}"
            names.append(key)
        node: dict[str, Any] = {"type": "return", "name": spec.name or spec.id, "output": names}
        self.nodes.append(node)
