"""The public API is what `__all__` says, and every name in it exists."""

from __future__ import annotations

import importlib

import pytest

import flowforge

PACKAGES = ["flowforge", "flowforge.workflow", "flowforge.engine", "flowforge.blocks",
            "flowforge.providers", "flowforge.storage", "flowforge.service", "flowforge.tools",
            "flowforge.errors", "flowforge.apps.chains", "flowforge.knowledge",
            "flowforge.service.pool", "flowforge.lazy", "flowforge.tls", "flowforge.formats",
            "flowforge.formats.agent_json", "flowforge.formats.pipeline_json", "flowforge.hints"]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_names_exist(name):
    module = importlib.import_module(name)
    missing = [item for item in module.__all__ if not hasattr(module, item)]
    assert missing == []


def test_a_lazily_exported_name_is_its_module_s_and_an_unknown_one_is_named():
    from flowforge import knowledge
    from flowforge.knowledge import store

    assert knowledge.default_knowledge_url is store.default_knowledge_url
    with pytest.raises(AttributeError, match="'flowforge.knowledge' has no attribute 'nope'"):
        knowledge.nope


def test_the_chains_app_names_the_agent_format_s_converters():
    from flowforge.apps import chains
    from flowforge.formats import agent_json

    assert chains.agent_to_workflow is agent_json.agent_to_workflow
    assert chains.workflow_to_agent is agent_json.workflow_to_agent


def test_top_level_api():
    assert set(flowforge.__all__) >= {"load", "run", "run_sync", "function", "RunResult",
                                      "resume", "start_run", "WorkflowError", "ValidationFailed"}
    public = {n for n in dir(flowforge) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(flowforge, n)).__name__ == "module"}
    assert public - modules - set(flowforge.__all__) == set()


def test_error_tree_matches_its_drawing():
    from flowforge import errors

    assert issubclass(errors.ValidationFailed, errors.WorkflowError)
    assert issubclass(errors.BlockTimeout, errors.BlockError)
    assert issubclass(errors.MissingCredentials, errors.ProviderError)
    assert issubclass(errors.ProviderError, errors.RunError)
    assert not issubclass(errors.InputError, errors.WorkflowError)
    assert issubclass(errors.CapabilityDenied, errors.FlowforgeError)
    assert "CapabilityDenied          a document asks" in errors.__doc__
    assert "MissingCredentials  says which environment variable" in errors.__doc__
