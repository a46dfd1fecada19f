"""The agent's `tools:` list, turned into `Tool` objects for one run.

Each entry is one of (see the agent block's docstring for examples):

    - lookup_order                       # a function registered with @flowforge.function
    - {function: lookup_order, name: find_order, description: ..., runs_commands: false}
    - {block: {type: http, name: weather, description: ...,
               with: {method: GET}}}     # a block type as a tool: the model fills the
                                         # remaining `with` fields (JSON Schema from its Config)
    - {workflow: flows/refund.yaml, name: refund, description: ...,
       parameters: {...}}                # another workflow; arguments are its inputs
    - {http: {url: "https://api.example.com/orders/{order_id}", method: GET},
       name: get_order, description: ..., parameters: {...}}
    - {mcp: {command: python, args: [-m, mcp_server_time]}}     # every tool of the server
    - {mcp: {url: "https://host/mcp", headers: {...}, include: [search]}}
    - {knowledge_search: {knowledge_base: policies, filters: {category: legal}, top_k: 3}}
    - {type: knowledge, operation: search,    # Sim's shape: the same knowledge_search
       params: {knowledgeBaseId: policies, topK: 3}}

This module lives in the blocks layer because block tools run block types;
everything else it builds comes from `flowforge.tools`.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, \
    model_validator

from flowforge.blocks._llm import block_data, name_mapping
from flowforge.blocks._rag_tools import (RAG_TOOL_KINDS, FinalResponseOptions,
                                         KeywordIndexOptions, RagSearchOptions,
                                         WebSearchOptions, build_rag_tool)
from flowforge.blocks.base import Routed, is_set, policy_of
from flowforge.errors import FlowforgeError, ToolError
from flowforge.tools.http import http_tool
from flowforge.tools.mcp_client import McpServer, open_mcp_tools
from flowforge.tools.python import function_tool
from flowforge.tools.spec import Tool, ToolContext
from flowforge.hints import did_you_mean
from flowforge.workflow.policy import CapabilityUse, looks_like_path
from flowforge.workflow.seed_fields import canonical_fields

__all__ = ["ToolEntry", "HttpToolTarget", "BlockToolTarget", "build_tools", "tool_context",
           "tool_capabilities", "tool_functions"]


_KINDS = ("function", "block", "workflow", "http", "mcp", "knowledge_search") + RAG_TOOL_KINDS


class HttpToolTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    url: str
    """Endpoint; `{name}` placeholders are filled from the model's arguments."""
    method: str = "GET"
    """HTTP method; with GET, DELETE and HEAD the model's other arguments go in the
    query string, else in a JSON body."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Request headers (a `{{secrets.NAME}}` may go in a value)."""
    timeout: float = Field(30.0, gt=0)
    """Seconds for the whole request."""


#: Sim's spellings of tool options that the camelCase rule cannot guess
_SEED_OPTIONS = {"knowledgeBaseId": "knowledge_base", "knowledgeBaseIds": "knowledge_bases",
                 "tagFilters": "filters"}


def _canonical(options: dict[str, Any], fields: Any, renames: Any, where: str
               ) -> dict[str, Any]:
    """`options` with the seed's names (`topK`, `knowledgeBaseId`) renamed to
    the canonical ones, as a block's `with` is (`workflow.seed_fields`)."""
    renamed, problems = canonical_fields(options, fields, renames)
    if problems:
        raise ValueError("; ".join(f"{where}.{key}: {message}" for key, message in problems))
    return renamed


class BlockToolTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, populate_by_name=True)

    type: str
    """Block type to run (not a container or routing block)."""
    name: str | None = None
    """The tool's name the model sees when the entry sets none (default: the block type)."""
    description: str | None = None
    """What the model reads of the tool when the entry sets none (default: the block
    type's first docstring line)."""
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    """Fixed configuration; the model supplies the other fields."""

    @model_validator(mode="after")
    def _usable_block(self) -> BlockToolTarget:
        """What the tool's first call would refuse, refused when the document is
        checked: an unknown type, a routing one, a fixed field the type lacks."""
        from flowforge.blocks.type_table import block_types

        known = block_types()
        block_type = known.get(self.type)
        if block_type is None:
            raise ValueError(f"unknown block type '{self.type}'{did_you_mean(self.type, known)}")
        if block_type.container or block_type.routes:
            raise ValueError(f"a '{self.type}' block cannot be used as a tool (containers and "
                             f"routing blocks choose graph edges)")
        fields = block_type.Config.model_fields
        self.with_ = _canonical(self.with_, fields, block_type.seed_fields, "with")
        if block_type.Config.model_config.get("extra") == "forbid":
            for key in self.with_:
                if key not in fields:
                    raise ValueError(f"with.{key}: a '{self.type}' block has no field "
                                     f"'{key}'{did_you_mean(str(key), fields)}; its fields: "
                                     f"{', '.join(fields)}")
        return self


class KnowledgeSearchOptions(BaseModel):
    """What a workflow fixes of an agent's `knowledge_search` tool."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    knowledge_base: str | None = None
    """The base searched (else the model names it)."""
    filters: dict[str, str | list[str]] | list[dict[str, Any]] | None = None
    """Tag filters applied to every search (the model's are added to them), written as
    a knowledge block's: `{category: [policies, legal]}`, `"policies|OR|legal"`, or
    Sim's `[{tagName: category, tagValue: policies}]`."""
    top_k: int | None = Field(None, ge=1, le=100)
    """Passages per search (the model may ask for up to four times as many)."""
    mode: Literal["vector", "text", "hybrid"] | None = None
    """How passages are found: by meaning (`vector`), by words (`text`), or both (`hybrid`)."""
    min_similarity: float | None = Field(None, ge=-1, le=1)
    """Passages less similar to the query than this are left out."""

    @field_validator("filters")
    @classmethod
    def _readable_filters(cls, value: Any) -> Any:
        """A filter the search would refuse is refused when the document is checked."""
        if value is not None:
            from flowforge.knowledge.search import check_filters
            try:
                check_filters(value)
            except FlowforgeError as exc:
                raise ValueError(str(exc)) from None
        return value


#: Sim's agent tool entry keys that only its editor reads (a label, a panel state)
_SIM_TOOL_DISPLAY = ("title", "isExpanded", "toolId")


def _sim_tool(data: dict[str, Any]) -> dict[str, Any]:
    """Sim's agent tool shape, `{type: knowledge, operation: search, params: {...}}`,
    as the entry it means: `{knowledge_search: {...params}}`, or for another block
    type `{block: {type, with: params}}`.  What it cannot mean is refused, named."""
    kind, operation = data.get("type"), data.get("operation")
    params = data.get("params") or {}
    unknown = sorted(set(data) - {"type", "operation", "params", "usageControl",
                                  *_SIM_TOOL_DISPLAY})
    if unknown:
        raise ValueError(f"a tool written Sim's way ({{type, operation, params}}) has no "
                         f"field {', '.join(map(repr, unknown))}")
    if not isinstance(params, dict):
        raise ValueError("params: write the tool's fixed options as a mapping")
    control = data.get("usageControl", "auto")
    if control != "auto":
        raise ValueError(f"usageControl: {control!r} is written on the agent here: "
                         f"`required_tools: [<tool name>]` (force) or leave the tool out "
                         f"(none)")
    if kind == "knowledge":
        if operation not in (None, "search", "knowledge_search"):
            raise ValueError(f"operation: a knowledge tool searches (operation: search); "
                             f"{operation!r} has no counterpart")
        if "query" in params:
            raise ValueError("params.query: the model writes a knowledge search's query; "
                             "leave it out (or use a `knowledge` block)")
        return {"knowledge_search": params}
    if operation is not None:
        raise ValueError(f"operation: a '{kind}' tool takes no operation")
    return {"block": {"type": kind, "with": params}}


class ToolEntry(BaseModel):
    """One entry of an agent's `tools:` (exactly one of the kinds)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    function: str | None = None
    """A function registered with `@flowforge.function`."""
    block: BlockToolTarget | None = None
    """A block type used as a tool."""
    workflow: str | None = None
    """Another workflow (path or id) used as a tool."""
    http: HttpToolTarget | None = None
    """An HTTP endpoint used as a tool."""
    mcp: McpServer | None = None
    """An MCP server: all its tools (or `include:`), discovered at run time."""
    knowledge_search: KnowledgeSearchOptions | None = None
    """Search a knowledge base: `{knowledge_base, filters, top_k}`."""
    rag_search: RagSearchOptions | None = None
    """The chat's `knowledge_base_search(query, kb_id, top_k)`."""
    web_search: WebSearchOptions | None = None
    """Search the web: `{backend: offline | perplexity | tavily, ...}`."""
    keyword_index: KeywordIndexOptions | None = None
    """The chat's `index_keywords(keywords)`."""
    final_response: FinalResponseOptions | None = None
    """The chat's `generate_response(answer, sources, ...)`: the only way to answer."""
    name: str | None = None
    """Tool name the model sees (default: from the target)."""
    description: str | None = None
    """What the tool does, for the model."""
    parameters: dict[str, Any] | None = None
    """JSON Schema of the arguments (default: derived from the target)."""
    runs_commands: bool = False
    """The tool runs shell commands: shell metacharacters are refused."""

    @model_validator(mode="before")
    @classmethod
    def _seed_spellings(cls, data: Any) -> Any:
        """Sim's camelCase option names (`topK`, `knowledgeBaseId`) read as the
        canonical ones, here, where both `validate` and the run read them."""
        if not isinstance(data, dict):
            return data
        if isinstance(data.get("type"), str) and not set(data) & set(_KINDS):
            data = _sim_tool(data)
        out = dict(data)
        for kind, options in data.items():
            model = _OPTION_MODELS.get(kind)
            if model is not None and isinstance(options, dict):
                out[kind] = _canonical(options, model.model_fields, _SEED_OPTIONS, kind)
        return out

    @model_validator(mode="after")
    def _one_kind(self) -> ToolEntry:
        kinds = [k for k in _KINDS
                 if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"a tool entry needs exactly one of {', '.join(_KINDS)} "
                             f"(got {', '.join(kinds) or 'none'})")
        if self.http is not None and not self.name:
            raise ValueError("an http tool needs a `name`")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in _KINDS if getattr(self, k) is not None)


