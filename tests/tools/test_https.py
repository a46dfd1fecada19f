"""HTTPS from flowforge's clients (the `http` block's, the document fetcher's,
web search's): a certificate no trusted CA signed is refused, with the way to
trust a CA of one's own, and a CA named by `SSL_CERT_FILE` is trusted, as
httpx's own default would do (flowforge shares one TLS context among its
clients)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from flowforge.errors import ToolError
from flowforge.knowledge.ingest import IngestError, fetch_url
from flowforge.providers.retry import RetryPolicy
from flowforge.tools.http import http_request
from flowforge.websearch.base import post_json


def _certificate(subject: str, key, issuer_name, issuer_key, *, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(issuer_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture
def https_server(tmp_path):
    """A server on 127.0.0.1 whose certificate a throwaway CA signed: (URL, CA file)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "flowforge test CA")])
    ca = _certificate("flowforge test CA", ca_key, ca_name, ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = _certificate("127.0.0.1", key, ca_name, ca_key, ca=False)
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "server.pem").write_bytes(
        leaf.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = b'{"secure": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "server.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}/", tmp_path / "ca.pem"
    server.shutdown()
    server.server_close()


async def test_a_certificate_no_trusted_ca_signed_is_refused(https_server, monkeypatch):
    url, _ = https_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(ToolError, match="CERTIFICATE_VERIFY_FAILED") as refused:
        await http_request("GET", url, allow_private_network=True, timeout=10)
    assert "set SSL_CERT_FILE" in str(refused.value)           # and the way to trust it


async def test_a_ca_named_by_ssl_cert_file_is_trusted(https_server, monkeypatch):
    url, ca_file = https_server
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    answer = await http_request("GET", url, allow_private_network=True, timeout=10)
    assert answer.status == 200 and answer.data == {"secure": True}


async def test_the_document_fetcher_refuses_it_and_says_how_to_trust_it(https_server,
                                                                       monkeypatch):
    url, ca_file = https_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(IngestError, match="CERTIFICATE_VERIFY_FAILED.*set SSL_CERT_FILE"):
        await fetch_url(url, allow_private_network=True, timeout=10)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    documents = await fetch_url(url, allow_private_network=True, timeout=10)
    assert documents and "secure" in documents[0].text


async def test_web_search_refuses_it_at_once_and_says_how_to_trust_it(https_server,
                                                                     monkeypatch):
    url, _ = https_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)

    async def no_retry(delay):
        raise AssertionError("a refused certificate was retried")

    with pytest.raises(ToolError, match="CERTIFICATE_VERIFY_FAILED.*set SSL_CERT_FILE"):
        await post_json("perplexity", url, {"query": "q"}, headers={}, timeout=10,
                        retry=RetryPolicy(attempts=3, sleep=no_retry))
