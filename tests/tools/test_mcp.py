"""MCP tools from a real third-party server (`mcp-server-time` from PyPI),
started over stdio, discovered at run time, called by a scripted model."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest

from flowforge.errors import ToolError
from flowforge.tools.mcp_client import McpServer, open_mcp_tools
from flowforge.tools.spec import ToolContext

from ..blocks_llm.helpers import events, requests, run_blocks, scripted, statuses

TIME_SERVER = {"command": "python", "args": ["-m", "mcp_server_time",
                                              "--local-timezone", "UTC"]}


async def test_tools_are_discovered_and_called_directly():
    async with AsyncExitStack() as stack:
        tools = await open_mcp_tools(McpServer(**TIME_SERVER, prefix="time_"), stack)
        by_name = {tool.name: tool for tool in tools}
        assert {"time_get_current_time", "time_convert_time"} <= set(by_name)
        schema = by_name["time_convert_time"].parameters
        assert set(schema["required"]) == {"source_timezone", "time", "target_timezone"}
        converted = await by_name["time_convert_time"].execute(
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            ToolContext())
        assert converted["target"]["datetime"].startswith(converted["source"]["datetime"][:10]) \
            or converted["target"]["datetime"][11:16] == "21:00"
        assert converted["target"]["datetime"][11:16] == "21:00"
        with pytest.raises(ToolError, match="MCP tool 'get_current_time' failed"):
            await by_name["time_get_current_time"].execute({"timezone": "Not/AZone"},
                                                           ToolContext())


async def test_agent_calls_an_mcp_tool_and_gets_the_result():
    def script(messages, tools):
        if messages[-1].role == "user":
            assert {t.name for t in tools} >= {"convert_time", "get_current_time"}
            return {"tool_calls": [{"name": "convert_time", "arguments": {
                "source_timezone": "Europe/London", "time": "09:30",
                "target_timezone": "America/New_York"}}]}
        return f"Converted: {messages[-1].content}"

    with scripted(script) as model:
        result = await run_blocks([{"id": "agent", "type": "agent", "with": {
            "prompt": "What is 09:30 London time in New York?", "model": model,
            "tools": [{"mcp": TIME_SERVER}]}}])
    assert statuses(result) == {"agent": "succeeded"}, result.error
    call = result.results["agent"]["toolCalls"]["list"][0]
    assert call["name"] == "convert_time"
    assert call["result"]["source"]["timezone"] == "Europe/London"
    assert call["result"]["target"]["timezone"] == "America/New_York"
    assert call["result"]["target"]["datetime"][11:16] == "04:30"
    assert '"timezone": "America/New_York"' in result.results["agent"]["content"]
    offered = requests(result, "agent")[0]["tools"]
    assert any(tool["name"] == "get_current_time" and tool["parameters"]["required"] ==
               ["timezone"] for tool in offered)
    assert events(result, "tool_called", "agent")[0]["status"] == "ok"


async def test_unreachable_server_is_a_clear_block_failure():
    with scripted(lambda m, t: "x") as model:
        result = await run_blocks([{"id": "agent", "type": "agent", "with": {
            "prompt": "x", "model": model,
            "tools": [{"mcp": {"command": "python", "args": ["-c", "import sys; sys.exit(3)"]}}]}}])
    assert statuses(result) == {"agent": "failed"}
    assert "tools[0] (mcp): cannot reach MCP server 'python -c" in result.blocks["agent"].error


def test_server_needs_one_transport():
    with pytest.raises(ValueError, match="exactly one of `command`"):
        McpServer(command="x", url="http://y")


async def test_block_failure_with_an_open_mcp_connection_keeps_its_message():
    def script(messages, tools):
        return {"tool_calls": [{"name": "get_current_time", "arguments": {"timezone": "UTC"}}]}

    with scripted(script) as model:
        result = await run_blocks([{"id": "agent", "type": "agent", "with": {
            "prompt": "x", "model": model, "max_iterations": 2,
            "tools": [{"mcp": {**TIME_SERVER, "include": ["get_current_time"]}}]}}])
    assert statuses(result) == {"agent": "failed"}
    assert "still calling tools after max_iterations=2" in result.blocks["agent"].error
    assert [e["name"] for e in events(result, "tool_called", "agent")] == ["get_current_time"] * 2


@pytest.fixture
def http_server():
    """The SDK's own server over streamable HTTP on a free loopback port, stopped by PID."""
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, str(Path(__file__).with_name(
        "mcp_http_server.py")), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("the MCP HTTP server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_streamable_http_server_and_its_ssrf_guard(http_server):
    with pytest.raises(ToolError, match="refused to call"):
        async with AsyncExitStack() as stack:
            await open_mcp_tools(McpServer(url=http_server), stack)
    async with AsyncExitStack() as stack:
        tools = await open_mcp_tools(McpServer(url=http_server, headers={"X-Test": "1"},
                                               prefix="remote_"), stack,
                                     allow_private_network=True)
        assert [tool.name for tool in tools] == ["remote_shout"]
        assert tools[0].parameters["required"] == ["text"]
        assert await tools[0].execute({"text": "refund"}, ToolContext()) == {"result": "REFUND"}


async def test_a_registered_server_needs_no_capability_and_keeps_its_command(tmp_path,
                                                                             monkeypatch):
    """On a shared server a document may not start commands, but it may use a
    stdio server the administrator registered, by name, without changing it."""
    import json

    import flowforge
    from flowforge.workflow.policy import Policy

    registry = tmp_path / "mcp.json"
    registry.write_text(json.dumps({"clock": TIME_SERVER}))
    monkeypatch.setenv("FLOWFORGE_MCP_SERVERS", str(registry))
    async with AsyncExitStack() as stack:
        tools = await open_mcp_tools(McpServer(server="clock", include=["get_current_time"]),
                                     stack)
        assert [tool.name for tool in tools] == ["get_current_time"]
    with pytest.raises(ValueError, match="keeps its own args"):
        McpServer(server="clock", args=["-c", "import os"])
    with pytest.raises(ToolError, match="no registered MCP server 'calendar' \\(registered: clock"):
        async with AsyncExitStack() as stack:
            await open_mcp_tools(McpServer(server="calendar"), stack)
    with scripted(lambda m, t: "it is late") as model:
        document = {"id": "d", "defaults": {"model": model}, "blocks": [
            {"id": "agent", "type": "agent",
             "with": {"prompt": "time?", "tools": [{"mcp": {"server": "clock"}}]}}]}
        result = await flowforge.run(document, storage=False, model=model,
                                     policy=Policy(subject="u"))
    assert result.status == "succeeded", result.error