_OPTION_MODELS: dict[str, type[BaseModel]] = {
    "knowledge_search": KnowledgeSearchOptions, "rag_search": RagSearchOptions,
    "web_search": WebSearchOptions, "keyword_index": KeywordIndexOptions,
    "final_response": FinalResponseOptions}


def tool_context(context: Any) -> ToolContext:
    return ToolContext(run_id=context.run_id, workflow_id=context.workflow_id,
                       block_id=context.block_id, block_data=block_data(context),
                       block_name_mapping=name_mapping(context),
                       variables=dict(context.scope.get("vars") or {}), env=context.env,
                       user=context.user, emit=context.emit, block_context=context,
                       idempotency_key=getattr(context, "idempotency_key", None))


async def build_tools(entries: list[str | ToolEntry], context: Any, stack: AsyncExitStack, *,
                      allow_private_network: bool = False) -> dict[str, Tool]:
    """name -> Tool for every entry; MCP connections stay open on `stack`."""
    tools: dict[str, Tool] = {}
    shared: dict[str, Any] = {}          # what the chat's tools of one agent share
    for index, raw in enumerate(entries):
        entry = ToolEntry(function=raw) if isinstance(raw, str) else raw
        if isinstance(raw, str) and raw == "knowledge_search":
            entry = ToolEntry(knowledge_search=KnowledgeSearchOptions())
        try:
            built = await _build(entry, context, stack, allow_private_network, shared)
        except ToolError as exc:
            raise ToolError(f"tools[{index}] ({entry.kind}): {exc}") from None
        except Exception as exc:  # noqa: BLE001 - NotFound, bad schemas, ...
            raise ToolError(f"tools[{index}] ({entry.kind}): {exc}") from None
        for tool in built:
            if tool.name in tools:
                raise ToolError(f"tools[{index}]: two tools are named '{tool.name}'; give one "
                                f"a different `name` (or an MCP `prefix`)")
            tools[tool.name] = tool
    return tools


