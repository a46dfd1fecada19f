"""`/manual/<path>` and `/assets/<name>` answer 404 for any path that names no
file they serve, however malformed (a NUL byte, a name too long for the file
system, a path leaving the folder): never a 500 (issue 41; one guard,
`server/served_files.py`, for both)."""

from __future__ import annotations

import httpx
import pytest

from flowforge.server import manual_pages, webui
from flowforge.server.app import create_app


@pytest.fixture
async def client(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "guide").mkdir(parents=True)
    (site / "index.html").write_text("<title>flowforge manual</title>front")
    (site / "guide" / "index.html").write_text("guide")
    monkeypatch.setattr(manual_pages, "MANUAL", site)
    transport = httpx.ASGITransport(app=create_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


MALFORMED = [
    "/manual/%00", "/manual/guide/%00", "/manual/a%00b.html", "/manual/" + "x" * 5000,
    "/manual/" + "/".join(["y" * 250] * 30), "/manual/%ff%fe.html",
    "/manual/..%2F..%2F..%2Fetc%2Fpasswd", "/manual/%2e%2e/%2e%2e/app.py",
]
IDS = ["nul", "nul-in-folder", "nul-in-name", "long-name", "long-path", "not-utf8",
       "escape", "dots"]


@pytest.mark.parametrize("path", MALFORMED, ids=IDS)
async def test_a_malformed_manual_path_is_not_found(client, path):
    answer = await client.get(path)
    assert answer.status_code == 404, (path, answer.status_code, answer.text[:200])
    assert "No such page in the manual" in answer.text


async def test_real_pages_are_still_served(client):
    assert (await client.get("/manual/")).text.endswith("front")
    assert (await client.get("/manual/guide/")).text == "guide"


@pytest.mark.parametrize("path", MALFORMED, ids=IDS)
async def test_a_malformed_asset_name_is_not_found(client, path):
    answer = await client.get(path.replace("/manual/", "/assets/", 1))
    assert answer.status_code == 404, (path, answer.status_code, answer.text[:200])
    assert answer.json()["error"]["code"] == "not_found"
    assert len(answer.text) < 500                # a 5,000-character name is not echoed


async def test_real_assets_are_still_served(client):
    name = next(p.name for p in (webui.STATIC / "assets").iterdir() if p.suffix == ".js")
    answer = await client.get(f"/assets/{name}", headers={"Accept-Encoding": "identity"})
    assert answer.status_code == 200 and answer.content == \
        (webui.STATIC / "assets" / name).read_bytes()
