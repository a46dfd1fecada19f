"""Reading documents: formats, tags, clear errors, and URLs behind the SSRF guard."""

from __future__ import annotations

import httpx
import pytest

from flowforge.knowledge.ingest import (IngestError, fetch_url, load_bytes, load_path,
                                        parse_tag_options)


def _pdf(text: str) -> bytes:
    """A one-page PDF with a text layer, written by hand (no PDF writer needed)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_markdown_front_matter_gives_title_and_tags(tmp_path):
    path = tmp_path / "refunds.md"
    path.write_text("---\ntitle: Refund Policy\ntags: {category: Policies, topic: [a, b]}\n---\n"
                    "# Refunds\n\nWithin 30 days.")
    [doc] = load_path(path, {"source": ["handbook"]})
    assert doc.name == "Refund Policy"
    assert doc.tags == {"category": ["policies"], "topic": ["a", "b"], "source": ["handbook"]}
    assert doc.text.startswith("# Refunds") and "---" not in doc.text


def test_html_keeps_visible_text_only():
    [doc] = load_bytes(b"<html><head><title>Cookies</title><script>var x=1</script></head>"
                       b"<body><p>We use cookies.</p><style>p{}</style><li>Only with consent."
                       b"</li></body></html>", name="c", source="c.html", kind="html")
    assert doc.name == "Cookies"
    assert doc.text == "We use cookies.\n\nOnly with consent."


def test_pdf_text_layer():
    [doc] = load_bytes(_pdf("Warranty claims are answered within five days."), name="w",
                       source="w.pdf", kind="pdf")
    assert "Warranty claims are answered within five days." in doc.text


def test_folder_with_manifest_and_unsupported_files(tmp_path):
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.html").write_text("<p>beta</p>")
    (tmp_path / "notes.docx").write_bytes(b"ignored")
    (tmp_path / "manifest.yaml").write_text("b.html: {category: legal}\n")
    docs = {d.name: d for d in load_path(tmp_path)}
    assert set(docs) == {"a", "b"}
    assert docs["b"].tags == {"category": ["legal"]} and docs["a"].tags == {}


@pytest.mark.parametrize("name, content, message", [
    ("bad.jsonl", '{"text": "ok"}\nnot json\n', "bad.jsonl:2: not valid JSON"),
    ("bad2.jsonl", '{"body": "x"}\n', 'each line must be an object like {"text"'),
    ("bad.md", "---\ntags: [1, 2]\n---\nx", "tags must be a mapping"),
    ("bad.pdf", "not a pdf", "not a readable PDF"),
    ("x.docx", "x", "unsupported file type '.docx'"),
])
def test_bad_documents_name_the_file_and_the_fix(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(IngestError, match=message.replace("[", r"\[").replace("{", r"\{")):
        load_path(path)


def test_missing_path_and_tag_options():
    with pytest.raises(IngestError, match="no such file or folder"):
        load_path("/nonexistent/policies")
    assert parse_tag_options(["category=Policies,legal", "region=eu"]) == {
        "category": ["legal", "policies"], "region": ["eu"]}
    with pytest.raises(IngestError, match="key=value"):
        parse_tag_options(["category"])


def _site(routes: dict[str, httpx.Response]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return routes.get(str(request.url), httpx.Response(404))
    return httpx.MockTransport(handler)


async def test_url_fetch_parses_by_content_type(monkeypatch):
    monkeypatch.delenv("FLOWFORGE_ALLOW_PRIVATE_NETWORK", raising=False)
    transport = _site({
        "http://93.184.216.34/old": httpx.Response(301, headers={"location": "/policy"}),
        "http://93.184.216.34/policy": httpx.Response(
            200, headers={"content-type": "text/html"},
            content=b"<title>Returns</title><p>Returns are free.</p>"),
    })
    [doc] = await fetch_url("http://93.184.216.34/old", {"category": ["policies"]},
                            transport=transport)
    assert (doc.name, doc.text, doc.source) == ("Returns", "Returns are free.",
                                                "http://93.184.216.34/old")


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/admin", "http://169.254.169.254/latest",
                                 "http://93.184.216.34/to-intranet", "file:///etc/passwd"])
async def test_url_fetch_refuses_private_addresses_and_redirects_to_them(monkeypatch, url):
    monkeypatch.delenv("FLOWFORGE_ALLOW_PRIVATE_NETWORK", raising=False)
    served = []
    routes = {"http://93.184.216.34/to-intranet": httpx.Response(
        302, headers={"location": "http://10.0.0.5/secrets"})}

    def handler(request):
        served.append(str(request.url))
        return routes.get(str(request.url), httpx.Response(200, text="secret"))

    with pytest.raises(IngestError, match="refused|must start with http"):
        await fetch_url(url, transport=httpx.MockTransport(handler))
    assert all("10.0.0.5" not in u and "127.0.0.1" not in u and "169.254" not in u for u in served)


async def test_url_http_errors_are_clear(monkeypatch):
    monkeypatch.delenv("FLOWFORGE_ALLOW_PRIVATE_NETWORK", raising=False)
    with pytest.raises(IngestError, match="answered HTTP 404"):
        await fetch_url("http://93.184.216.34/missing", transport=_site({}))
