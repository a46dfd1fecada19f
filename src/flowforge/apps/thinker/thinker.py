"""The thinker: refined intent -> a tested, validated Pipeline JSON.

    result = await build("Count the words of a text and summarise it",
                         model="openai/gpt-4o", registry=get_registry())
    result.pipeline        # Pipeline JSON, valid for the engine
    result.created         # blocks it wrote, tested and saved (created_by: thinker)

Stages: decompose -> search -> create (and test) the missing blocks ->
wire.  Each emits its events on `result.events` (see `thinker.events`),
which the CLI prints and the server streams, from `start` to `complete
{result: {pipeline_json, status, log}}`.  A build that cannot finish (a
block that fails its first attempt and three retries, wiring still invalid
after one correction, a model error) ends with `complete {ok: false, error,
result: {status: error}}`; it never raises for those, so a stream always
ends with `complete`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from flowforge.errors import FlowforgeError
from flowforge.registry import BlockDefinition, Registry, get_registry
from flowforge.apps.thinker.create import create_block
from flowforge.apps.thinker.decompose import RequiredBlock, decompose
from flowforge.apps.thinker.events import BuildEvents
from flowforge.apps.thinker.llm import ThinkerError, ThinkerLLM, default_build_model
from flowforge.apps.thinker.match import Match, search_blocks
from flowforge.apps.thinker.wire import wire

__all__ = ["build", "BuildResult"]


@dataclass
class BuildResult:
    ok: bool
    intent: str
    pipeline: dict[str, Any] | None = None
    matched: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    error: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    build_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "build_id": self.build_id, "intent": self.intent,
                "pipeline": self.pipeline, "matched": self.matched, "created": self.created,
                "failed": self.failed, "error": self.error, "usage": self.usage}


async def build(intent: str, *, model: str | None = None, registry: Registry | None = None,
                events: BuildEvents | None = None, env: Mapping[str, str] | None = None,
                owner: str | None = None) -> BuildResult:
    """Plan, find, write and test, and wire a pipeline for `intent`.  `env`:
    where the model calls find their keys (default: this process's
    environment); `owner`: the user the blocks it writes belong to (None:
    shared blocks, which only an administrator or the local user writes)."""
    events = events or BuildEvents()
    registry = registry or get_registry()
    llm = ThinkerLLM(model or default_build_model(), events, env=env)
    result = BuildResult(False, intent, build_id=events.build_id)
    log: list[dict[str, Any]] = []
    events.emit("start", intent=intent, model=llm.model, build_id=events.build_id)
    try:
        required: list[RequiredBlock] = await decompose(intent, llm, events, registry)
        log.append({"step": "decompose", "required_blocks": [r.to_dict() for r in required]})
        matches: list[Match]
        matches, missing = await search_blocks(required, registry, events)
        result.matched = [m.block.id for m in matches]
        log.append({"step": "search", "matched": result.matched,
                    "missing": [m.name for m in missing]})
        blocks: dict[str, BlockDefinition] = {m.required.name: m.block for m in matches}
        if missing:
            events.stage("create", missing=[m.name for m in missing])
        for need in missing:
            created = await create_block(need, llm, events, registry, owner=owner)
            if created is None:
                result.failed.append(need.name)
            else:
                result.created.append(created.id)
                blocks[need.name] = created
        if missing:
            log.append({"step": "create", "created": result.created, "failed": result.failed})
            events.stage_result("create", created=result.created, failed=result.failed)
        if result.failed:
            raise ThinkerError("create", f"could not write a block that passes its tests: "
                               f"{', '.join(result.failed)}")
        ordered = [blocks[need.name] for need in required]
        unique = list({b.id: b for b in ordered}.values())
        result.pipeline = await wire(intent, unique, llm, events, registry)
        log.append({"step": "wire", "pipeline_id": result.pipeline.get("id")})
        events.stage_result("wire", pipeline_json=result.pipeline)
        result.ok = True
    except FlowforgeError as exc:
        result.error = str(exc)
        log.append({"step": getattr(exc, "stage", "build"), "error": result.error})
    result.usage = {"tokens": dict(llm.usage), "cost": round(llm.cost, 10)}
    status = "done" if result.ok else "error"
    events.stage("done", status=status)
    events.emit("complete", result={"pipeline_json": result.pipeline, "status": status,
                                    "log": log},
                ok=result.ok, error=result.error, pipeline=result.pipeline,
                matched=result.matched, created=result.created, failed=result.failed,
                usage=result.usage)
    result.events = events.events
    return result
