"""`router`: a model picks which one of the router's outgoing blocks runs.

    - id: triage
      type: router
      with: {prompt: "Standard Response if accuracy >= 8, else Needs Review. Accuracy: {{grade.accuracy}}"}
    - {id: standard, type: response, name: Standard Response, after: [triage], ...}
    - {id: review, type: response, name: Needs Review, after: [triage], ...}

The candidates are the blocks the router's edges lead to.  The routing
prompt lists each one (id, type, name, description, the system prompt of an
agent, its configuration); the routing instructions are the user message,
read last.  The model answers at temperature 0 with a JSON Schema whose
`route` is an enum of the candidate ids, sorted (a local model is
grammar-constrained to it; a bare id in plain text is accepted too).  No
part of the prompt or the schema favours a candidate for being listed first
or last (`routing_prompt`).  An answer naming no candidate is shown to the model with the
error once; a second one fails the block.  Only the chosen branch runs; the
others are skipped.

Each candidate's `currentState` (in `targets`) is its output at decision time
(its blockData, as Sim's executor gives it): inside a loop, what it gave in
the pass before (Sim keeps one state per block across iterations, so a router
in a loop sees what its branches did last time); null when it has not run yet.
A candidate with a state shows it in the routing prompt too.

Strategies (`strategy:`): `llm` (above, the default); `semantic` embeds the
text to route (`input`, default the prompt) and each candidate (its name and
description, or `routes: {<id>: {description, examples: [...]}}`) with the
local embedding model and picks the closest, with no LLM call; `hybrid`
does the same but asks the LLM, among the candidates within `margin` of the
best only, when the best two are closer than `margin`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from flowforge.blocks._llm import (USAGE_OUTPUTS, LLMBlockConfig, ModelCalls,
                                   choose_model, provider_options, setting)
from flowforge.blocks.base import BlockContext, BlockType, Output, Routed, policy_of
from flowforge.blocks.type_table import register_block
from flowforge.errors import BlockError
from flowforge.providers.base import Message
from flowforge.providers.resolve import key_variables
from flowforge.providers.structured import StructuredAnswerError, ask_structured
from flowforge.workflow.graph import DATA, Node

__all__ = ["RouterBlock", "RouterConfig", "routing_prompt", "candidates_of"]

_CONFIG_LIMIT = 600


class RouteHint(BaseModel):
    """What a candidate stands for, for semantic routing."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    description: str | None = None
    """Replaces the block's name and description."""
    examples: list[str] = Field(default_factory=list)
    """Things users say that belong to this route."""


class RouterConfig(LLMBlockConfig):
    prompt: str
    """Routing instructions and the facts to route on (templates allowed)."""
    temperature: float = Field(0.0, ge=0, le=2)
    """0 by default: routing should be repeatable."""
    strategy: Literal["llm", "semantic", "hybrid"] = "llm"
    """`llm` (the model picks), `semantic` (closest by embeddings, no LLM call), or
    `hybrid` (semantic, asking the LLM only when the best two are within `margin`)."""
    input: str | None = None
    """Text routed by `semantic`/`hybrid` (default: `prompt`), e.g. the user's message."""
    routes: dict[str, RouteHint] = Field(default_factory=dict)
    """Per-candidate `description` and `examples` for `semantic`/`hybrid`."""
    margin: float = Field(0.05, ge=0, le=2)
    """`hybrid`: similarity gap under which the LLM decides between the closest."""
    embedding_model: str | None = None
    """Embedding model for `semantic`/`hybrid` (default: the local MiniLM)."""


def candidates_of(context: BlockContext) -> list[Node]:
    """Outgoing blocks reached by a data edge (an `on_error` handler is not a route)."""
    return [node for node in context.successors()
            if node.inputs.get(context.block_id, DATA) == DATA]


def _describe(node: Node, state: Any = None) -> str:
    lines = [f"- ID: {node.id}", f"  Type: {node.type}", f"  Title: {node.name}"]
    if node.spec.description:
        lines.append(f"  Description: {node.spec.description}")
    config = dict(node.spec.with_)
    if node.type == "agent" and isinstance(config.get("system"), str):
        lines.append(f"  System Prompt: {config.pop('system')}")
    if config:
        text = json.dumps(config, ensure_ascii=False, default=str)
        if len(text) > _CONFIG_LIMIT:
            text = text[:_CONFIG_LIMIT] + "..."
        lines.append(f"  Configuration: {text}")
    if state is not None:
        text = json.dumps(state, ensure_ascii=False, default=str)
        if len(text) > _CONFIG_LIMIT:
            text = text[:_CONFIG_LIMIT] + "..."
        lines.append(f"  Current State: {text}")
    return "\n".join(lines)


