"""Prompt-chain Agent JSON <-> native workflow documents: the format `agent`.

Teams arrive with Agents written for a prompt-chain engine:

    {"id": "...", "name": "Movie script", "description": "...",
     "variables": {"script": "", "apiKey": ""},
     "promptChain": [{"type": "prompt", "name": "plots", "system": "...",
                      "user": "### ${script} ###", "apiKey": "{apiKey}", "llm": "claude",
                      "model": "claude-3-5-haiku-latest", "output": "plots"}, ...]}

There is no second engine: each node becomes one visible block of a native
workflow, run by the engine like any other.

| node   | block      | its `{output}`        |
| ------ | ---------- | --------------------- |
| prompt | `llm`      | `{{<id>.content}}`    |
| parser | `parser`   | `{{<id>.data}}`       |
| event  | `http`     | `{{<id>.data}}`       |
| return | `response` | `data`: the variables |

The chain's variables change as nodes write them; the importer follows them
node by node, so every `{name}` a node reads becomes the native template of
the value it holds at that point (`{{input.script}}` before any node wrote
it, `{{plots.content}}` after the node `plots` did).  Variables become the
workflow's `inputs` (their values the defaults: a run may set any of them);
a variable that a node's `apiKey` reads arrives as a *secret*
(`{{secrets.NAME}}`), so the key never enters the run's record; an `apiKey`
written `{{secrets.NAME}}` reads the user's stored secret NAME the same way.  A node's
`field` mapping names values for its own templates (`{entryPoint}` there is
the variable of the same name as the run received it); a mapping `output`
writes several variables, `{output}` being the node's own result.

Every problem is reported at once, located as `promptChain[2] 'characters'`
(the walk itself is `agent_json_import`); the way back, a workflow made only
of chain-shaped blocks as an Agent, is `workflow_to_agent`
(`agent_json_export`).  Both load on first use: the room asks `FORMAT.detect`
about documents that are mostly not Agents, and the converters import the
LLM blocks.
"""

from __future__ import annotations

import os
import re
from typing import Any

from flowforge.formats import agent_json_templates as chain_templates
from flowforge.formats.base import Imported, ImportReport, NodeReport

__all__ = ["is_agent", "agent_to_workflow", "workflow_to_agent", "key_variables", "key_values",
           "literal_key_name", "stored_secret", "secret_names", "BASE_URL_VARIABLE",
           "LLM_PROVIDERS", "NODE_FIELDS", "ID_PATTERN", "AgentFormat", "FORMAT"]

#: where a relative event `endPoint` is resolved when no base URL is given
BASE_URL_VARIABLE = "FLOWFORGE_CHAIN_BASE_URL"

#: a chain's `llm` value -> flowforge provider (every flowforge provider name also works)
LLM_PROVIDERS = {"claude": "anthropic", "replicate": "replicate"}

