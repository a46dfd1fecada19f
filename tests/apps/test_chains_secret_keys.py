"""A prompt-chain node's `apiKey` may name one of the user's stored secrets,
`{{secrets.NAME}}` (issue 41): it used to be sent to the provider as that
literal text (a run of the file) or refused with advice that did not
mention it (an import).  The provider now gets the secret's value, and the
value appears in no result, event or stored record."""

from __future__ import annotations

import json

import httpx2
import pytest
from cryptography.fernet import Fernet

import flowforge
from flowforge.apps.chains import agent_to_workflow, agent_keys
from flowforge.errors import ValidationFailed
from flowforge.providers import base, resolve
from flowforge.providers.resolve import clear_provider_cache
from flowforge.service.secrets import set_secret
from flowforge.storage import storage_from_url

KEY = "sk-stored-team-key-4d2f9a"
AGENT = {"id": "keyed", "variables": {"topic": "refunds"}, "promptChain": [
    {"type": "prompt", "name": "ask", "user": "Write about {topic}",
     "apiKey": "{{ secrets.TEAM_OPENAI }}", "llm": "openai", "model": "gpt-4o",
     "output": "answer"},
    {"type": "return", "name": "done", "output": ["answer"]}]}


@pytest.fixture
def openai_seen(monkeypatch):
    """`openai/...` through the real SDK onto a MockTransport: the Authorization
    header of every request."""
    from flowforge.providers import openai as openai_provider
    seen: list[str] = []

    def handle(request):
        seen.append(request.headers.get("authorization", ""))
        return httpx2.Response(200, json={
            "id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Refunds take 5 days."}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}})

    monkeypatch.setattr(base, "ALLOW_MODEL_REQUESTS", True)
    monkeypatch.setitem(resolve._FACTORIES, "openai", lambda name, options:
                        openai_provider._factory(name, options, http_client=httpx2.AsyncClient(
                            transport=httpx2.MockTransport(handle))))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-shared-default")
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY", Fernet.generate_key().decode())
    clear_provider_cache()
    yield seen
    clear_provider_cache()


@pytest.mark.parametrize("literal_keys", [True, False], ids=["run-the-file", "import"])
def test_the_api_key_reads_the_stored_secret(literal_keys):
    document = agent_to_workflow(AGENT, literal_keys=literal_keys)
    assert document["blocks"][0]["with"]["api_key"] == "{{secrets.TEAM_OPENAI}}"
    assert agent_keys(AGENT) == {}             # not a key written as text


async def test_the_provider_gets_the_secret_and_no_record_holds_it(openai_seen, tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with storage_from_url(url) as storage:
        await set_secret(storage, "ann", "TEAM_OPENAI", KEY)
    result = await flowforge.run(flowforge.load(AGENT), {}, user="ann", storage=url)
    assert result.status == "succeeded", result.error
    assert openai_seen == [f"Bearer {KEY}"]
    assert result.outputs["done"]["data"] == {"answer": "Refunds take 5 days."}
    async with storage_from_url(url) as storage:
        stored = [await storage.get_run(result.run_id), await storage.get_events(result.run_id)]
    for record in (result.to_dict(), stored):
        text = json.dumps(record, default=str)
        assert KEY not in text and "sk-stored" not in text


def test_another_template_in_api_key_is_refused_with_the_ways_that_work():
    agent = json.loads(json.dumps(AGENT))
    agent["promptChain"][0]["apiKey"] = "{{env.OPENAI_API_KEY}}"
    with pytest.raises(ValidationFailed) as caught:
        agent_to_workflow(agent, literal_keys=True)
    message = str(caught.value)
    assert "promptChain[0] 'ask': `apiKey` holds a template the chain cannot read" in message
    assert '"{apiKey}"' in message and '"{{secrets.NAME}}"' in message
