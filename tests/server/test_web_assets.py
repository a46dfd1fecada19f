"""The web app's files go out compressed once, at build time: a browser that
accepts brotli or gzip is sent the build's precompressed copy as it is, one
that accepts neither the file itself; caches are told the answer varies."""

from __future__ import annotations

import gzip
import re

import pytest

from flowforge.server.webui import STATIC, accepted_encodings


@pytest.mark.parametrize("header, expected", [
    ("gzip, deflate, br, zstd", ["br", "gzip"]),
    ("gzip", ["gzip"]),
    ("br;q=0, gzip;q=0.5", ["gzip"]),
    ("*", ["br", "gzip"]),
    ("*, br;q=0", ["gzip"]),
    ("identity", []),
    ("", []),
])
def test_accept_encoding_is_read_with_its_weights(header, expected):
    assert accepted_encodings(header) == expected


async def test_the_precompressed_asset_is_sent_to_who_accepts_it(server):
    index = (STATIC / "index.html").read_text()
    script = re.search(r'src="/assets/([^"]+\.js)"', index).group(1)
    plain = (STATIC / "assets" / script).read_bytes()
    async with server.client(None) as anyone:
        async with anyone.stream("GET", f"/assets/{script}",
                                 headers={"Accept-Encoding": "gzip, deflate, br"}) as answer:
            raw = b"".join([chunk async for chunk in answer.aiter_raw()])
            headers = answer.headers
        zipped = await anyone.get(f"/assets/{script}", headers={"Accept-Encoding": "gzip"})
        identity = await anyone.get(f"/assets/{script}", headers={"Accept-Encoding": "identity"})
    assert headers["content-encoding"] == "br"
    assert raw == (STATIC / "assets" / f"{script}.br").read_bytes()
    assert len(raw) < len(plain) / 3
    assert headers["content-type"].startswith("text/javascript")
    assert "accept-encoding" in headers["vary"].lower()
    assert zipped.headers["content-encoding"] == "gzip" and zipped.content == plain
    assert "content-encoding" not in identity.headers and identity.content == plain
    assert gzip.decompress((STATIC / "assets" / f"{script}.gz").read_bytes()) == plain