def routing_prompt(candidates: list[Node], states: dict[str, Any] | None = None) -> str:
    """The system prompt: what the candidates are for, and the answer's form.

    Nothing in it favours a candidate by its place.  It used to end with the
    routing instructions and then "one of: billing, technical" (the graph's
    order), and the JSON Schema listed the ids in that order too: a small
    model sent "The app crashes when I open settings" to billing, and with
    the two branches swapped sent every message to the one listed last.  Now
    the instructions (with the request) are the user message alone, read
    last; the candidates are listed once, each with its description; the
    schema's enum is sorted, the same whatever the document's order."""
    states = states or {}
    blocks = "\n".join(_describe(node, states.get(node.id)) for node in candidates)
    return (
        "You are a routing agent. The user's message holds the routing instructions and "
        "the request. Choose exactly ONE block to handle it: the block whose title and "
        "description fit it best.\n\n"
        f"Blocks:\n{blocks}\n\n"
        "Answer with only a JSON object {\"route\": \"<the chosen block's ID>\"}.")


def _route_schema(ids: list[str]) -> dict[str, Any]:
    """Sorted ids: the grammar and the schema shown are the same in any branch order."""
    return {"type": "object", "properties": {"route": {"type": "string", "enum": sorted(ids)}},
            "required": ["route"], "additionalProperties": False}


def _chooser(candidates: list[Node]):
    by_key: dict[str, str] = {}
    for node in candidates:
        by_key[node.id.lower()] = node.id
        by_key.setdefault(node.name.lower(), node.id)

    def parse(text: str) -> str:
        answer: Any = text.strip()
        try:
            value = json.loads(answer)
        except (json.JSONDecodeError, TypeError):
            value = None
        if isinstance(value, dict):
            answer = value.get("route") or value.get("blockId") or value.get("id") or ""
        elif isinstance(value, str):
            answer = value
        key = str(answer).strip().strip("\"'`.").lower()
        if key in by_key:
            return by_key[key]
        found = {by_key[k] for k in by_key
                 if re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])", str(answer).lower())}
        if len(found) == 1:
            return found.pop()
        raise ValueError(f"the answer {str(text).strip()[:200]!r} names none of the candidate "
                         f"blocks; answer with exactly one of: "
                         f"{', '.join(node.id for node in candidates)}")

    return parse


@register_block
class RouterBlock(BlockType):
    """A model chooses one outgoing branch; the others are skipped."""

    type_name = "router"
    seed_fields = {"systemPrompt": "system", "userPrompt": "prompt"}
    Config = RouterConfig
    outputs = {
        "prompt": Output("string", "The routing instructions given."),
        **USAGE_OUTPUTS,
        "selectedPath": Output("{blockId, blockType, blockTitle}", "The block chosen."),
        "selectedRoute": Output("string", "The chosen block's id."),
        "targets": Output("list of {id, type, title, description, currentState}",
                          "Every candidate, with its output at decision time."),
        "scores": Output("object", "`semantic` and `hybrid` only: each candidate's "
                         "similarity to the text routed, by id."),
    }
    routes = True

    @classmethod
    async def run(cls, context: BlockContext, config: RouterConfig) -> Any:
        candidates = candidates_of(context)
        states = _current_states(context, candidates)
        if not candidates:
            raise BlockError(context.block_id, cls.type_name,
                             "a router needs outgoing blocks to choose from; give each "
                             f"candidate `after: [{context.block_id}]`")
        unknown = sorted(set(config.routes) - {node.id for node in candidates})
        if unknown:
            raise BlockError(context.block_id, cls.type_name,
                             f"`routes` names block(s) that are not candidates: "
                             f"{', '.join(unknown)} (candidates: "
                             f"{', '.join(node.id for node in candidates)})")
        calls = ModelCalls(context, choose_model(context, config.model),
                           fallback=tuple(setting(context, config.fallback, "fallback", ()) or ()),
                           api_key=config.api_key, config=config)
        scores: list[tuple[str, float]] | None = None
        chosen = None
        if config.strategy != "llm":
            scores = await _semantic_scores(context, config, candidates)
            best = scores[0][1]
            close = [cid for cid, score in scores if best - score <= config.margin]
            if config.strategy == "semantic" or len(close) == 1:
                chosen = scores[0][0]
            else:
                candidates = [node for node in candidates if node.id in close]
        if chosen is None:
            chosen = await _ask_model(context, config, calls, candidates, states)
        node = next(node for node in candidates if node.id == chosen)
        output = {"prompt": config.prompt, **calls.usage(),
                  "selectedPath": {"blockId": node.id, "blockType": node.type,
                                   "blockTitle": node.name},
                  "selectedRoute": node.id,
                  "targets": [{"id": n.id, "type": n.type, "title": n.name,
                               "description": n.spec.description,
                               "currentState": states.get(n.id)}
                              for n in candidates_of(context)]}
        if scores is not None:
            output["scores"] = dict(scores)
            if calls.count == 0:
                output["model"] = config.embedding_model or "local embeddings"
        return Routed(output, (node.id,))


