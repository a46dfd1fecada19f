"""What a workflow fixes of each chat tool (`tools: [{rag_search: {...}}]`):
checked by `validate` and again when the run builds the tool."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flowforge.errors import ToolError

__all__ = ["RagSearchOptions", "WebSearchOptions", "KeywordIndexOptions",
           "FinalResponseOptions"]


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class RagSearchOptions(_Options):
    knowledge_base: str | None = None
    """Default `kb_id` (default: default_kb)."""
    knowledge_bases: list[str] | None = None
    """The only bases the model may name (default: any the user can read)."""
    top_k: int | None = Field(None, ge=1, le=20)
    """Passages a call returns when the model asks for no number (default 5, at
    most `max_top_k`)."""
    max_top_k: int | None = Field(None, ge=1, le=20)
    """The most passages one call returns, whatever it asks for (default 20; the result's
    `note` says so): the 0.5B model asked for 10 and answered from the wrong one."""
    mode: str | None = Field(None, pattern="^(vector|text|hybrid)$")
    """How the base is searched: `vector` (meaning), `text` (words) or `hybrid`
    (both, ranks fused; the default)."""
    min_similarity: float | None = Field(None, ge=-1, le=1)
    """Leave out passages scoring below this similarity to the query (the
    search's own score for its mode; default: none left out)."""
    filters: dict[str, str | list[str]] | list[dict[str, Any]] | None = None
    """Tag filters, as the knowledge block takes them (`policies|OR|legal` included)."""


class WebSearchOptions(_Options):
    backend: str | None = None
    """offline (default), perplexity or tavily."""
    max_results: int | None = Field(None, ge=1, le=20)
    """Pages a search returns at most (every back end; default 5)."""
    folder: str | None = None
    """offline: a folder of pages standing in for the web."""
    knowledge_base: str | None = None
    """offline: a knowledge base standing in for the web."""
    mode: str | None = None
    """offline: how the stand-in base is searched (`vector`, `text` or `hybrid`)."""
    min_similarity: float | None = None
    """offline: leave out pages less similar to the query than this."""
    model: str | None = None
    """perplexity: the Sonar model (default sonar)."""
    search_depth: str | None = None
    """tavily: basic (default) or advanced."""
    base_url: str | None = None
    """perplexity, tavily: another address for the service's API (a proxy)."""
    timeout: float | None = Field(None, gt=0)
    """perplexity, tavily: seconds one search may take."""

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str | None) -> str | None:
        if value is None or value in ("offline", "perplexity", "tavily") or "{{" in value:
            return value
        raise ValueError(f"unknown backend {value!r}: use offline, perplexity or tavily")

    @model_validator(mode="after")
    def _backend_takes_them(self) -> WebSearchOptions:
        """The back end's own options, checked by the run's function
        (`websearch.backend_options`): `validate` accepts only what runs."""
        if self.backend is not None and "{{" in self.backend:
            return self                       # known at run time, checked then
        from flowforge.websearch import backend_options
        try:
            backend_options(self.model_dump(exclude_none=True))
        except ToolError as exc:
            raise ValueError(str(exc)) from None
        return self


class KeywordIndexOptions(_Options):
    query: str | None = None
    """The question the keywords are linked to (templates allowed)."""
    namespace: str | None = None
    """Which keyword index the keywords go to (default `chat`): separate indexes
    stay apart, e.g. one per chat or per user."""
    min_keywords: int | None = Field(None, ge=1, le=50)
    """Fewest keywords a call must give (default 3)."""
    max_keywords: int | None = Field(None, ge=1, le=50)
    """Most keywords a call may give (default 10)."""


class FinalResponseOptions(_Options):
    require_sources: bool | None = None
    """Refuse an answer that claims the knowledge base or the web
    (`used_internal_kb`/`used_external_kb`) without listing a source (default
    true). An answer claiming neither may have no sources: "I don't know"."""
    question: str | None = None
    """The user's question (templates allowed): with it, a small embedded model
    answers in the guided form (numbered passages, then this question; see
    `_rag_tools.guided`) instead of writing the whole call."""