def tool_capabilities(entries: Any, allow_private_network: Any = False) -> list[CapabilityUse]:
    """What a `tools:` list (as written) will do that reaches the host."""
    uses: list[CapabilityUse] = []
    if is_set(allow_private_network):
        uses.append(CapabilityUse("private_network", "allow_private_network",
                                  "letting tools call private addresses"))
    if not isinstance(entries, list):
        return uses
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        where = f"tools[{index}]"
        mcp = entry.get("mcp")
        if isinstance(mcp, dict) and mcp.get("command") is not None:
            uses.append(CapabilityUse("local_commands", f"{where}.mcp.command",
                                      f"starting the local command '{mcp.get('command')}' "
                                      f"(an MCP server over stdio; a server may use MCP over "
                                      f"HTTP: `mcp: {{url: ...}}`)"))
        web = entry.get("web_search")
        if isinstance(web, dict) and web.get("folder") is not None and \
                (web.get("backend") or "offline") == "offline":
            uses.append(CapabilityUse("server_files", f"{where}.web_search.folder",
                                      "searching a folder on the server as the offline web"))
        reference = entry.get("workflow")
        if isinstance(reference, str) and looks_like_path(reference):
            uses.append(CapabilityUse("server_files", f"{where}.workflow",
                                      f"using the workflow file '{reference}' as a tool"))
        target = entry.get("block")
        if isinstance(target, dict) and isinstance(target.get("type"), str):
            from flowforge.blocks.type_table import block_types
            from flowforge.workflow.model import BlockSpec

            block_type = block_types().get(target["type"])
            with_ = target.get("with")
            if block_type is not None and isinstance(with_, dict):
                spec = BlockSpec.model_construct(id="tool", type=target["type"], with_=with_)
                uses.extend(CapabilityUse(u.capability, f"{where}.block.with.{u.where}", u.what)
                            for u in block_type.capabilities(spec))
    return uses


def tool_functions(entries: Any) -> list[tuple[str, str]]:
    """The registered functions a `tools:` list (as written) calls, as
    (place in the list, name): `lookup_order`, `{function: lookup_order}`, and a
    `function` block used as a tool.  Templated names are known at run time only."""
    found: list[tuple[str, str]] = []
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        where = f"tools[{index}]"
        if isinstance(entry, str) and entry != "knowledge_search":
            found.append((where, entry))
        elif isinstance(entry, dict) and isinstance(entry.get("function"), str):
            found.append((f"{where}.function", entry["function"]))
        elif isinstance(entry, dict) and isinstance(entry.get("block"), dict) and \
                entry["block"].get("type") == "function" and \
                isinstance((entry["block"].get("with") or {}).get("function"), str):
            found.append((f"{where}.block.with.function", entry["block"]["with"]["function"]))
    return [(where, name) for where, name in found if "{{" not in name]


def _check_entry(entry: ToolEntry, context: Any, allow_private: bool) -> None:
    """The run-time half of `tool_capabilities`."""
    policy = policy_of(context)
    if allow_private:
        policy.require("private_network", "with.allow_private_network",
                       "letting tools call private addresses")
    if entry.mcp is not None and entry.mcp.command is not None:
        policy.require("local_commands", "with.tools",
                       f"starting the local command '{entry.mcp.command}' (MCP over stdio)")
    if entry.workflow is not None:
        policy.check_workflow_ref(entry.workflow, "with.tools")


