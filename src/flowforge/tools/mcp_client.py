"""Tools from MCP servers, discovered when the block runs (official `mcp` SDK).

A server is started over stdio (`command` + `args`) or reached over
streamable HTTP (`url`); its tools are listed and each becomes a `Tool`
whose JSON Schema is the server's own input schema.  The connection lives as
long as the `AsyncExitStack` the caller passes (the agent block's run), so a
stdio server is stopped when the block ends.  `command: python` means the
interpreter running flowforge, so `python -m some_server` works in a venv.

On a shared server a document may not start commands (the `local_commands`
capability); it reaches MCP over HTTP (`url:`) or names a stdio server the
administrator registered (`server: NAME`: `register_mcp_server(...)`, or a
YAML/JSON file `{NAME: {command, args, env, cwd}}` named by
`FLOWFORGE_MCP_SERVERS`), whose command the document cannot change.

The SDK's 1.x and 2.x releases spell a few names differently
(`inputSchema`/`input_schema`, `streamablehttp_client`/`streamable_http_client`);
both are accepted here.
"""

from __future__ import annotations

import re
import sys
import tempfile
from contextlib import AsyncExitStack
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flowforge.errors import ToolError
from flowforge.tools.network import check_url
from flowforge.tools.spec import Tool, ToolContext

__all__ = ["McpServer", "open_mcp_tools", "close_quietly", "register_mcp_server",
           "registered_mcp_server"]

_NAME_RE = re.compile(r"[^A-Za-z0-9_-]")


