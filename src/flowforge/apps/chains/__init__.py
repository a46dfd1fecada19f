"""Prompt-chain agents on the one engine.

An Agent definition (`variables` + `promptChain` of prompt, parser, event
and return nodes) is converted into a native workflow (`importer`), run by
the engine like any workflow, and a workflow made only of chain-shaped
blocks converts back (`exporter`).  `load()` and `flowforge run` accept an
Agent file directly through `workflow_data_if_agent`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from flowforge.lazy import lazy_attributes

__all__ = ["agent_to_workflow", "workflow_to_agent", "is_agent", "workflow_data_if_agent",
           "split_variables", "secret_names", "agent_keys", "key_values", "BASE_URL_VARIABLE",
           "LLM_PROVIDERS"]

# The converters import the LLM blocks; `load()` and `flowforge run` ask this
# package about every file they load, and most are not Agents: the converters
# are imported when first used (PEP 562), not with the package.
_LAZY = {"agent_to_workflow": "importer", "is_agent": "importer", "key_values": "importer",
         "BASE_URL_VARIABLE": "importer", "LLM_PROVIDERS": "importer",
         "workflow_to_agent": "exporter"}

__getattr__ = lazy_attributes(__name__, _LAZY)

_SECRET_RE = re.compile(r"\{\{\s*secrets\.([A-Za-z0-9_\-]+)\s*\}\}")
_SUFFIXES = (".json", ".yaml", ".yml")


def _agent_data(target: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(the Agent, its source) for an Agent given as a dict or a JSON/YAML
    file; (None, None) for anything else."""
    data = target
    source = None
    if isinstance(target, (str, Path)):
        path = Path(target)
        if path.suffix.lower() not in _SUFFIXES or not path.is_file():
            return None, None
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None, None             # the workflow loader reports it properly
        if "promptChain" not in text:
            return None, None
        from flowforge.workflow.loader import parse_text

        data = parse_text(text, str(path))
        source = str(path)
    from flowforge.apps.chains.importer import is_agent

    return (data, source) if is_agent(data) else (None, None)


def workflow_data_if_agent(target: Any) -> dict[str, Any] | None:
    """The workflow document for an Agent given as a dict or a JSON/YAML file;
    None for anything else (so `load()` and `flowforge run` take both)."""
    agent, source = _agent_data(target)
    # load() and `flowforge run` run the Agent as given, on the caller's own
    # machine: a key written in it is used as a run secret (`agent_keys`).
    if agent is None:
        return None
    from flowforge.apps.chains.importer import agent_to_workflow

    return agent_to_workflow(agent, source=source, literal_keys=True)


def agent_keys(target: Any) -> dict[str, str]:
    """API keys written in an Agent's own `variables` (a dict or a file): the
    workflow leaves them out, and a run of the file passes them as secrets."""
    agent, _ = _agent_data(target)
    if agent is None:
        return {}
    from flowforge.apps.chains.importer import key_values

    return key_values(agent)


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


def split_variables(document: Any, variables: dict[str, Any] | None
                    ) -> tuple[dict[str, Any], dict[str, str]]:
    """An Agent run's variables as (inputs, secrets): the variables the
    workflow reads as secrets (API keys) go apart, so they never reach the
    run's record; the rest are inputs."""
    secret = secret_names(document)
    inputs: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    for name, value in (variables or {}).items():
        if name in secret:
            secrets[name] = "" if value is None else str(value)
        else:
            inputs[name] = value
    return inputs, secrets