async def _build(entry: ToolEntry, context: Any, stack: AsyncExitStack,
                 allow_private: bool, shared: dict[str, Any]) -> list[Tool]:
    _check_entry(entry, context, allow_private)
    if entry.kind in RAG_TOOL_KINDS:
        options = getattr(entry, entry.kind).model_dump(exclude_none=True)
        return [build_rag_tool(entry.kind, options, name=entry.name,
                               description=entry.description, parameters=entry.parameters,
                               context=context, shared=shared)]
    if entry.function is not None:
        tool = function_tool(entry.function, name=entry.name, description=entry.description,
                             runs_commands=entry.runs_commands)
        if entry.parameters:
            tool.parameters = entry.parameters
        return [tool]
    if entry.http is not None:
        target = entry.http
        return [http_tool(entry.name or "http", entry.description or f"{target.method} "
                          f"{target.url}", target.url, method=target.method,
                          headers=target.headers, parameters=entry.parameters,
                          timeout=target.timeout, allow_private_network=allow_private)]
    if entry.mcp is not None:
        return await open_mcp_tools(entry.mcp, stack, allow_private)
    if entry.block is not None:
        return [_block_tool(entry, context)]
    if entry.workflow is not None:
        return [_workflow_tool(entry, context)]
    return [_knowledge_tool(entry, context)]


def _block_tool(entry: ToolEntry, context: Any) -> Tool:
    from flowforge.blocks.type_table import get_block_type

    target = entry.block
    assert target is not None
    block_type = get_block_type(target.type)       # known and usable: BlockToolTarget checked
    schema = block_type.Config.model_json_schema()
    fixed = set(target.with_)
    properties = {k: v for k, v in (schema.get("properties") or {}).items() if k not in fixed}
    parameters = entry.parameters or {
        "type": "object", "properties": properties,
        "required": [k for k in schema.get("required") or [] if k not in fixed]}
    if "$defs" in schema and not entry.parameters:
        parameters["$defs"] = schema["$defs"]

    async def execute(arguments: dict[str, Any], tool_ctx: ToolContext) -> Any:
        try:
            config = block_type.Config.model_validate({**target.with_, **arguments})
        except ValidationError as exc:
            raise ToolError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                      for e in exc.errors())) from None
        output = await block_type.run(tool_ctx.block_context, config)
        return output.output if isinstance(output, Routed) else output

    name = entry.name or target.name or target.type
    return Tool(name=name, description=entry.description or target.description or
                (block_type.__doc__ or target.type).strip().splitlines()[0],
                parameters=parameters, execute=execute, kind="block",
                runs_commands=entry.runs_commands)


def _workflow_tool(entry: ToolEntry, context: Any) -> Tool:
    reference = entry.workflow
    assert reference is not None

    async def execute(arguments: dict[str, Any], tool_ctx: ToolContext) -> Any:
        return await tool_ctx.block_context.run_workflow(reference, arguments)

    return Tool(name=entry.name or reference.rsplit("/", 1)[-1].split(".")[0],
                description=entry.description or f"Run the workflow '{reference}'",
                parameters=entry.parameters or {"type": "object", "properties": {}},
                execute=execute, kind="workflow", runs_commands=entry.runs_commands)


def _knowledge_tool(entry: ToolEntry, context: Any) -> Tool:
    try:
        from flowforge.knowledge import tool as knowledge_tool
    except ImportError:
        raise ToolError("knowledge_search needs the knowledge layer (flowforge.knowledge), "
                        "which is not available in this installation") from None
    options = entry.knowledge_search.model_dump(exclude_none=True) \
        if entry.knowledge_search is not None else {}
    return knowledge_tool.knowledge_search_tool(context=context, name=entry.name,
                                                description=entry.description, **options)
