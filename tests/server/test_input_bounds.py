"""Client input the server must answer with a 4xx naming the field, never a
500 (issue 17): integers past 64 bits, malformed webhook URLs, retry counts,
lone surrogates, deep nesting."""

from __future__ import annotations

import pytest

from tests.server.conftest import chain

BIG = 2 ** 63


async def test_integers_past_64_bits_are_refused(server):
    async with server.client() as client:
        await client.post("/api/workflows", json=chain("c", count=1))
        for path in (f"/api/runs?offset={BIG}", f"/api/workflows?offset={BIG}",
                     f"/api/workflows/c?version={BIG}", f"/api/executions?offset={BIG}"):
            answer = await client.get(path)
            assert answer.status_code == 422, (path, answer.text)
            assert "less than or equal" in answer.text
        assert (await client.get(f"/api/runs?offset={BIG - 1}")).status_code == 200
        run = (await client.post("/api/workflows/c/runs?wait=true", json={})).json()
        after = await client.get(f"/api/runs/{run['run_id']}/events?after={BIG}")
        assert after.status_code == 422
        header = await client.get(f"/api/runs/{run['run_id']}/events",
                                  headers={"Last-Event-ID": str(BIG * 4)})
        assert header.status_code == 400 and "Last-Event-ID" in header.text
        pinned = await client.post("/api/workflows/c/runs", json={"version": BIG})
        assert pinned.status_code == 422 and "version" in pinned.text


@pytest.mark.parametrize("url", ["http://\u0080", "http://[x", "http://host:99999/"])
async def test_malformed_webhook_urls_are_a_422_naming_the_field(server, url):
    async with server.client() as client:
        await client.post("/api/workflows", json=chain("c", count=1))
        answer = await client.post("/api/workflows/c/runs", json={"webhook": url})
        saved = await client.post("/api/workflows", json=chain("d", count=1, webhook=url))
    assert answer.status_code == 422 and "webhook" in answer.text and "malformed" in answer.text
    assert saved.status_code == 422 and "webhook" in saved.text


async def test_retry_beyond_100_is_located(server):
    document = {"id": "r", "blocks": [{"id": "a", "type": "set", "retry": 1000,
                                       "with": {"v": 1}}]}
    async with server.client() as client:
        answer = await client.post("/api/workflows", json=document)
    assert answer.status_code == 422
    assert answer.json()["error"]["details"][0]["where"] == "blocks[0].retry"


async def test_lone_surrogates_and_deep_nesting_are_refused(server):
    async with server.client() as client:
        await client.post("/api/workflows", json=chain("c", count=1))
        headers = {"Content-Type": "application/json"}
        lone = await client.post("/api/workflows/c/runs", headers=headers,
                                 content=b'{"inputs": {"word": "\\ud800"}}')
        paired = await client.post("/api/workflows/c/runs?wait=true", headers=headers,
                                   content=b'{"inputs": {"word": "\\ud83d\\ude00"}}')
        deep = await client.post("/api/workflows/c/runs", headers=headers,
                                 content=b'{"inputs": ' + b"[" * 3000 + b"]" * 3000 + b"}")
        yaml_doc = await client.post("/api/workflows", content="id: s\nblocks: [{id: a, "
                                     "type: set, with: {t: \"\\ud800\"}}]\n".encode(),
                                     headers={"Content-Type": "application/yaml"})
    assert lone.status_code == 422 and "lone surrogate" in lone.text
    assert paired.status_code in (200, 201, 202) and paired.json()["status"] == "succeeded"
    assert deep.status_code == 400 and "nested deeper than 100" in deep.text
    assert yaml_doc.status_code == 400 and "blocks[0].with.t" in yaml_doc.text