_COMMON = {"type", "name", "output", "id", "description"}
NODE_FIELDS: dict[str, set[str]] = {
    "prompt": _COMMON | {"system", "user", "systemPrompt", "userPrompt", "apiKey", "apikey",
                         "llm", "model", "temperature", "maxTokens", "maxToken", "field"},
    "parser": _COMMON | {"rawData", "parser", "schema", "field"},
    "event": _COMMON | {"endPoint", "method", "data", "field", "param", "params"},
    "return": _COMMON,
}
#: what a chain's id must look like to be kept as the workflow id
ID_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
#: an `apiKey` naming one of the user's stored secrets, as native documents do
_SECRET_KEY_RE = re.compile(r"\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
#: any `{{secrets.NAME}}` a workflow reads
_SECRET_RE = re.compile(r"\{\{\s*secrets\.([A-Za-z0-9_\-]+)\s*\}\}")


def stored_secret(key: str) -> str | None:
    """The secret an `apiKey` of `{{secrets.NAME}}` names: NAME, else None."""
    whole = _SECRET_KEY_RE.fullmatch(key.strip())
    return whole.group(1) if whole else None


def is_agent(data: Any) -> bool:
    """True for a prompt-chain Agent definition (a mapping with `promptChain`)."""
    return isinstance(data, dict) and "promptChain" in data


def agent_to_workflow(agent: dict[str, Any], *, base_url: str | None = None,
                      source: str | None = None, literal_keys: bool = False) -> dict[str, Any]:
    """The native workflow document (plain data) equivalent to `agent`.

    `base_url` resolves relative event endpoints (default: the environment's
    FLOWFORGE_CHAIN_BASE_URL).  `literal_keys`: a key written as text in a
    node's `apiKey` (the seed allows it) is read as the run secret
    `apiKey_node<N>` (`key_values` gives its value, for the caller to pass as a
    run secret: masked everywhere, never stored); only a caller that runs the
    Agent it was given, and stores nothing, sets it.  Raises ValidationFailed
    listing every problem."""
    from flowforge.formats.agent_json_import import AgentImporter

    if base_url is None:
        base_url = os.environ.get(BASE_URL_VARIABLE) or None
    return AgentImporter(agent, base_url, source, literal_keys).convert()


def workflow_to_agent(document: Any) -> dict[str, Any]:
    """The Agent definition of a workflow (plain data, a Workflow or a compiled
    one); ValidationFailed lists every block a chain cannot express."""
    from flowforge.formats.agent_json_export import workflow_to_agent as export

    return export(document)


def literal_key_name(index: int) -> str:
    """The run secret that holds the key written as text in node `index`."""
    return f"apiKey_node{index + 1}"


def key_variables(nodes: Any) -> set[str]:
    """The variables that the nodes' `apiKey` templates read (API keys)."""
    names = set()
    for node in nodes if isinstance(nodes, list) else []:
        key = node.get("apiKey", node.get("apikey")) if isinstance(node, dict) else None
        if isinstance(key, str):
            whole = chain_templates.REF_RE.fullmatch(key.strip())
            if whole:
                names.add(whole.group(1))
    return names


def key_values(agent: Any) -> dict[str, str]:
    """The API keys written in an Agent: in its own `variables`, and as text in a
    node's `apiKey` (under `literal_key_name`); the importer leaves them out of
    the workflow, and a run passes them as secrets."""
    if not is_agent(agent):
        return {}
    found: dict[str, str] = {}
    chain = agent.get("promptChain")
    for index, node in enumerate(chain if isinstance(chain, list) else []):
        key = node.get("apiKey", node.get("apikey")) if isinstance(node, dict) else None
        if isinstance(key, str) and key.strip() and stored_secret(key) is None and \
                chain_templates.REF_RE.fullmatch(key.strip()) is None:
            found[literal_key_name(index)] = key.strip()
    if isinstance(agent.get("variables"), dict):
        names = key_variables(chain)
        found.update({name: str(value) for name, value in agent["variables"].items()
                      if name in names and isinstance(value, str) and value})
    return found


def secret_names(document: Any) -> set[str]:
    """The names a workflow reads as `{{secrets.NAME}}` (a Workflow, a compiled
    one or plain data): an Agent's API-key variables."""
    doc = getattr(document, "doc", document)
    blocks = doc.get("blocks", []) if isinstance(doc, dict) else \
        [spec.with_ for _, spec in doc.iter_blocks()]
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.update(_SECRET_RE.findall(value))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(blocks)
    return found


#: chain node type -> the block it becomes
_BECOMES = {"prompt": "llm", "parser": "parser", "event": "http", "return": "response"}


class AgentFormat:
    """Prompt-chain Agent JSON as a format of the room: every node type has a
    counterpart (an unknown one makes the file broken: ValidationFailed)."""

    name = "agent"
    title = "Agent JSON (prompt chain)"

    def detect(self, data: Any) -> bool:
        return is_agent(data)

    def convert(self, data: Any, *, source: str, base_url: str | None = None,
                literal_keys: bool = False) -> Imported:
        """`base_url` and `literal_keys` as `agent_to_workflow` takes them (the
        room passes them from its `options`)."""
        document = agent_to_workflow(data, base_url=base_url, source=source,
                                     literal_keys=literal_keys)
        chain = data["promptChain"]
        nodes = [NodeReport(block["id"], str(node.get("name") or ""), str(node["type"]).lower(),
                            block["type"])
                 for node, block in zip(chain, document["blocks"])]
        report = ImportReport(self.name, nodes)
        keys = sorted(key_variables(chain))
        if keys:
            report.notes.append(f"variable(s) {', '.join(keys)} hold API keys: a run takes "
                                f"them as secrets (never stored, never in inputs)")
        written = sorted(set(key_values(data)) - set(keys))
        if literal_keys and written:
            report.notes.append(f"keys written as text in nodes are read as the run "
                                f"secret(s) {', '.join(written)}")
        return Imported(document, report)


FORMAT = AgentFormat()
