"""The `http` block and HTTP tools against a real server on 127.0.0.1, and the
SSRF guard that refuses loopback/private addresses unless allowed."""

from __future__ import annotations

import json
import threading
from urllib.parse import unquote
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import flowforge
from flowforge.errors import ToolError
from flowforge.providers.scripted import register_script, unregister_script
from flowforge.tools.network import allowing_private_network, check_url


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, status, payload, content_type="application/json"):
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/orders/"):
            self._send(200, {"order": unquote(self.path.split("/")[2].split("?")[0]),
                             "status": "shipped",
                             "query": self.path.partition("?")[2]})
        elif self.path == "/text":
            self._send(200, b"plain words", "text/plain")
        elif self.path == "/hop":
            self.send_response(302)
            self.send_header("Location", "/orders/77")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(404, {"error": "no such thing"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        self._send(201, {"received": body, "auth": self.headers.get("Authorization")})


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


async def _run_http(with_, **run):
    doc = {"id": "h", "inputs": {"order": {"type": "string", "default": "A1"}},
           "blocks": [{"id": "call", "type": "http", "with": with_}]}
    return await flowforge.run(doc, {}, storage=False, **run)


async def test_loopback_refused_by_default(server):
    result = await _run_http({"url": f"{server}/orders/{{{{input.order}}}}"})
    assert result.blocks["call"].status == "failed"
    error = result.blocks["call"].error
    assert "refused to call" in error and "127.0.0.1" in error
    assert "allow_private_network: true" in error


async def test_block_allows_private_network(server):
    result = await _run_http({"url": f"{server}/orders/{{{{input.order}}}}",
                              "query": {"verbose": 1}, "allow_private_network": True})
    output = result.results["call"]
    assert result.status == "succeeded"
    assert output["status"] == 200 and output["ok"] is True
    assert output["data"] == {"order": "A1", "status": "shipped", "query": "verbose=1"}


async def test_process_wide_switch_post_json_and_headers(server):
    with allowing_private_network():
        result = await _run_http({"method": "POST", "url": f"{server}/refunds",
                                  "headers": {"Authorization": "Bearer {{input.order}}"},
                                  "body": {"order": "{{input.order}}", "amount": 12.5}})
    assert result.results["call"]["status"] == 201
    assert result.results["call"]["data"] == {"received": {"order": "A1", "amount": 12.5},
                                              "auth": "Bearer A1"}


async def test_text_answer_redirect_and_error_status(server):
    with allowing_private_network():
        text = await _run_http({"url": f"{server}/text"})
        hop = await _run_http({"url": f"{server}/hop"})
        missing = await _run_http({"url": f"{server}/nope"})
        tolerated = await _run_http({"url": f"{server}/nope", "fail_on_status": False})
    assert text.results["call"]["data"] == "plain words"
    assert hop.results["call"]["data"]["order"] == "77"
    assert hop.results["call"]["url"].endswith("/orders/77")
    assert missing.blocks["call"].status == "failed"
    assert "answered HTTP 404" in missing.blocks["call"].error
    assert tolerated.results["call"]["status"] == 404
    assert tolerated.results["call"]["data"] == {"error": "no such thing"}


@pytest.mark.parametrize("url", ["http://127.0.0.1/", "http://localhost:8080/x",
                                 "http://10.1.2.3/", "http://192.168.0.1/",
                                 "http://169.254.169.254/latest/meta-data", "http://[::1]/",
                                 "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/"])
async def test_ssrf_guard_refuses_internal_addresses(url):
    with pytest.raises(ToolError, match="refused to call"):
        await check_url(url)
    await check_url(url, allow_private=True)


async def test_ssrf_guard_scheme_and_public_literal():
    with pytest.raises(ToolError, match="must start with http"):
        await check_url("file:///etc/passwd")
    await check_url("http://93.184.216.34/")       # a public address literal: no lookup needed


async def test_http_tool_in_agent(server):
    def script(messages, tools):
        if messages[-1].role == "user":
            return {"tool_calls": [{"name": "get_order", "arguments": {"order_id": "B 2"}}]}
        return f"Order says: {messages[-1].content}"

    register_script("http_tool", script)
    try:
        doc = {"id": "a", "blocks": [{"id": "agent", "type": "agent", "with": {
            "prompt": "Where is my order?", "model": "scripted/http_tool",
            "allow_private_network": True,
            "tools": [{"http": {"url": f"{server}/orders/{{order_id}}"}, "name": "get_order",
                       "description": "Order status by id"}]}}]}
        result = await flowforge.run(doc, {}, storage=False)
    finally:
        unregister_script("http_tool")
    output = result.results["agent"]
    assert result.status == "succeeded"
    call = output["toolCalls"]["list"][0]
    assert call["name"] == "get_order" and call["arguments"] == {"order_id": "B 2"}
    assert call["result"] == {"order": "B 2", "status": "shipped", "query": ""}
    assert output["content"] == 'Order says: {"order": "B 2", "status": "shipped", "query": ""}'
