"""`knowledge_search`: the tool agents call to search a knowledge base.

The model supplies the query (and may narrow `top_k` or add filters); the
workflow pre-fills the knowledge base and the filters it must respect.
Pre-filled filters always apply: the model's filters can only narrow them
(a tag the workflow fixed cannot be widened by the model).

Small API, three entry points:

    tool_spec(knowledge_base=None) -> {name, description, parameters}
        The JSON-Schema tool definition. `knowledge_base` becomes a required
        parameter only when the workflow did not pre-fill one.

    await execute(arguments, prefilled, knowledge=None) -> dict
        Run it: `arguments` from the model ({query, top_k?, filters?,
        knowledge_base?}), `prefilled` from the workflow ({knowledge_base,
        filters, top_k, mode, min_similarity}). Returns the search result
        (`flowforge.knowledge.search`'s shape, `context` included), with
        passages that address the model withheld (`knowledge.injection`).

    knowledge_search_tool(context=None, name=None, description=None, **prefilled) -> Tool
        The same as a `flowforge.tools.spec.Tool` for the agent's tool loop;
        `context` (a BlockContext) lets it use `services["knowledge"]`.
"""

from __future__ import annotations

from typing import Any, Mapping

from flowforge.errors import ToolError

__all__ = ["TOOL_NAME", "tool_spec", "execute", "knowledge_search_tool"]

TOOL_NAME = "knowledge_search"
_DESCRIPTION = ("Search the knowledge base for passages relevant to a question. Use it before "
                "answering anything the documents may cover; cite what it returns.")


def tool_spec(knowledge_base: str | None = None, *, name: str | None = None,
              description: str | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "query": {"type": "string", "description": "What to look for, in natural language."},
        "top_k": {"type": "integer", "minimum": 1, "maximum": 20,
                  "description": "How many passages to return (default 5)."},
        "filters": {"type": "object",
                    "description": "Tag filters, e.g. {\"category\": [\"policies\", \"legal\"]}: "
                                   "every tag must match one of its values.",
                    "additionalProperties": {"anyOf": [{"type": "string"},
                                                       {"type": "array",
                                                        "items": {"type": "string"}}]}},
    }
    required = ["query"]
    if not knowledge_base:
        properties["knowledge_base"] = {"type": "string",
                                        "description": "Name of the knowledge base to search."}
        required.append("knowledge_base")
    about = description or (f"{_DESCRIPTION} Searches the '{knowledge_base}' knowledge base."
                            if knowledge_base else _DESCRIPTION)
    return {"name": name or TOOL_NAME, "description": about,
            "parameters": {"type": "object", "properties": properties, "required": required,
                           "additionalProperties": False}}


def _merge_filters(fixed: Any, asked: Any) -> dict[str, list[str]]:
    """The workflow's filters narrowed by the model's; a ToolError, saying what the
    workflow allows, when the model asked only for values it excludes (nothing
    could match: an empty result would read as "nothing relevant")."""
    from flowforge.knowledge.search import check_filters
    fixed_tags, asked_tags = check_filters(fixed), check_filters(asked)
    merged = dict(fixed_tags)
    for tag, values in asked_tags.items():
        if tag in merged:
            kept = [v for v in values if v in merged[tag]]
            if not kept:
                raise ToolError(f"knowledge_search: filters.{tag}: {', '.join(values)} is "
                                f"outside what this workflow searches ({tag} = "
                                f"{', '.join(merged[tag])}); leave {tag} out or pick one of "
                                f"those")
            merged[tag] = kept
        else:
            merged[tag] = values
    return merged


async def execute(arguments: Mapping[str, Any], prefilled: Mapping[str, Any] | None = None,
                  knowledge: Any = None) -> dict[str, Any]:
    from flowforge.errors import FlowforgeError
    from flowforge.knowledge.api import open_knowledge
    from flowforge.knowledge.injection import screen_results

    prefilled = dict(prefilled or {})
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError("knowledge_search: `query` must be a non-empty string")
    base = prefilled.get("knowledge_base") or arguments.get("knowledge_base")
    if not base:
        raise ToolError("knowledge_search: no knowledge base - pre-fill `knowledge_base` in the "
                        "workflow or pass it as an argument")
    top_k = arguments.get("top_k") or prefilled.get("top_k") or 5
    if not isinstance(top_k, int) or isinstance(top_k, bool):
        raise ToolError(f"knowledge_search: `top_k` must be an integer, got {top_k!r}")
    cap = prefilled.get("top_k")
    if isinstance(cap, int) and arguments.get("top_k"):
        top_k = min(top_k, max(cap, 1) * 4)
    mode = prefilled.get("mode") or "hybrid"
    knowledge = knowledge or await open_knowledge()
    try:
        filters = _merge_filters(prefilled.get("filters"), arguments.get("filters"))
        found = await knowledge.search(base, query, top_k=max(1, min(top_k, 20)),
                                       filters=filters,
                                       mode=mode,
                                       min_similarity=prefilled.get("min_similarity"))
        return screen_results(found, knowledge_base=base)[0]
    except FlowforgeError as exc:
        raise ToolError(f"knowledge_search: {exc}") from None


def knowledge_search_tool(context: Any = None, name: str | None = None,
                          description: str | None = None, **prefilled: Any):
    """A `Tool` for the agent's tool loop, with `prefilled` fixed by the workflow
    (`knowledge_base`, `filters`, `top_k`, `mode`, `min_similarity`)."""
    from flowforge.knowledge.api import knowledge_for
    from flowforge.tools.spec import Tool

    unknown = set(prefilled) - {"knowledge_base", "filters", "top_k", "mode", "min_similarity"}
    if unknown:
        raise ToolError(f"knowledge_search: unknown option(s) {', '.join(sorted(unknown))} - use "
                        f"knowledge_base, filters, top_k, mode, min_similarity")
    spec = tool_spec(prefilled.get("knowledge_base"), name=name, description=description)

    async def run(arguments: dict[str, Any], tool_context: Any = None) -> Any:
        block = getattr(tool_context, "block_context", None) or context
        found = await execute(arguments, prefilled, await knowledge_for(block))
        withheld = [hit["withheld"] for hit in found.get("results") or [] if hit.get("withheld")]
        emit = getattr(tool_context, "emit", None)
        if withheld and emit is not None:
            emit("progress", message=f"withheld {len(withheld)} passage(s) holding "
                                     f"instructions addressed to an AI assistant",
                 withheld=withheld)
        return found

    return Tool(name=spec["name"], description=spec["description"],
                parameters=spec["parameters"], execute=run, kind="knowledge")
