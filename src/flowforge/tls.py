"""One verified TLS context for the HTTPS clients flowforge makes.

httpx builds a new `ssl.SSLContext` for every client not given one, loading
the whole CA bundle each time: 30-40 ms of CPU per client on a small
machine, which every HTTP block and HTTP tool call, web search, embeddings
request, document fetch and server paid again.  One context serves any
number of clients and threads, so it is built once, the way httpx builds
it (`SSL_CERT_FILE`, else `SSL_CERT_DIR`, else certifi's bundle), and again
only if those variables change.
"""

from __future__ import annotations

import os
import ssl
from functools import lru_cache

__all__ = ["certificate_hint", "verified_context"]


def verified_context() -> ssl.SSLContext:
    """The context to pass as httpx's `verify=`: certificates and host names
    checked against the same CAs httpx's own default would trust."""
    return _context(os.environ.get("SSL_CERT_FILE") or None,
                    os.environ.get("SSL_CERT_DIR") or None)


def certificate_hint(exc: BaseException) -> str:
    """What to add to the message of a refused certificate that no trusted CA
    signed (the usual case: a company's own CA in front of the server); else
    nothing.  Retrying such a request cannot help: the fix is the user's."""
    if "CERTIFICATE_VERIFY_FAILED" not in str(exc):
        return ""
    return ("; if the server's certificate comes from your own CA, set SSL_CERT_FILE "
            "to a file of its certificate")


@lru_cache(maxsize=4)
def _context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    import httpx

    return httpx.create_ssl_context()          # reads the same two variables
