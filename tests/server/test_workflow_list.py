"""The workflows list is one request (issue 27): each row carries what the
web app's list shows (description, the last run's status), so it no longer
fetches every workflow and its runs one by one."""

from __future__ import annotations

from tests.server.conftest import chain


async def test_the_list_carries_description_and_last_run_status(any_server):
    async with any_server.client("alice") as alice:
        saved = await alice.post("/api/workflows", json=chain("ran", description="Runs once"))
        assert saved.status_code == 201, saved.text
        await alice.post("/api/workflows", json=chain("idle"))
        ran = await alice.post("/api/workflows/ran/runs?wait=true", json={})
        assert ran.json()["status"] == "succeeded"
        listed = await alice.get("/api/workflows")
        assert listed.status_code == 200
        rows = {row["id"]: row for row in listed.json()["workflows"]}
        assert (rows["ran"]["description"], rows["ran"]["last_run_status"]) == \
            ("Runs once", "succeeded")
        assert (rows["idle"]["description"], rows["idle"]["last_run_status"]) == (None, None)
    async with any_server.client("bob") as bob:    # another owner's runs never show
        await bob.post("/api/workflows", json=chain("ran"))
        rows = (await bob.get("/api/workflows")).json()["workflows"]
        assert [(r["id"], r["last_run_status"]) for r in rows] == [("ran", None)]
