"""A tiny MCP server over streamable HTTP on 127.0.0.1 (the official SDK's
server), for tests/tools/test_mcp.py: `python mcp_http_server.py <port>`."""
import sys
port = int(sys.argv[1])
try:
    from mcp.server.mcpserver import MCPServer
    server = MCPServer("shouter")
    run = lambda: server.run(transport="streamable-http", host="127.0.0.1", port=port)
except ImportError:
    from mcp.server.fastmcp import FastMCP
    server = FastMCP("shouter", host="127.0.0.1", port=port)
    run = lambda: server.run(transport="streamable-http")

@server.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()

run()
