"""Converting one prompt-chain Agent: the node-by-node walk behind
`flowforge.formats.agent_json.agent_to_workflow` (see there for the format).

It follows the chain's variables as nodes write them, so every `{name}` a
node reads becomes the native template of the value it holds at that point;
every problem is collected and reported at once, located as
`promptChain[2] 'characters'`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flowforge.blocks.llm import placeholders
from flowforge.errors import Problem, ValidationFailed
from flowforge.formats import agent_json_templates as chain_templates
from flowforge.formats.agent_json import (BASE_URL_VARIABLE, ID_PATTERN, LLM_PROVIDERS,
                                          NODE_FIELDS, key_variables, literal_key_name,
                                          stored_secret)
from flowforge.providers.resolve import known_prefixes
from flowforge.workflow.graph import NAMESPACES
from flowforge.workflow.templates import normalize_name as _normal
from flowforge.workflow.notation import NotationError, notation_to_schema

__all__ = ["AgentImporter"]

#: a block id made from a node's name (a counter may follow: ids stay within 128 characters)
_SLUG_LENGTH = 64
_OUTPUT_OF = {"prompt": "content", "parser": "data", "event": "data"}
#: canonical prompt field -> the name the seed's own example writes; both are read
_SEED_NAMES = {"system": "systemPrompt", "user": "userPrompt"}
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


class AgentImporter:
    """One Agent -> its workflow document (`convert`), or ValidationFailed."""

    def __init__(self, agent: dict[str, Any], base_url: str | None, source: str | None,
                 literal_keys: bool = False):
        self.agent = agent
        self.literal_keys = literal_keys
        self.index = 0                          # the node being converted
        self.block_id = ""                      # ... and its block id
        # prompts written with `${name}`: kept as written in the document's metadata,
        # so export gives them back unchanged (the block itself reads `{name}`)
        self.written: dict[str, str] = {}
        self.base_url = base_url
        self.source = source
        self.problems: list[Problem] = []
        self.env: dict[str, str] = {}            # variable -> native template of its value
        self.declared: dict[str, Any] = {}
        self.secrets: set[str] = set()
        self.ids: set[str] = set()
        self.names: set[str] = set()
        self.blocks: list[dict[str, Any]] = []
        self.reach: dict[str, set[str]] = {}     # block id -> every block it waits for

    def add(self, where: str, message: str) -> None:
        self.problems.append(Problem(where, message))

    # -- the agent ---------------------------------------------------------------
    def convert(self) -> dict[str, Any]:
        agent = self.agent
        if not isinstance(agent, dict):
            raise ValidationFailed([Problem("", "an Agent is a mapping with `variables` and "
                                                "`promptChain`")], source=self.source)
        chain = agent.get("promptChain")
        if not isinstance(chain, list) or not chain:
            self.add("promptChain", "must be a non-empty list of nodes (prompt, parser, event, "
                                    "return)")
            chain = []
        variables = agent.get("variables")
        if variables is None:
            variables = {}
        if not isinstance(variables, dict):
            self.add("variables", "must be a mapping of variable names to values")
            variables = {}
        for name, value in variables.items():
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                self.add(f"variables.{name}", "a variable name is letters, digits and _ "
                                              "(not starting with a digit)")
                continue
            self.declared[name] = "" if value is None else value
        nodes = [node for node in chain if isinstance(node, dict)]
        self.secrets = key_variables(nodes)
        for name in self.declared:
            root = "secrets" if name in self.secrets else "input"
            self.env[name] = f"{{{{{root}.{name}}}}}"
        for name in self.secrets - set(self.declared):
            self.env[name] = f"{{{{secrets.{name}}}}}"
        for index, node in enumerate(chain):
            self.index = index
            self._node(index, node)
        if self.problems:
            raise ValidationFailed(self.problems, source=self.source)
        return self._document()

    def _document(self) -> dict[str, Any]:
        agent = self.agent
        raw_id = str(agent.get("id") or "")
        if ID_PATTERN.match(raw_id):
            doc_id = raw_id
        elif raw_id and ID_PATTERN.match(f"agent-{raw_id}"):
            doc_id = f"agent-{raw_id}"
        else:
            doc_id = _slug(str(agent.get("name") or ""))[:_SLUG_LENGTH].strip("_") or "agent"
            doc_id = doc_id if ID_PATTERN.match(doc_id) else f"agent_{doc_id}"
        doc: dict[str, Any] = {"version": 1, "id": doc_id}
        if agent.get("name"):
            doc["name"] = str(agent["name"])
        if agent.get("description"):
            doc["description"] = str(agent["description"])
        doc["inputs"] = {name: {"default": value, "description": "chain variable"}
                         for name, value in self.declared.items() if name not in self.secrets}
        doc["blocks"] = self.blocks
        if self.written:
            doc["metadata"] = {"chain": {"prompts": self.written}}
        return doc

    # -- nodes ------------------------------------------------------------------------
    def _node(self, index: int, node: Any) -> None:
        if not isinstance(node, dict):
            self.add(f"promptChain[{index}]", "a node is a mapping with `type` and `name`")
            return
        name = node.get("name")
        label = f"promptChain[{index}]" + (f" {name!r}" if name else "")
        kind = str(node.get("type") or "").lower()
        if not kind:
            self.add(label, "`type` is required: prompt, parser, event or return")
            return
        if kind not in NODE_FIELDS:
            self.add(label, f"unknown node type {node.get('type')!r}; write prompt, parser, "
                            f"event or return")
            return
        unknown = sorted(set(node) - NODE_FIELDS[kind])
        if unknown:
            self.add(label, f"unknown field(s) {', '.join(unknown)} for a {kind} node (known: "
                            f"{', '.join(sorted(NODE_FIELDS[kind] - {'apikey', 'maxToken'}))})")
        keep_name = bool(name) and _normal(str(name)) not in self.names
        block_id = self._block_id(str(name or ""), index)
        block: dict[str, Any] = {"id": block_id, "type": None}
        if keep_name:
            # a display name whose normal form is another block's id or name would
            # make `{{name.x}}` ambiguous: such a block goes by its id only
            block["name"] = str(name)
            self.names.add(_normal(str(name)))
        if node.get("description"):
            block["description"] = str(node["description"])
        if kind == "return":
            self._return(label, node, block)
            self._order(block, side_effect=True)
            self.blocks.append(block)
            return
        local = self._fields(label, node)
        self.block_id = block_id
        builder = {"prompt": self._prompt, "parser": self._parser, "event": self._event}[kind]
        block["with"] = builder(label, node, local)
        block["type"] = {"prompt": "llm", "parser": "parser", "event": "http"}[kind]
        self._order(block, side_effect=kind == "event")
        self.blocks.append(block)
        result = f"{{{{{block_id}.{_OUTPUT_OF[kind]}}}}}"
        self._outputs(label, node.get("output"), local, result)

    def _order(self, block: dict[str, Any], side_effect: bool) -> None:
        """Each node waits for every earlier node, as the seed runs the chain: in
        order (its logs, and prompts whose cost or rate limits assume one call at
        a time, rely on it).  With `parallel: true` on the Agent, prompts run as
        soon as what they read is ready, so independent ones run at once; an
        event (a call with effects outside the run) and a return still wait for
        every earlier node: an event fires, and a result is returned, only when
        every node before it succeeded."""
        side_effect = side_effect or self.agent.get("parallel") is not True
        found = {m.group(1).split(".", 1)[0]
                 for m in chain_templates.NATIVE_REF_RE.finditer(json.dumps(block["with"]))}
        reached: set[str] = set()
        for dep in found & set(self.reach):
            reached |= {dep} | self.reach[dep]
        if side_effect:
            missing = [b["id"] for b in self.blocks if b["id"] not in reached]
            after = [b for b in missing
                     if not any(b in self.reach[other] for other in missing if other != b)]
            if after:
                block["after"] = after
            for dep in after:
                reached |= {dep} | self.reach[dep]
        self.reach[block["id"]] = reached

    def _block_id(self, name: str, index: int) -> str:
        base = _slug(name)[:_SLUG_LENGTH].strip("_") or f"node{index + 1}"
        if not re.match(r"[a-z_]", base):
            base = f"n_{base}"
        if base in NAMESPACES or base in ("blocks", "output"):
            base = f"{base}_node"
        candidate, counter = base, 2
        while candidate in self.ids or _normal(candidate) in self.names:
            candidate, counter = f"{base}_{counter}", counter + 1
        self.ids.add(candidate)
        self.names.add(_normal(candidate))
        return candidate

    def _lookup(self, scope: dict[str, str], label: str, where: str):
        def lookup(name: str) -> str:
            if name in self.secrets and scope.get(name) == f"{{{{secrets.{name}}}}}":
                self.add(label, f"`{where}` reads {{{name}}}, which holds an API key (an "
                                f"`apiKey` reads it): only `apiKey` may, so the key never "
                                f"reaches a prompt, a request or a result")
                return "{{input.__secret__}}"
            if name in scope:
                return scope[name]
            known = ", ".join(sorted(n for n in scope if n != "output"
                                     and scope[n] != f"{{{{secrets.{n}}}}}")) or "none"
            self.add(label, f"unknown variable {{{name}}} in `{where}` (known at this node: "
                            f"{known}); declare it in `variables` or write it with an "
                            f"earlier node's `output`")
            return "{{input.__unknown__}}"
        return lookup

    def _fields(self, label: str, node: dict[str, Any]) -> dict[str, str]:
        """The node's local names: the variables, then its `field` mapping."""
        local = dict(self.env)
        fields = node.get("field")
        if fields is None:
            return local
        if not isinstance(fields, dict):
            self.add(label, "`field` must be a mapping of names to templates, e.g. "
                            '{"script": "{script}"}')
            return local
        for key, template in fields.items():
            if not isinstance(template, str):
                self.add(label, f"`field.{key}` must be a template string such as \"{{{key}}}\"")
                continue
            scope = dict(self.env)
            if "entryPoint" not in scope:
                # `{entryPoint}`: this field's variable as the run received it
                if key in self.declared:
                    root = "secrets" if key in self.secrets else "input"
                    scope["entryPoint"] = f"{{{{{root}.{key}}}}}"
                elif "entryPoint" in template:
                    self.add(label, f"`field.{key}` reads {{entryPoint}}, the variable '{key}' "
                                    f"as the run received it, but '{key}' is not in `variables`")
                    continue
            local[key] = chain_templates.splice(
                template, self._lookup(scope, label, f"field.{key}"))
        return local

    def _outputs(self, label: str, output: Any, local: dict[str, str], result: str) -> None:
        if output is None or output == "":
            return
        if isinstance(output, str):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", output):
                self.add(label, f"`output` {output!r} is not a variable name")
                return
            self.env[output] = result
            return
        if not isinstance(output, dict):
            self.add(label, "`output` must be a variable name, or a mapping of variable names "
                            'to templates such as {"plots": "{output}"}')
            return
        scope = {**local, "output": result}
        written = {}
        for key, template in output.items():
            if not isinstance(template, str):
                self.add(label, f"`output.{key}` must be a template string such as \"{{output}}\"")
                continue
            written[key] = chain_templates.splice(
                template, self._lookup(scope, label, f"output.{key}"))
        self.env.update(written)

    def _text(self, label: str, node: dict[str, Any], key: str,
              required: bool = False) -> str | None:
        value = node.get(key)
        seed = _SEED_NAMES.get(key)           # the seed example's `systemPrompt`/`userPrompt`
        if seed is not None and seed in node:
            if value is not None:
                self.add(label, f"`{seed}` and `{key}` are the same field (`{key}` is the "
                                f"canonical name): keep one")
                return None
            value = node[seed]
            key = seed
        if value is None:
            if required:
                self.add(label, f"`{key}` is required")
            return None
        if not isinstance(value, str):
            self.add(label, f"`{key}` must be text")
            return None
        return value

    def _prompt(self, label: str, node: dict[str, Any], local: dict[str, str]) -> dict:
        config: dict[str, Any] = {}
        system = self._text(label, node, "system")
        user = self._text(label, node, "user", required=True)
        inputs: dict[str, str] = {}
        for key, text in (("system", system), ("user", user)):
            if text is None:
                continue
            for name in chain_templates.refs(text):
                inputs[name] = self._lookup(local, label, key)(name)
            for name in placeholders(chain_templates.to_prompt(text)):
                if name not in inputs:      # `{a.b}`: the llm block would look for it
                    self.add(label, f"`{key}` holds {{{name}}}, which is not a variable "
                                    f"name (letters, digits and _)")
        model = self._model(label, node)
        if model:
            config["model"] = model
        if system:
            config["system"] = chain_templates.to_prompt(system)
        config["prompt"] = chain_templates.to_prompt(user or "")
        for key, text in (("system", system), ("user", user)):
            if text and "${" in text:
                self.written[f"{self.block_id}.{key}"] = text
        config["inputs"] = inputs
        temperature = node.get("temperature")
        if temperature is not None:
            if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
                    or not 0 <= temperature <= 2:
                self.add(label, f"`temperature` must be a number from 0 to 2 (got "
                                f"{temperature!r})")
            else:
                config["temperature"] = temperature
        tokens = node.get("maxTokens", node.get("maxToken"))
        if tokens is not None:
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
                self.add(label, f"`maxTokens` must be a whole number of at least 1 (got "
                                f"{tokens!r})")
            else:
                config["max_tokens"] = tokens
        key = node.get("apiKey", node.get("apikey"))
        if isinstance(key, str) and key.strip():
            whole = chain_templates.REF_RE.fullmatch(key.strip())
            if stored_secret(key) is not None:
                # The user's stored secret: the run resolves it, and only here
                # (a credential field), so it reaches the provider and no record.
                config["api_key"] = f"{{{{secrets.{stored_secret(key)}}}}}"
            elif "{{" in key:
                self.add(label, "`apiKey` holds a template the chain cannot read: write a "
                                "variable reference such as \"{apiKey}\", or one of your "
                                "stored secrets as \"{{secrets.NAME}}\"")
            elif whole is None and self.literal_keys:
                # Run as given, never stored: the key becomes a run secret.
                config["api_key"] = f"{{{{secrets.{literal_key_name(self.index)}}}}}"
            elif whole is None:
                self.add(label, "`apiKey` must be a variable reference such as \"{apiKey}\" "
                                "(the key then arrives with the run's variables and is never "
                                "stored): a key written in a chain that is saved or imported "
                                "would be stored with it. Run the chain file itself "
                                "(`flowforge run agent.json`, POST /api/agent with the Agent), "
                                "where a written key is used as a run secret, or keep the key "
                                "as your secret and write \"{NAME}\"")
            else:
                config["api_key"] = f"{{{{secrets.{whole.group(1)}}}}}"
        elif key is not None and not isinstance(key, str):
            self.add(label, "`apiKey` must be a variable reference such as \"{apiKey}\"")
        return config

    def _model(self, label: str, node: dict[str, Any]) -> str | None:
        llm, model = node.get("llm"), node.get("model")
        if model is not None and not isinstance(model, str):
            self.add(label, "`model` must be text")
            return None
        if llm is None:
            if model and "/" not in model:
                self.add(label, f"`model` {model!r} names no provider: add `llm` (claude, "
                                f"replicate, or one of {', '.join(known_prefixes())})")
                return None
            return model or None
        provider = LLM_PROVIDERS.get(str(llm).lower(), str(llm).lower())
        if provider not in known_prefixes():
            self.add(label, f"unknown `llm` {llm!r}: write claude, replicate, or one of "
                            f"{', '.join(known_prefixes())}")
            return None
        if not model:
            self.add(label, f"`model` is required with `llm: {llm}`")
            return None
        return f"{provider}/{model}"

    def _parser(self, label: str, node: dict[str, Any], local: dict[str, str]) -> dict:
        parser = node.get("parser", "JSON")
        if str(parser).upper() != "JSON":
            self.add(label, f"unknown `parser` {parser!r}: only JSON exists")
        raw = self._text(label, node, "rawData", required=True)
        config: dict[str, Any] = {
            "text": chain_templates.splice(raw, self._lookup(local, label, "rawData"))
            if raw is not None else ""}
        schema = node.get("schema")
        if schema is not None:
            if not isinstance(schema, (str, dict)):
                self.add(label, "`schema` must be a string such as "
                                '\'{"character": "Array<String>"}\'')
            else:
                try:
                    notation_to_schema(schema)
                except NotationError as exc:
                    self.add(label, f"bad `schema` string: {exc}")
                else:
                    config["schema"] = schema
        return config

    def _event(self, label: str, node: dict[str, Any], local: dict[str, str]) -> dict:
        end_point = self._text(label, node, "endPoint", required=True) or ""
        method = str(node.get("method") or ("POST" if node.get("data") else "GET")).upper()
        if method not in _METHODS:
            self.add(label, f"unknown `method` {node.get('method')!r} (use {', '.join(_METHODS)})")
            method = "POST"
        stripped = end_point.strip()
        if stripped and not re.match(r"^(https?://|\$?\{)", stripped, re.IGNORECASE):
            if not self.base_url:
                self.add(label, f"`endPoint` {stripped!r} is relative: set "
                                f"{BASE_URL_VARIABLE} to the app it belongs to (`flowforge "
                                f"import --base-url`, `flowforge serve --chain-base-url`), or "
                                f"write the whole URL")
            else:
                stripped = self.base_url.rstrip("/") + "/" + stripped.lstrip("/")
        config: dict[str, Any] = {"method": method, "url": chain_templates.splice(
            stripped, self._lookup(local, label, "endPoint"))}
        data = node.get("data")
        lookup = self._lookup(local, label, "data")
        if isinstance(data, str) and data.strip():
            try:
                config["body"] = chain_templates.data_template(data, lookup)
            except ValueError as exc:
                self.add(label, str(exc))
        elif isinstance(data, (dict, list)):
            config["body"] = _fill_strings(data, lookup)
        elif data not in (None, ""):
            self.add(label, "`data` must be a JSON template string")
        return config

    def _return(self, label: str, node: dict[str, Any], block: dict[str, Any]) -> None:
        output = node.get("output")
        names = [output] if isinstance(output, str) else output
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            self.add(label, "`output` of a return node is the list of variable names to "
                            "return")
            names = []
        data = {}
        for name in names:
            if name in self.secrets:
                self.add(label, f"'{name}' holds an API key: a return node cannot return it")
            elif name in self.env:
                data[name] = self.env[name]
            else:
                self._lookup(self.env, label, "output")(name)
        block["type"] = "response"
        block["with"] = {"data": data}


def _fill_strings(value: Any, lookup: Any) -> Any:
    if isinstance(value, str):
        return chain_templates.splice(value, lookup)
    if isinstance(value, dict):
        return {key: _fill_strings(item, lookup) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill_strings(item, lookup) for item in value]
    return value
