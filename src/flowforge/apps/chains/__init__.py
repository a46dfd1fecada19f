"""Prompt-chain agents on the one engine.

An Agent definition (`variables` + `promptChain` of prompt, parser, event
and return nodes) is a format of the formats room
(`flowforge.formats.agent_json`: converted into a native workflow, and a
workflow made only of chain-shaped blocks converted back), run by the engine
like any workflow.  What is left here is the application's: running an
Agent file as given (`agent_keys`: keys written in it become run secrets)
and splitting a run's variables into inputs and secrets.  The converters'
names are re-exported for callers that know them from here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flowforge.formats.agent_json import (BASE_URL_VARIABLE, LLM_PROVIDERS, agent_to_workflow,
                                          is_agent, key_values, secret_names, workflow_to_agent)

__all__ = ["agent_to_workflow", "workflow_to_agent", "is_agent", "workflow_data_if_agent",
           "split_variables", "secret_names", "agent_keys", "key_values", "BASE_URL_VARIABLE",
           "LLM_PROVIDERS"]

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
    return (data, source) if is_agent(data) else (None, None)


def workflow_data_if_agent(target: Any) -> dict[str, Any] | None:
    """The workflow document for an Agent given as a dict or a JSON/YAML file,
    as a run of that very file reads it (a key written in it is a run secret:
    `agent_keys`); None for anything else.  (`load()` reaches Agents through
    the formats room, with the same options.)"""
    agent, source = _agent_data(target)
    if agent is None:
        return None
    return agent_to_workflow(agent, source=source, literal_keys=True)


def agent_keys(target: Any) -> dict[str, str]:
    """API keys written in an Agent's own `variables` (a dict or a file): the
    workflow leaves them out, and a run of the file passes them as secrets."""
    agent, _ = _agent_data(target)
    if agent is None:
        return {}
    return key_values(agent)


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
