"""`knowledge`: search a knowledge base and hand the passages to later blocks.

    - id: search
      type: knowledge
      with: {knowledge_base: policies, query: "{{input.query}}", top_k: 3,
             filters: {category: [policies, legal]}, mode: hybrid}

The knowledge layer is `services["knowledge"]` when the caller passed one
to the run, else the default store (`FLOWFORGE_KNOWLEDGE_URL`, or
`knowledge.db` beside the main database), opened once per process.
A passage holding instructions addressed to the model is withheld from
`results` and `context` (`flowforge.knowledge.injection`) and reported in a
`progress` event.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from flowforge.blocks.base import BlockConfig, BlockContext, BlockType, Output, policy_of
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError, FlowforgeError, WorkflowError
from flowforge.workflow.policy import CapabilityUse

__all__ = ["KnowledgeBlock", "KnowledgeConfig"]


class KnowledgeConfig(BlockConfig):
    knowledge_base: str = Field(min_length=1)
    """Name of the knowledge base to search (`flowforge kb list` shows them)."""
    query: str
    """What to search for (templates allowed, e.g. `{{input.query}}`)."""
    top_k: int = Field(5, ge=1, le=100)
    """How many passages to return."""
    filters: dict[str, str | list[str]] | list[dict[str, Any]] | None = None
    """Tag filters: `{category: [policies, legal]}` = category is policies OR legal
    (Sim's `"policies|OR|legal"` and `[{tagName, tagValue}]` too); several tags must
    all match. Applied inside the search. A filter no document of the base can match
    fails the block naming the tags and values the base has (and `flowforge
    validate` refuses it when the base exists)."""
    mode: Literal["vector", "text", "hybrid"] = "hybrid"
    """`vector` (meaning), `text` (BM25 words) or `hybrid` (both, rank-fused)."""
    min_similarity: float | None = Field(None, ge=-1, le=1)
    """Drop passages whose similarity is below this (cosine; BM25 mapped to 0..1 in text mode)."""
    sources: list[str] = Field(default_factory=list)
    """Files or folders (relative to the workflow file) that make up the knowledge base:
    it is created if missing and made to mirror them before searching — unchanged documents
    cost a hash, changed ones are re-indexed, ones whose file is gone are removed (the
    `progress` event says which). A document is known by its path inside the source as
    written here (`policies/refunds.md`), so a second clone or a moved folder finds what is
    stored; documents added with `flowforge kb add` stay. Leave empty for a base managed
    with `flowforge kb`."""


@register_block
class KnowledgeBlock(BlockType):
    type_name = "knowledge"
    seed_fields = {"knowledgeBaseId": "knowledge_base", "tagFilters": "filters"}
    Config = KnowledgeConfig
    #: the seed's shape, plus `context` for prompts
    outputs = {
        "results": Output("list of {documentId, documentName, content, chunkIndex, "
                          "similarity, metadata: {tags, chunkId, createdAt, ...}}",
                          "The passages found, best first."),
        "query": Output("string", "The query searched."),
        "totalResults": Output("integer", "How many passages were found."),
        "mode": Output("`vector`, `text` or `hybrid`", "How it searched."),
        "cost": Output("{input, output, total}", "What embedding the query cost in USD."),
        "context": Output("string", "The passages joined by `---` lines, ready for a prompt "
                          "(`{{search.context}}`)."),
    }

    @classmethod
    def capabilities(cls, spec: Any) -> list[CapabilityUse]:
        if spec.with_.get("sources"):
            return [CapabilityUse("server_files", "sources",
                                  "building a knowledge base from files on the server")]
        return []

    @classmethod
    def mirrors(cls, spec: Any) -> tuple[str, str, str, tuple[str, ...]] | None:
        """A base named as written, made to mirror its `sources:` (each as
        the sync names it: `./policies/` is `policies`)."""
        from flowforge.knowledge.sync import source_label

        name, sources = spec.with_.get("knowledge_base"), spec.with_.get("sources")
        if not isinstance(name, str) or "{{" in name or not isinstance(sources, list) or \
                not sources or not all(isinstance(source, str) for source in sources):
            return None
        return ("knowledge base", name, "sources",
                tuple(sorted({source_label(source) for source in sources})))

    @classmethod
    async def run(cls, context: BlockContext, config: KnowledgeConfig) -> Any:
        from flowforge.knowledge.api import knowledge_for
        from flowforge.knowledge.injection import screen_results, withheld_event
        policy = policy_of(context)
        policy.check_kb_id(config.knowledge_base, "with.knowledge_base")
        if config.sources:
            policy.check_file(config.sources, "with.sources")
        try:
            knowledge = await knowledge_for(context)
            if config.sources:
                await _sync_sources(context, knowledge, config)
            started = time.perf_counter()
            result = await knowledge.search(config.knowledge_base, config.query,
                                            top_k=config.top_k, filters=config.filters,
                                            mode=config.mode,
                                            min_similarity=config.min_similarity)
            context.emit("knowledge_searched", knowledge_base=config.knowledge_base,
                         query=config.query, mode=config.mode,
                         results=result.get("totalResults"),
                         duration_ms=round((time.perf_counter() - started) * 1000, 3))
        except FlowforgeError as exc:
            raise BlockError(context.block_id, cls.type_name, str(exc)) from None
        # a passage that talks to the model is data gone wrong: withheld, and said so
        result, findings = screen_results(result, knowledge_base=config.knowledge_base)
        if findings:
            context.emit("progress", **withheld_event(findings))
        context.emit("progress", message=f"{result['totalResults']} passage(s) from "
                                         f"'{config.knowledge_base}'")
        return result


async def _sync_sources(context: BlockContext, knowledge: Any, config: KnowledgeConfig) -> None:
    """Create the base if needed and make it mirror its declared sources
    (`knowledge.sync`: unchanged documents cost a hash)."""
    from flowforge.knowledge.sync import source_label
    from flowforge.workflow.paths import resolve_path

    root = getattr(context, "source_dir", Path())      # the document's, or a server's root
    try:
        paths = {source_label(source): resolve_path(source, root, "knowledge source")
                 for source in config.sources}
    except WorkflowError as exc:
        raise BlockError(context.block_id, "knowledge", str(exc)) from None
    missing = [str(path) for path in paths.values() if not path.exists()]
    if missing:
        raise BlockError(context.block_id, "knowledge",
                         f"knowledge sources not found: {', '.join(missing)}")
    await knowledge.create(config.knowledge_base, exist_ok=True)
    report = await knowledge.sync_paths(config.knowledge_base, paths)
    context.emit("progress", message=f"knowledge base '{config.knowledge_base}' in sync with "
                                     f"{len(paths)} source(s): {len(report.added)} added, "
                                     f"{len(report.updated)} updated, {len(report.removed)} "
                                     f"removed", report=_report(report))
    if report.undeclared:
        context.emit("warning", message=(
            f"knowledge base '{config.knowledge_base}': removed the documents synced from "
            f"{', '.join(report.undeclared)}, which this block's `sources:` do not declare. "
            f"If another workflow syncs this base from them, each run of either undoes the "
            f"other's: give each workflow a knowledge base of its own"))


def _report(report: Any) -> Any:
    import dataclasses

    return dataclasses.asdict(report) if dataclasses.is_dataclass(report) else str(report)
