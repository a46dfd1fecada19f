"""The policy gate (issue 23): one `Policy` decides, for a user, whether a
model name, a knowledge-base id, a workflow reference or a file may be used.
Each rule is checked on the hostile values users sent, and on what the same
user may do once granted (or on the local, trusted user)."""

from __future__ import annotations

import pytest

from flowforge.errors import CapabilityDenied
from flowforge.providers.base import is_loopback_url
from flowforge.workflow.policy import LOOPBACK_SERVERS, TRUSTED, Policy

NOBODY = Policy(subject="mallory")


def _refused(call, *args, **kwargs) -> CapabilityDenied:
    with pytest.raises(CapabilityDenied) as caught:
        call(*args, **kwargs)
    return caught.value


@pytest.mark.parametrize("model, capability", [
    ("scripted//etc/passwd", "server_files"),
    ("scripted/rules.yaml", "server_files"),
    ("local//var/lib/models/x.gguf", "server_files"),
    ("local/../x.gguf", "server_files"),
    ("openai-compatible/ollama/llama3.2", "private_network"),
    ("openai-compatible/vllm/Qwen", "private_network"),
    ("openai-compatible/llamacpp/m", "private_network"),
    ("openai-compatible/lmstudio/m", "private_network"),
])
def test_a_model_that_reaches_the_host_needs_its_capability(model, capability, monkeypatch):
    monkeypatch.delenv("OPENAI_COMPATIBLE_OLLAMA_BASE_URL", raising=False)
    refused = _refused(NOBODY.check_model, model, "body.model")
    assert refused.capabilities == [capability]
    assert refused.problems[0].where == "body.model"
    assert f"flowforge users grant mallory {capability}" in str(refused)
    Policy([capability], subject="mallory", shared_keys=True).check_model(model)
    TRUSTED.check_model(model)


def test_a_loopback_preset_the_administrator_configured_is_not_the_users_choice(monkeypatch):
    monkeypatch.setenv("OPENAI_COMPATIBLE_OLLAMA_BASE_URL", "http://10.1.2.3:11434/v1")
    NOBODY.check_model("openai-compatible/ollama/llama3.2")


def test_every_loopback_preset_is_gated():
    # imports the vendor SDK: in the test that needs it, not in every worker's collection
    from flowforge.providers.openai_compatible import PRESETS

    loopback = {name for name, preset in PRESETS.items() if is_loopback_url(preset.base_url)}
    assert loopback == set(LOOPBACK_SERVERS)


@pytest.mark.parametrize("model, key", [
    ("openai/gpt-4o", "OPENAI_API_KEY"), ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ("google/gemini-2.5-flash", "GOOGLE_API_KEY"), ("replicate/meta/llama", "REPLICATE_API_TOKEN"),
    ("openai-compatible/openrouter/x", "OPENROUTER_API_KEY"),
])
def test_a_hosted_model_is_paid_with_the_users_key_or_shared_ones(model, key):
    refused = _refused(NOBODY.check_model, model, "model")
    assert "--share-provider-keys" in str(refused) and "secret" in str(refused)
    Policy(subject="mallory", own_keys={key}).check_model(model)
    Policy(subject="mallory", shared_keys=True).check_model(model)
    NOBODY.check_model(model, own_key=True)           # a block's own `api_key`
    TRUSTED.check_model(model)


@pytest.mark.parametrize("model", ["local/smollm2", "{{input.model}}",
                                   "openai-compatible/mybox/m"])
def test_models_that_reach_nothing_pass(model):
    NOBODY.check_model(model)


@pytest.mark.parametrize("kb_id", [".", "..", "../etc", "~/notes", "docs/", "/srv",
                                   "shared/..", "shared/../x", "shared/a/b"])
def test_a_knowledge_base_id_that_is_a_folder_needs_server_files(kb_id):
    assert _refused(NOBODY.check_kb_id, kb_id).capabilities == ["server_files"]
    Policy(["server_files"]).check_kb_id(kb_id)


def test_plain_names_are_knowledge_bases_and_workflow_ids():
    NOBODY.check_kb_id("policies")
    NOBODY.check_kb_id("faq.json")                # a base's name, never opened as a file
    NOBODY.check_kb_id("shared/policies")         # the shared base, by name
    NOBODY.check_workflow_ref("support-desk")
    NOBODY.check_workflow_ref("support-desk@3")


@pytest.mark.parametrize("reference", ["../other.yaml", "/etc/flow.json", "sub/flow"])
def test_a_workflow_reference_that_is_a_path_needs_server_files(reference):
    refused = _refused(NOBODY.check_workflow_ref, reference, "with.workflow")
    assert refused.capabilities == ["server_files"] and reference in str(refused)


def test_reading_a_server_file_needs_server_files():
    assert _refused(NOBODY.check_file, "/etc/passwd").capabilities == ["server_files"]
    TRUSTED.check_file("/etc/passwd")
