"""Each schemathesis finding of issue 23, replayed as an ordinary client:
every answer is one the API document declares for that operation."""

from __future__ import annotations


async def test_a_get_on_a_post_only_route_is_405_not_the_web_apps_404(server):
    async with server.client() as alice:
        document = (await alice.get("/openapi.json")).json()
        got = await alice.get("/api/validate")
        other = await alice.delete("/api/validate")
        page = await alice.get("/workflows/anything")
        missing = await alice.get("/api/no-such-route")
    assert got.status_code == 405 and got.headers["allow"] == "POST"
    assert "takes POST" in got.json()["error"]["message"]
    assert other.status_code == 405
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert missing.status_code == 404
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert "405" in operation["responses"], (method, path)
            assert path == "/health" or "429" in operation["responses"], (method, path)


async def test_an_empty_document_is_declared_and_answered(server):
    async with server.client() as alice:
        document = (await alice.get("/openapi.json")).json()
        answer = await alice.post("/api/validate", content=b"",
                                  headers={"Content-Type": "application/yaml"})
    assert document["paths"]["/api/validate"]["post"]["requestBody"]["required"] is False
    assert answer.status_code == 200 and answer.json()["valid"] is False
    assert "the document is empty" in answer.json()["problems"][0]["message"]


async def test_last_event_id_is_declared_as_the_sequence_number_it_must_be(server):
    async with server.client() as alice:
        document = (await alice.get("/openapi.json")).json()
    operation = document["paths"]["/api/runs/{run_id}/events"]["get"]
    header = next(p for p in operation["parameters"] if p["name"] == "last-event-id")
    assert header["schema"]["pattern"] == "^[0-9]{1,19}$"
