"""What the chat tools of one agent turn share, and the helpers they share.

`index_keywords` links its keywords to the last web result without the model
copying them, and `generate_response` accepts as sources exactly what the
searches returned: both read the one `RagState` the tools of an agent hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flowforge.safe_text as safe_text
from flowforge.errors import ToolError
from flowforge.tools.spec import Tool, ToolContext

__all__ = ["RagState", "clean_text", "clean_answer", "withhold", "knowledge_of", "only",
           "narrow", "returned", "real_sources"]


@dataclass
class RagState:
    """One agent turn's record of what its chat tools returned."""

    kb: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Knowledge-base passages' metadata, by document title and by id."""
    web: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Web citations, by address and by title."""
    kb_searched: bool = False
    """`knowledge_base_search` ran: `web_search` may run."""
    last_web: dict[str, Any] | None = None
    """The last web result with its query: what `index_keywords` links to."""
    keywords: list[str] = field(default_factory=list)
    """What `index_keywords` indexed last (reported by `generate_response`)."""
    withheld: list[Any] = field(default_factory=list)
    """Findings (`knowledge.injection.Finding`) of what was withheld."""
    withheld_sources: dict[str, str] = field(default_factory=dict)
    """Withheld documents and pages (title or address -> where): never citable."""
    shown: list[str] = field(default_factory=list)
    """Every text the model was shown: the answer's last check reads them."""
    passages: list[dict[str, Any]] = field(default_factory=list)
    """What the searches returned, in order, as `{title, content, kind, url?}`: the
    passages a guided answer numbers (`guided`)."""
    answer_tools: list[Tool] = field(default_factory=list)
    """The `generate_response` tools whose `sources` are narrowed to what was returned."""

    @classmethod
    def of(cls, shared: dict[str, Any]) -> RagState:
        """The state kept in one agent's `shared` mapping (made on first use)."""
        state = shared.get("rag")
        if state is None:
            state = shared["rag"] = cls()
        return state


def clean_text(text: str) -> str:
    """`text` without control and bidirectional-override characters."""
    return safe_text.clean_text(text)


def clean_answer(text: str) -> str:
    """An answer for the user: what every place that shows text shows
    (`flowforge.safe_text.shown_text`: clean, no markup, no code-running link)."""
    return safe_text.shown_text(text)


def withhold(state: RagState, findings: list[Any], tool_ctx: ToolContext) -> None:
    """Keep what was withheld for the answer's last check, and say so in the run's events."""
    from flowforge.knowledge.injection import withheld_event

    if not findings:
        return
    state.withheld.extend(findings)
    if tool_ctx.emit is not None:
        tool_ctx.emit("progress", **withheld_event(findings))


async def knowledge_of(context: Any) -> Any:
    from flowforge.knowledge.api import knowledge_for
    return await knowledge_for(context)


def only(kind: str, options: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ToolError(f"{kind}: unknown option(s) {', '.join(unknown)}; allowed: "
                        f"{', '.join(sorted(allowed)) or 'none'}")


def narrow(state: RagState) -> None:
    """Once the tools have returned documents or pages, the answer tool's
    `sources` accepts exactly those, by title or address: a model whose output
    follows the schema (the local model's grammar does) cannot cite anything
    else, and any other model is told the list when it tries."""
    titles, urls = returned(state)
    real = (titles + urls)[:100]
    if not real:
        return
    for tool in state.answer_tools:
        sources = tool.parameters["properties"]["sources"]
        sources["items"] = {"enum": real}
        # each at most once: a small model otherwise lists one title until maxItems
        sources["maxItems"] = len(real)


def returned(state: RagState) -> tuple[list[str], list[str]]:
    """The titles of the documents and the addresses of the pages the tools of
    this conversation returned, sorted: what an answer may cite."""
    titles = sorted({str(meta["title"]) for meta in state.kb.values() if meta.get("title")})
    urls = sorted({str(page["url"]) for page in state.web.values() if page.get("url")})
    return titles, urls


def real_sources(state: RagState) -> str:
    titles, urls = returned(state)
    parts = []
    if titles:
        parts.append("documents " + ", ".join(f"'{t}'" for t in titles[:20]))
    if urls:
        parts.append("web pages " + ", ".join(f"<{u}>" for u in urls[:20]))
    return "; ".join(parts) if parts else "none (no tool has returned a source yet)"
