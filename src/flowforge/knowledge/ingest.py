"""Turn files, folders, URLs and raw text into `SourceDocument`s.

Formats: plain text (.txt), Markdown (.md, with optional YAML front matter),
HTML (.html, .htm: visible text only), PDF (.pdf, text layer via pypdf) and
JSON lines (.jsonl: one `{text, metadata}` object per line, each its own
document).  Tags come from, in increasing priority: a `manifest.yaml` in a
folder (`{file name: {tag: value or [values]}}`), the front matter's `tags:`
mapping, and the tags given on the command line or to the API.  Tags are
multi-valued and case-insensitive (stored lower-case).

URLs go through the project's SSRF guard (`flowforge.tools.network`): every
hop of a redirect is checked, private and loopback addresses are refused
unless allowed, and the body is read up to a size limit.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping
from urllib.parse import urljoin, urlsplit

import yaml

from flowforge.errors import FlowforgeError
from flowforge.tls import certificate_hint, verified_context

__all__ = ["SourceDocument", "IngestError", "SUPPORTED_SUFFIXES", "load_path", "load_paths", "load_bytes",
           "fetch_url", "normalise_tags", "merge_tags", "parse_tag_options"]

SUPPORTED_SUFFIXES = {".txt", ".text", ".md", ".markdown", ".html", ".htm", ".pdf", ".jsonl"}
MAX_URL_BYTES = 20 * 1024 * 1024
_MAX_REDIRECTS = 5


@dataclass
class SourceDocument:
    """One document to ingest: `source` identifies it (re-adding the same
    source replaces it), `name` is what results show."""

    name: str
    source: str
    text: str
    tags: dict[str, list[str]] = field(default_factory=dict)


class IngestError(FlowforgeError):
    """A document could not be read; the message names the file and the fix."""


def normalise_tags(tags: Mapping[str, Any] | None, where: str = "tags") -> dict[str, list[str]]:
    """`{category: policies, region: [eu, us]}` -> `{category: [policies], region: [eu, us]}`."""
    if not tags:
        return {}
    if not isinstance(tags, Mapping):
        raise IngestError(f"{where}: tags must be a mapping like {{category: policies}}, "
                          f"got {type(tags).__name__}")
    out: dict[str, list[str]] = {}
    for key, value in tags.items():
        name = str(key).strip().lower()
        if not name:
            raise IngestError(f"{where}: a tag has an empty name")
        values = value if isinstance(value, (list, tuple, set)) else [value]
        cleaned = [str(v).strip().lower() for v in values if v is not None and str(v).strip()]
        if cleaned:
            out[name] = sorted(set(cleaned))
    return out


def merge_tags(*layers: Mapping[str, list[str]] | None) -> dict[str, list[str]]:
    """Later layers replace earlier ones key by key."""
    merged: dict[str, list[str]] = {}
    for layer in layers:
        merged.update(layer or {})
    return merged


def parse_tag_options(options: Iterable[str]) -> dict[str, list[str]]:
    """`["category=policies,legal", "region=eu"]` (the CLI's --tag) -> tags."""
    tags: dict[str, list[str]] = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise IngestError(f"--tag '{option}': write it as key=value (or key=v1,v2)")
        tags.setdefault(key.strip().lower(), [])
        tags[key.strip().lower()] += [v.strip().lower() for v in value.split(",") if v.strip()]
    return {k: sorted(set(v)) for k, v in tags.items()}


def _front_matter(text: str, where: str) -> tuple[str, dict[str, Any]]:
    if not text.startswith("---"):
        return text, {}
    end = text.find("\n---", 3)
    if end < 0:
        return text, {}
    try:
        meta = yaml.safe_load(text[3:end]) or {}
    except yaml.YAMLError as exc:
        raise IngestError(f"{where}: invalid front matter: {exc}") from None
    if not isinstance(meta, dict):
        raise IngestError(f"{where}: front matter must be a mapping")
    body = text[end + 4:]
    return body.lstrip("\n"), meta


def _html_text(data: bytes | str) -> tuple[str, str | None]:
    try:
        from bs4 import BeautifulSoup
    except ImportError:
        raise IngestError("HTML documents need beautifulsoup4: "
                          "pip install 'flowforge[knowledge]'") from None
    soup = BeautifulSoup(data, "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "svg"]):
        tag.decompose()
    title = soup.title.get_text(strip=True) if soup.title else None
    if soup.head:
        soup.head.decompose()
    blocks = [b.get_text(" ", strip=True) for b in
              soup.find_all(["p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "td", "th",
                             "blockquote", "dt", "dd"])]
    text = "\n\n".join(b for b in blocks if b) or soup.get_text("\n", strip=True)
    return text, title


def _pdf_text(data: bytes, where: str) -> str:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:
        raise IngestError("PDF documents need pypdf: pip install 'flowforge[knowledge]'") from None
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except (PdfReadError, ValueError, KeyError) as exc:
        raise IngestError(f"{where}: not a readable PDF ({exc})") from None
    return "\n\n".join(p for p in pages if p)


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def load_bytes(data: bytes, *, name: str, source: str, kind: str,
               tags: Mapping[str, list[str]] | None = None) -> list[SourceDocument]:
    """Parse `data` of a kind (a suffix such as `.md`, or `html`, `pdf`)."""
    kind = kind if kind.startswith(".") else f".{kind}"
    if kind in (".md", ".markdown", ".txt", ".text"):
        text, meta = _front_matter(_decode(data, source), source)
        doc_tags = merge_tags(normalise_tags(meta.get("tags"), f"{source}: front matter tags"), tags)
        title = meta.get("title") or name
        return [SourceDocument(str(title), source, text, doc_tags)]
    if kind in (".html", ".htm"):
        text, title = _html_text(data)
        return [SourceDocument(title or name, source, text, dict(tags or {}))]
    if kind == ".pdf":
        return [SourceDocument(name, source, _pdf_text(data, source), dict(tags or {}))]
    if kind == ".jsonl":
        return list(_jsonl(_decode(data, source), name, source, tags))
    raise IngestError(f"{source}: unsupported document type '{kind}' - use one of "
                      f"{', '.join(sorted(SUPPORTED_SUFFIXES))}")


def _jsonl(text: str, name: str, source: str, tags) -> Iterator[SourceDocument]:
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise IngestError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise IngestError(f'{where}: each line must be an object like '
                              f'{{"text": "...", "metadata": {{...}}}}')
        meta = item.get("metadata") or {}
        if not isinstance(meta, dict):
            raise IngestError(f"{where}: metadata must be an object")
        line_tags = normalise_tags(meta.get("tags"), f"{where} metadata.tags")
        yield SourceDocument(str(meta.get("name") or f"{name}#{number}"),
                             str(meta.get("source") or f"{source}#{number}"), item["text"],
                             merge_tags(tags, line_tags))


def _manifest(folder: Path) -> dict[str, dict[str, list[str]]]:
    path = folder / "manifest.yaml"
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise IngestError(f"{path}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise IngestError(f"{path}: must map file names to tags, e.g. refunds.md: {{topic: refunds}}")
    return {str(k): normalise_tags(v, f"{path}: {k}") for k, v in data.items()}


def load_path(path: str | Path, tags: Mapping[str, list[str]] | None = None, *,
              source: str | None = None) -> list[SourceDocument]:
    """A file, or every supported file under a folder (sorted, recursive).

    A file's documents are known by its absolute path, unless `source` names
    it: then a file is known as `source`, and a folder's files as
    `source/<path inside the folder>` (a synced source: `knowledge.sync`)."""
    path = Path(path)
    if not path.exists():
        raise IngestError(f"{path}: no such file or folder")
    if path.is_dir():
        docs: list[SourceDocument] = []
        files = sorted(p for p in path.rglob("*") if p.is_file()
                       and p.suffix.lower() in SUPPORTED_SUFFIXES and not p.name.startswith("."))
        manifests: dict[Path, dict] = {}
        for file in files:
            manifest = manifests.setdefault(file.parent, _manifest(file.parent))
            inside = None if source is None else f"{source}/{file.relative_to(path).as_posix()}"
            docs += load_path(file, merge_tags(manifest.get(file.name), tags), source=inside)
        return docs
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise IngestError(f"{path}: unsupported file type '{suffix or '(none)'}' - use one of "
                          f"{', '.join(sorted(SUPPORTED_SUFFIXES))}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(f"{path}: cannot read ({exc.strerror})") from None
    return load_bytes(data, name=path.stem, source=source or str(path.resolve()), kind=suffix,
                      tags=tags)


def load_paths(paths: Iterable[str | Path],
               tags: Mapping[str, list[str]] | None = None) -> list[SourceDocument]:
    docs: list[SourceDocument] = []
    for path in paths:
        docs += load_path(path, tags)
    return docs


def _kind_of(url: str, content_type: str) -> str:
    content_type = content_type.split(";")[0].strip().lower()
    if "pdf" in content_type:
        return ".pdf"
    if "html" in content_type:
        return ".html"
    if "markdown" in content_type:
        return ".md"
    suffix = Path(urlsplit(url).path).suffix.lower()
    return suffix if suffix in SUPPORTED_SUFFIXES else ".txt"


async def fetch_url(url: str, tags: Mapping[str, list[str]] | None = None, *,
                    allow_private_network: bool = False, timeout: float = 30.0,
                    transport: Any = None) -> list[SourceDocument]:
    """Download `url` (through the SSRF guard, one checked hop at a time) and parse it."""
    import httpx

    from flowforge.errors import ToolError
    from flowforge.tools.network import check_url

    current = url
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False,
                                     transport=transport, verify=verified_context()) as client:
            for _ in range(_MAX_REDIRECTS + 1):
                await check_url(current, allow_private_network)
                async with client.stream("GET", current) as response:
                    if response.is_redirect and "location" in response.headers:
                        current = urljoin(str(response.url), response.headers["location"])
                        continue
                    if response.status_code >= 400:
                        raise IngestError(f"{url}: the server answered HTTP {response.status_code}")
                    body = bytearray()
                    async for part in response.aiter_bytes():
                        body.extend(part)
                        if len(body) > MAX_URL_BYTES:
                            raise IngestError(f"{url}: larger than {MAX_URL_BYTES} bytes")
                    kind = _kind_of(current, response.headers.get("content-type", ""))
                    name = Path(urlsplit(current).path).stem or urlsplit(current).hostname or url
                    return load_bytes(bytes(body), name=name, source=url, kind=kind, tags=tags)
            raise IngestError(f"{url}: more than {_MAX_REDIRECTS} redirects")
    except ToolError as exc:
        raise IngestError(str(exc)) from None
    except httpx.HTTPError as exc:
        raise IngestError(f"{url}: download failed ({type(exc).__name__}: {exc})"
                          f"{certificate_hint(exc)}") from None
