"""Every status a client meets on the ordinary paths is one the OpenAPI
document declares for that operation (issue 16): generated clients and the
schema fuzzer trust the document, so a 201 or a 409 it does not list is a
bug even when the answer itself is right.  The fuzzer in the suite reaches
few of these paths (its ids mostly answer 404), so they are walked here."""

from __future__ import annotations

from typing import Any

from tests.server.conftest import chain


async def test_statuses_of_real_requests_are_declared(server):
    async with server.client(None) as anonymous:
        document = (await anonymous.get("/openapi.json")).json()
        seen: list[tuple[str, str, int]] = []

        async def call(client: Any, method: str, template: str, *, params: dict | None = None,
                       **kwargs: Any) -> Any:
            path = template.format(**(params or {}))
            response = await client.request(method, path, **kwargs)
            seen.append((method.lower(), template, response.status_code))
            return response

        async with server.client() as alice:
            await call(anonymous, "GET", "/api/runs")                                   # 401
            await call(alice, "PUT", "/api/workflows/{workflow_id}",
                       params={"workflow_id": "chain"}, json=chain(count=1, seconds=0))  # 201
            await call(alice, "PUT", "/api/workflows/{workflow_id}",
                       params={"workflow_id": "chain"}, json=chain(count=1, seconds=0))  # 200
            await call(alice, "POST", "/api/workflows", json=chain("other", count=1))   # 201
            await call(alice, "PUT", "/api/workflows/{workflow_id}",
                       params={"workflow_id": "nope"}, json=chain(count=1))             # 422
            await call(alice, "GET", "/api/workflows/{workflow_id}",
                       params={"workflow_id": "chain"})                                  # 200
            await call(alice, "GET", "/api/workflows/{workflow_id}",
                       params={"workflow_id": "missing"})                                # 404
            ran = await call(alice, "POST", "/api/workflows/{workflow_id}/runs",
                             params={"workflow_id": "chain"}, json={})                    # 202
            run_id = ran.json()["run_id"]
            await call(alice, "POST", "/api/workflows/{workflow_id}/runs?wait=true",
                       params={"workflow_id": "chain"}, json={})                         # 200
            await call(alice, "POST", "/api/workflows/{workflow_id}/runs",
                       params={"workflow_id": "chain"},
                       json={"webhook": "http://[x"})                                    # 422
            for body in ({}, {}, {"inputs": {"word": "other"}}):          # 202, 200, 422
                await call(alice, "POST", "/api/workflows/{workflow_id}/runs",
                           params={"workflow_id": "chain"}, json=body,
                           headers={"Idempotency-Key": "declared"})
            await call(alice, "POST", "/api/workflows/{workflow_id}/runs",
                       params={"workflow_id": "chain"}, json={},
                       headers={"Idempotency-Key": ""})                                  # 400
            await call(alice, "GET", "/api/runs/{run_id}", params={"run_id": run_id})
            await call(alice, "GET", "/api/runs?offset=9223372036854775808")            # 422
            finished = await call(alice, "GET", "/api/runs/{run_id}/events",
                                  params={"run_id": run_id},
                                  headers={"Accept": "application/json"})
            assert finished.status_code == 200
            await call(alice, "GET", "/api/runs/{run_id}/events",
                       params={"run_id": run_id},
                       headers={"Accept": "application/json",
                                "Last-Event-ID": str(2**63)})                            # 400
            await call(alice, "POST", "/api/runs/{run_id}/cancel",
                       params={"run_id": run_id})                                        # 409
            await call(alice, "GET", "/api/users")                                      # 403
            await call(alice, "DELETE", "/api/workflows/{workflow_id}",
                       params={"workflow_id": "chain"})                                  # 204
            await call(alice, "POST", "/api/workflows", content=b"<x/>",
                       headers={"Content-Type": "application/xml"})                      # 415

    undeclared = []
    for method, template, status in seen:
        route = template.split("?")[0]
        declared = document["paths"][route][method]["responses"]
        if str(status) not in declared:
            undeclared.append(f"{method.upper()} {template} answered {status}, declared "
                              f"{sorted(declared)}")
    assert not undeclared, "\n".join(undeclared)
    statuses = {status for _, _, status in seen}
    assert {200, 201, 202, 204, 400, 401, 403, 404, 409, 415, 422} <= statuses, statuses
    assert not any(status >= 500 for status in statuses), seen
