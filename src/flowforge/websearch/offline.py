"""The offline stand-in for the web: a folder of pages (or a knowledge base)
searched as if it were the internet, so the chat's "the knowledge base is not
enough, search the web" path runs on a machine with no network, in the demo
and in the tests.

A folder is synced into a knowledge base of its own (`web-<folder name>` by
default), mirrored as a knowledge block's `sources` are (`knowledge.sync`):
its pages are known as `<folder name>/<page>`.  A page's citation URL is the
`url:` line at its top when it has one (the page stands for that address:
read from the passage, else from the page's first passage in the base), else
`offline:<document name>`.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from flowforge.errors import FlowforgeError, NotFound, ToolError
from flowforge.websearch.base import SearchResult, clip

__all__ = ["OfflineSearch", "DEFAULT_WEB_BASE"]

#: The base the chat and research search as the web by default; on a fresh machine it
#: does not exist yet, which is "no pages" (any other missing base is a mistake).
DEFAULT_WEB_BASE = "web"

_URL_LINE = re.compile(r"^\s*url:\s*(\S+)", re.IGNORECASE | re.MULTILINE)


class OfflineSearch:
    name = "offline"

    def __init__(self, knowledge: Any, *, folder: str | Path | None = None,
                 knowledge_base: str | None = None, mode: str = "hybrid",
                 min_similarity: float | None = None) -> None:
        if folder is None and not knowledge_base:
            raise ToolError("web_search (offline): give `folder` (pages standing in for the "
                            "web) or `knowledge_base`")
        self.knowledge = knowledge
        self.folder = Path(folder) if folder is not None else None
        self.base = knowledge_base or f"web-{self.folder.name if self.folder else 'offline'}"
        self.mode, self.min_similarity = mode, min_similarity
        self._urls: dict[str, str] = {}

    async def _sync(self) -> None:
        if self.folder is None:
            return
        if not self.folder.is_dir():
            raise ToolError(f"web_search (offline): the folder {self.folder} does not exist")
        await self.knowledge.create(self.base, exist_ok=True,
                                    description="offline stand-in for the web")
        await self.knowledge.sync_paths(self.base, {self.folder.resolve().name: self.folder})

    async def search(self, query: str, *, context: str | None = None,
                     max_results: int = 5) -> SearchResult:
        started = time.perf_counter()
        try:
            await self._sync()
            found = await self.knowledge.search(self.base, query, top_k=max(1, min(max_results,
                                                                                    20)),
                                                mode=self.mode,
                                                min_similarity=self.min_similarity)
        except NotFound as exc:
            if self.folder is not None or self.base != DEFAULT_WEB_BASE:
                raise ToolError(f"web_search (offline): {exc}") from None
            # No stand-in for the web on this machine (a fresh install): nothing found,
            # said in the answer, so the chat and research go on from what they have
            # (research failed out of the box on "no knowledge base named 'web'").
            return SearchResult(
                answer=f"No web pages matched: there is no offline web here (no knowledge "
                       f"base named '{self.base}'; create it from a folder of pages with "
                       f"`flowforge kb add {self.base} <folder>`, or pass --web <folder>).",
                citations=[], metadata={"backend": self.name, "query": query,
                                        "source": self.base, "missing": True, "took_ms": round(
                                            (time.perf_counter() - started) * 1000, 1)})
        except FlowforgeError as exc:
            raise ToolError(f"web_search (offline): {exc}") from None
        citations: list[dict[str, Any]] = []
        seen: set[str] = set()
        for hit in found.get("results") or []:
            name = str(hit.get("documentName") or hit.get("documentId") or "page")
            content = str(hit.get("content") or "")
            url = await self._url_of(name, content, hit)
            text = _URL_LINE.sub("", content, count=1)
            if url in seen:
                continue
            seen.add(url)
            citations.append({"title": _title(name, text), "url": url,
                              "snippet": clip(text, 400),
                              "score": round(float(hit.get("similarity") or 0.0), 4)})
        answer = "\n\n".join(c["snippet"] for c in citations[:2]) or "No web pages matched."
        return SearchResult(answer=answer, citations=citations,
                            metadata={"backend": self.name, "query": query,
                                      "source": str(self.folder or self.base),
                                      "took_ms": round((time.perf_counter() - started) * 1000,
                                                       1)})


    async def _url_of(self, name: str, content: str, hit: dict[str, Any]) -> str:
        """The page's `url:` line: in the passage, else at the top of its page."""
        found = _URL_LINE.search(content[:300])
        if found:
            return found.group(1)
        if name not in self._urls:
            match = _URL_LINE.search(await self._page_head(hit))
            self._urls[name] = match.group(1) if match else f"offline:{name}"
        return self._urls[name]

    async def _page_head(self, hit: dict[str, Any]) -> str:
        """The top of the page `hit` is a passage of: its first passage in the base
        (a synced page is known by its path inside the folder, not where the folder
        lives), else the file a page added by path came from."""
        meta = hit.get("metadata") or {}
        try:
            first = int(meta["chunkId"]) - int(hit["chunkIndex"])
            row = (await self.knowledge.store.get_chunks([first])).get(first)
        except (KeyError, TypeError, ValueError, AttributeError):
            row = None
        # chunk ids of one document are consecutive as stored; checked, never assumed
        if row is not None and str(row.document_id) == str(hit.get("documentId")) \
                and row.chunk_index == 0:
            return row.content[:500]
        source = meta.get("source")
        if isinstance(source, str) and source and "://" not in source:
            try:
                return Path(source).read_text(encoding="utf-8", errors="replace")[:500]
            except OSError:
                pass
        return ""


def _title(name: str, text: str) -> str:
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return clip(line, 100)
    return name
