"""A server's runs get its own, tighter value limits (it shares its memory and
its event loop among its users): a doubling template fails where the CLI's
limit would still let it grow."""

from __future__ import annotations

from tests.server.conftest import start_server

DOUBLING = {"id": "doubling", "blocks": [
    {"id": "a0", "type": "set", "with": {"v": "y" * 1000}},
    *({"id": f"a{k}", "type": "set", "with": {"v": f"{{{{a{k - 1}.v}}}}{{{{a{k - 1}.v}}}}"}}
      for k in range(1, 16))]}


async def test_a_server_run_fails_at_the_servers_value_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}")
    try:
        async with live.client() as client:
            assert (await client.post("/api/workflows", json=DOUBLING)).status_code == 201
            body = (await client.post("/api/workflows/doubling/runs?wait=true", json={})).json()
    finally:
        await stop()
    failed = [bid for bid, block in body["blocks"].items() if block["status"] == "failed"]
    assert body["status"] == "failed" and failed == ["a12"]      # 4.1 MB over 4 MB
    assert "more than the limit of 4.0 MB (FLOWFORGE_MAX_VALUE_MB" in \
        body["blocks"]["a12"]["error"]


async def test_the_settings_raise_or_lower_it(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}", max_value_mb=0.5)
    try:
        async with live.client() as client:
            await client.post("/api/workflows", json=DOUBLING)
            body = (await client.post("/api/workflows/doubling/runs?wait=true", json={})).json()
    finally:
        await stop()
    assert [bid for bid, block in body["blocks"].items() if block["status"] == "failed"] == ["a9"]