class McpServer(BaseModel):
    """One MCP server an agent may use (`tools: [{mcp: {...}}]`)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    command: str | None = None
    """Executable that starts the server over stdio (`python` = this interpreter)."""
    args: list[str] = Field(default_factory=list)
    """Its arguments, e.g. `[-m, mcp_server_time]`."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the server process."""
    cwd: str | None = None
    """Working directory of the server process."""
    url: str | None = None
    """Streamable-HTTP endpoint instead of a command, e.g. `https://host/mcp`."""
    server: str | None = None
    """A stdio server the administrator registered by name (`FLOWFORGE_MCP_SERVERS`)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers (e.g. Authorization) for `url`."""
    include: list[str] | None = None
    """Offer only these tools of the server (default: all)."""
    prefix: str | None = None
    """Prepended to every tool name (`time_` -> `time_get_current_time`) to avoid clashes."""
    timeout: float = Field(30.0, gt=0)
    """Seconds one tool call may take."""
    runs_commands: bool = False
    """The server's tools run shell commands: shell metacharacters are then refused."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if sum(map(bool, (self.command, self.url, self.server))) != 1:
            raise ValueError("an MCP server needs exactly one of `command` (stdio), `url` "
                             "(streamable HTTP) or `server` (registered by the administrator)")
        if self.server and (self.args or self.env or self.cwd):
            raise ValueError("a registered `server` keeps its own args, env and cwd; remove "
                             "them from the document")
        return self


_REGISTERED: dict[str, dict[str, Any]] = {}


def register_mcp_server(name: str, command: str, args: list[str] | None = None,
                        env: dict[str, str] | None = None, cwd: str | None = None) -> None:
    """Offer a stdio MCP server to every document as `mcp: {server: name}`."""
    _REGISTERED[name] = {"command": command, "args": list(args or []), "env": dict(env or {}),
                         "cwd": cwd}


def registered_mcp_server(name: str) -> dict[str, Any]:
    """The administrator's entry for `name` (from `register_mcp_server` or the
    `FLOWFORGE_MCP_SERVERS` file); ToolError naming the known ones otherwise."""
    import os

    known = dict(_REGISTERED)
    path = os.environ.get("FLOWFORGE_MCP_SERVERS")
    if path:
        import yaml

        try:
            with open(path, encoding="utf-8") as handle:
                loaded = yaml.safe_load(handle) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ToolError(f"cannot read FLOWFORGE_MCP_SERVERS ({path}): {exc}") from None
        if isinstance(loaded, dict):
            for key, entry in loaded.items():
                if isinstance(entry, dict) and isinstance(entry.get("command"), str):
                    known.setdefault(str(key), {"command": entry["command"],
                                                "args": [str(a) for a in entry.get("args") or []],
                                                "env": {str(k): str(v) for k, v in
                                                        (entry.get("env") or {}).items()},
                                                "cwd": entry.get("cwd")})
    if name not in known:
        raise ToolError(f"no registered MCP server '{name}' (registered: "
                        f"{', '.join(sorted(known)) or 'none'}; an administrator adds them to "
                        f"the FLOWFORGE_MCP_SERVERS file)")
    return known[name]


def _field(obj: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return default


async def _connect(server: McpServer, stack: AsyncExitStack, allow_private: bool) -> Any:
    try:
        from mcp import ClientSession
    except ImportError:
        raise ToolError("MCP tools need the `mcp` package: pip install 'flowforge[mcp]'") from None
    if server.server:
        server = server.model_copy(update=registered_mcp_server(server.server))
    if server.command:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        command = sys.executable if server.command in ("python", "python3") else server.command
        errlog = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))
        params = StdioServerParameters(command=command, args=server.args,
                                       env={**server.env} or None, cwd=server.cwd)
        read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    else:
        await check_url(server.url or "", allow_private)
        read, write = await stack.enter_async_context(_http_transport(server))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


def _http_transport(server: McpServer) -> Any:
    try:                                          # mcp 2.x
        from mcp.client.streamable_http import streamable_http_client
    except ImportError:                           # mcp 1.x
        from mcp.client.streamable_http import streamablehttp_client
        return streamablehttp_client(server.url, headers=server.headers or None)
    if server.headers:
        import httpx2  # the HTTP client mcp 2.x is built on

        return streamable_http_client(server.url,
                                      http_client=httpx2.AsyncClient(headers=server.headers))
    return streamable_http_client(server.url)


def _result_value(result: Any, name: str) -> Any:
    structured = _field(result, "structured_content", "structuredContent")
    texts = []
    for item in _field(result, "content", default=[]) or []:
        text = getattr(item, "text", None)
        texts.append(text if text is not None else f"[{getattr(item, 'type', 'content')}]")
    if _field(result, "is_error", "isError", default=False):
        raise ToolError(f"MCP tool '{name}' failed: {' '.join(texts) or 'no detail'}")
    if structured is not None:
        return structured
    return texts[0] if len(texts) == 1 else "\n".join(texts)


async def open_mcp_tools(server: McpServer, stack: AsyncExitStack,
                         allow_private_network: bool = False) -> list[Tool]:
    """Connect to `server` (kept open on `stack`) and return its tools."""
    where = server.server and f"registered server '{server.server}'" or \
        server.command and " ".join([server.command, *server.args]) or server.url
    connection = AsyncExitStack()       # closed on its own if connecting fails
    try:
        session = await _connect(server, connection, allow_private_network)
        listed = await session.list_tools()
    except Exception as exc:  # noqa: BLE001 - any transport failure, reported with its source
        await close_quietly(connection)
        if isinstance(exc, ToolError):
            raise
        raise ToolError(f"cannot reach MCP server '{where}': {_describe(exc)}") from None
    await stack.enter_async_context(connection)
    tools = []
    for remote in _field(listed, "tools", default=[]):
        remote_name = remote.name
        if server.include is not None and remote_name not in server.include:
            continue
        exposed = _NAME_RE.sub("_", f"{server.prefix or ''}{remote_name}")[:64]
        schema = _field(remote, "input_schema", "inputSchema", default=None) or {
            "type": "object", "properties": {}}
        tools.append(Tool(name=exposed, description=remote.description or remote_name,
                          parameters=dict(schema), execute=_caller(session, remote_name, server),
                          kind="mcp", runs_commands=server.runs_commands))
    return tools


async def close_quietly(stack: AsyncExitStack) -> None:
    """Close MCP connections; a server that dies on the way out is not the
    caller's failure (its task group reports the broken pipe as a group)."""
    try:
        await stack.aclose()
    except Exception:  # noqa: BLE001
        pass


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _caller(session: Any, remote_name: str, server: McpServer) -> Any:
    async def execute(arguments: dict[str, Any], context: ToolContext) -> Any:
        try:
            result = await session.call_tool(remote_name, arguments,
                                             read_timeout_seconds=_timeout(server.timeout))
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise ToolError(f"MCP tool '{remote_name}' failed: {_describe(exc)}") from None
        return _result_value(result, remote_name)

    return execute


def _timeout(seconds: float) -> Any:
    """mcp 1.x takes a timedelta, 2.x a float."""
    import inspect

    from mcp import ClientSession

    annotation = str(inspect.signature(ClientSession.call_tool).parameters[
        "read_timeout_seconds"].annotation)
    if "timedelta" in annotation:
        from datetime import timedelta

        return timedelta(seconds=seconds)
    return seconds