def _current_states(context: BlockContext, candidates: list[Node]) -> dict[str, Any]:
    """Each candidate's output so far: in this pass, else in a loop's pass
    before (None: it has not run)."""
    data = context.block_data()
    loop = context.scope.get("loop")
    previous = loop.get("previous") if isinstance(loop, dict) else None
    previous = previous if isinstance(previous, dict) else {}
    return {node.id: data.get(node.id, previous.get(node.id)) for node in candidates}


async def _ask_model(context: BlockContext, config: RouterConfig, calls: ModelCalls,
                     candidates: list[Node], states: dict[str, Any]) -> str:
    ids = [node.id for node in candidates]
    messages = [Message("system", routing_prompt(candidates, states)),
                Message("user", config.prompt)]
    try:
        chosen, _response, _ = await ask_structured(
            calls, messages, _route_schema(ids), parse=_chooser(candidates),
            temperature=config.temperature,
            max_tokens=setting(context, config.max_tokens, "max_tokens"))
    except StructuredAnswerError as exc:
        raise BlockError(context.block_id, RouterBlock.type_name, str(exc)) from None
    return chosen


async def _semantic_scores(context: BlockContext, config: RouterConfig,
                           candidates: list[Node]) -> list[tuple[str, float]]:
    try:
        from flowforge.knowledge.semantic import rank_routes
    except ImportError as exc:
        raise BlockError(context.block_id, RouterBlock.type_name,
                         f"strategy '{config.strategy}' needs the knowledge extra "
                         f"(pip install 'flowforge[knowledge]'): {exc}") from None
    described = []
    for node in candidates:
        hint = config.routes.get(node.id) or RouteHint()
        described.append({"id": node.id, "name": node.name,
                          "description": hint.description or node.spec.description,
                          "examples": hint.examples})
    services = getattr(context, "services", None) or {}
    try:
        embedder = services.get("embedder") or _embedder(context, config.embedding_model)
        return await rank_routes(config.input or config.prompt, described, embedder)
    except Exception as exc:  # noqa: BLE001 - a missing model file, an unknown model name
        raise BlockError(context.block_id, RouterBlock.type_name,
                         f"semantic routing failed: {exc}") from None


def _embedder(context: BlockContext, model: str | None) -> Any:
    """The embedder for `model`, through the policy gate: on a server a hosted
    embedding model is paid with the key the run carries (the user's own, or
    the server's when it shares them), never with the process environment's."""
    from flowforge.knowledge.embeddings import (DEFAULT_MODEL, OpenAIEmbedder, get_embedder,
                                                normalise_model_name)

    name = normalise_model_name(model)
    policy = policy_of(context)
    policy.check_model(name, "with.embedding_model")
    if policy.trusted or name == DEFAULT_MODEL:
        return get_embedder(model)
    env = provider_options(context).env
    key = next((env[k] for k in key_variables(name) if env.get(k)), None)
    if key is None and not name.startswith("openai-compatible/"):
        raise BlockError(context.block_id, RouterBlock.type_name,
                         f"the embedding model '{name}' needs a key: store yours as the "
                         f"secret {key_variables(name)[0]}")
    return OpenAIEmbedder(name, api_key=key or "none")
