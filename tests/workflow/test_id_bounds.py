"""Ids are bounded (issue 41): a workflow id or a block id longer than 128
characters is a located validation error, in `flowforge validate`, in
`load()`, and on the server's routes that take an id in the path."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.errors import ValidationFailed
from flowforge.workflow.model import MAX_ID_LENGTH
from tests.server.conftest import start_server


def doc(workflow_id: str = "ok", block_id: str = "b") -> dict:
    return {"id": workflow_id, "blocks": [{"id": block_id, "type": "set", "with": {"a": 1}}]}


@pytest.mark.parametrize("where, document", [
    ("id", doc(workflow_id="w" * 5000)),
    ("blocks[0].id", doc(block_id="b" * (MAX_ID_LENGTH + 1))),
])
def test_an_overlong_id_is_a_located_problem(where, document):
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load(document)
    problems = [str(p) for p in caught.value.problems]
    assert len(problems) == 1 and problems[0].startswith(f"{where}: too long: "), problems
    assert f"at most {MAX_ID_LENGTH}" in problems[0]
    assert "w" * 200 not in str(caught.value)          # the value is not echoed back


def test_an_id_at_the_bound_is_fine():
    assert flowforge.load(doc("w" * MAX_ID_LENGTH, "b" * MAX_ID_LENGTH)).id == "w" * 128


async def test_the_workflow_routes_refuse_or_do_not_find_an_overlong_id(tmp_path):
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}")
    long_id = "w" * 5000
    try:
        async with live.client("admin") as admin:
            put = await admin.put(f"/api/workflows/{long_id}", json=doc(long_id))
            assert put.status_code == 422, put.text
            assert "too long: 5000 characters, at most 128" in put.text
            assert long_id not in put.text
            for answer in (await admin.get(f"/api/workflows/{long_id}"),
                           await admin.post(f"/api/workflows/{long_id}/runs", json={}),
                           await admin.get(f"/api/workflows/{long_id}/versions"),
                           await admin.delete(f"/api/workflows/{long_id}")):
                assert answer.status_code in (404, 422), answer.text
    finally:
        await stop()
