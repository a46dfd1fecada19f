"""Build, and build-then-run: what `flowforge build` and the server's
`/api/create-agent` and `/api/automate` call.

`build_pipeline` is the thinker with the registry chosen and the events
wired; `automate` builds, then runs the Pipeline JSON on the engine (memory
loaded and saved, the run stored) when the build succeeded.
"""

from __future__ import annotations

from typing import Any, Callable

from flowforge.registry import Registry, get_registry
from flowforge.service.pipeline import run_pipeline
from flowforge.thinker import BuildEvents, BuildResult, build

__all__ = ["build_pipeline", "automate"]


async def build_pipeline(intent: str, *, model: str | None = None,
                         registry: Registry | None = None,
                         on_event: Callable[[dict], None] | None = None,
                         events: BuildEvents | None = None) -> BuildResult:
    events = events or BuildEvents()
    if on_event is not None:
        events.bus.observe(on_event)
    return await build(intent, model=model, registry=registry or get_registry(), events=events)


async def automate(intent: str, inputs: dict[str, Any] | None = None, *,
                   model: str | None = None, run_model: str | None = None,
                   user: str | dict[str, Any] | None = None, storage: Any = None,
                   registry: Registry | None = None,
                   on_event: Callable[[dict], None] | None = None,
                   policy: Any = None, services: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """Build a pipeline for `intent`, then run it with `inputs`.
    `run_model` (default: `model`) answers the pipeline's LLM blocks; `policy`
    (None: trusted) limits what the generated pipeline may reach of the host."""
    registry = registry or get_registry()
    result = await build_pipeline(intent, model=model, registry=registry, on_event=on_event)
    answer: dict[str, Any] = {"build": result.to_dict(), "run": None}
    if result.ok and result.pipeline is not None:
        run = await run_pipeline(result.pipeline, inputs or {}, user=user, storage=storage,
                                 model=run_model or model, registry=registry, on_event=on_event,
                                 policy=policy, services=services)
        answer["run"] = run.to_dict()
        answer["run"]["error"] = run.error
    return answer
