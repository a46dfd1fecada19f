"""The research orchestrator as a service: start a session (one run of the
shipped orchestrator workflow, `flowforge/apps/research/orchestrator.yaml`)
and, with `research`, wait for its outcome.  What a session takes, gives and
tells its watchers is the application's (`flowforge.apps.research.session`).

    import flowforge.service.research as research
    from flowforge.apps.research.session import research_result
    session = await research.start_research("How do I pitch a tent in wind?",
                                            kb="policies", threshold=0.8)
    session.cancel()                       # or: result = await session.wait()
    result = research_result(await session.wait())
    result.answer, result.scores, result.phases
"""

from __future__ import annotations

from typing import Any, Callable

from flowforge.apps.chat.session import check_base_exists, knowledge_base_for  # the chat's rules
from flowforge.apps.research import ORCHESTRATOR_WORKFLOW, PHASE_WORKFLOWS
from flowforge.apps.research.session import ResearchResult, research_inputs, research_result
from flowforge.service.runs import RunHandle, start_run
from flowforge.workflow.graph import CompiledWorkflow
from flowforge.workflow.policy import TRUSTED, Policy

__all__ = ["orchestrator", "start_research", "research", "nothing_to_search"]

_compiled: CompiledWorkflow | None = None


def orchestrator() -> CompiledWorkflow:
    """The compiled orchestrator, its phases registered by id (so a server
    run, which may not read workflow files, still finds them)."""
    global _compiled
    if _compiled is None:
        from flowforge.service.loading import load, register_workflow

        for path in PHASE_WORKFLOWS:
            register_workflow(path)
        _compiled = load(ORCHESTRATOR_WORKFLOW)
    return _compiled


async def start_research(question: str, *, threshold: float | None = None,
                         max_iterations: int | None = None, kb: str | None = None,
                         web_backend: str | None = None, web_source: str | None = None,
                         brief: bool | None = None, model: str | None = None, user: Any = None, storage: Any = None,
                         services: dict[str, Any] | None = None,
                         on_event: Callable[[dict], None] | None = None,
                         policy: Policy = TRUSTED, run_options: dict[str, Any] | None = None
                         ) -> RunHandle:
    """Start a research session in the background: the run's handle
    (`handle.run_id` is the session id; `cancel()`, `await wait()`).

    `kb` and `web_source` take a knowledge base name or, on one's own machine,
    a folder (kept in sync with a base named after it).  `brief` None: brief
    on the embedded models (`research_inputs`).  `storage` as for `start_run`
    (None: the default database)."""
    inputs = research_inputs(question, threshold=threshold, max_iterations=max_iterations,
                             web_backend=web_backend, brief=brief, model=model)
    if kb:
        inputs["kb"] = await knowledge_base_for(kb, user=user, services=services)
    if web_source:
        inputs["web_source"] = await knowledge_base_for(web_source, user=user,
                                                        services=services, prefix="web-")
    return await start_run(orchestrator(), inputs, user=user, storage=storage, model=model,
                           services=services, on_event=on_event, policy=policy,
                           **(run_options or {}))


async def research(question: str, **options: Any) -> ResearchResult:
    """Run a research session to its end (options as for `start_research`)."""
    handle = await start_research(question, **options)
    return research_result(await handle.wait())


async def nothing_to_search(*, kb: str | None = None, web_backend: str | None = None,
                            web_source: str | None = None, user: Any = None,
                            services: dict[str, Any] | None = None) -> str | None:
    """Why a session with these options could search nothing, or None.  With no
    `kb` and no web given, the offline web search reads the orchestrator's
    default base (`web`); when nobody made it, every phase would run on no
    passages and answer that nothing was found."""
    if kb or web_backend or web_source:
        return None
    from flowforge.errors import NotFound

    default = orchestrator().doc.inputs["web_source"]["default"]
    try:
        await check_base_exists(default, user=user, services=services)
    except NotFound:
        return (f"nothing to search: no --kb was given, and offline the web search reads the "
                f"knowledge base '{default}', which does not exist; give research documents "
                f"with --kb path/to/documents or --web path/to/pages (or --web tavily / "
                f"perplexity with its API key)")
    return None

