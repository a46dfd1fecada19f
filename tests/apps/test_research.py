"""The research orchestrator end to end with a scripted model: the three
phases in order with the improved question and the knowledge base passed
along, the three progress events in order, a failing phase (error event,
run failed, earlier phases kept) and a cancel mid-way (run cancelled,
finished phases kept)."""

from __future__ import annotations

import asyncio

import pytest

from flowforge.apps.research.session import ResearchEvents, research_result
from flowforge.service.research import research, start_research
from tests.apps.research_script import WEB_URL, research_options




async def test_three_phases_pass_the_question_and_the_knowledge_along(
        research_model, knowledge, storage_url):
    model, played = research_model({"question_eval": [0.6, 0.9], "kb_eval": [0.9],
                            "answer_eval": [0.5, 0.9]})
    seen = []
    result = await research("tent wind?", kb="policies", on_event=seen.append,
                            **research_options(model, knowledge, storage_url))
    assert result.status == "succeeded", result.error
    improved = "How should a tent be pitched in strong wind (version 2)?"
    assert result.question == improved and result.original_question == "tent wind?"
    # every pass refines before the decision (the seed's order): two passes, two refinements
    assert result.answer.endswith("(refined 2).") and result.sources == [WEB_URL]
    assert result.scores == {"question_improvement_confidence": 0.9,
                             "kb_completeness_score": 0.9, "answer_confidence": 0.9}
    assert result.iterations == {"question": 2, "knowledge": 1, "answer": 2}
    # phase 2 researched the improved question; phase 3 answered from phase 2's KB
    assert f"Question: {improved}" in played.calls["kb_plan"][0]
    assert f"Question: {improved}" in played.calls["draft"][0]
    assert "Face the narrow end into the wind." in played.calls["draft"][0]
    # progress: 33 after the question, 66 after the KB, 100 with the answer, in order
    progress = [e for e in seen if e["type"] == "progress" and "phase" in e]
    assert [(e["phase"], e["percent"]) for e in progress] == [
        ("question", 33), ("knowledge", 66), ("answer", 100)]
    assert progress[0]["result"]["question"] == improved
    assert progress[2]["result"]["answer"] == result.answer
    # each phase's result was published as it completed: before the next phase began
    kinds = [(e["type"], e.get("block_id"), e.get("scope")) for e in seen]
    assert kinds.index(("progress", "question_done", None)) < \
        kinds.index(("block_started", "knowledge", None))


async def test_session_events_name_phases_iterations_scores_and_complete(
        research_model, knowledge, storage_url):
    model, _ = research_model({"question_eval": [0.5, 0.9], "kb_eval": [0.9], "answer_eval": [0.9]})
    handle = await start_research("tent wind?", **research_options(model, knowledge, storage_url))
    translator = ResearchEvents(handle.run_id)
    result = await handle.wait()
    events = [out for event in result.events for out in translator.translate(event)]
    phases = [(e["phase"], e["status"], e["progress"]) for e in events if e["type"] == "phase"]
    assert phases == [("question", "started", 0), ("question", "completed", 33),
                      ("knowledge", "started", 33), ("knowledge", "completed", 66),
                      ("answer", "started", 66), ("answer", "completed", 100)]
    scores = [(e["phase"], e["iteration"], e["score"]) for e in events if "score" in e]
    assert scores == [("question", 1, 0.5), ("question", 2, 0.9), ("knowledge", 1, 0.9),
                      ("answer", 1, 0.9)]
    steps = [(e["phase"], e["step"]) for e in events
             if e["type"] == "status" and e.get("step") and "score" not in e]
    assert steps[:4] == [("question", "improve"), ("question", "evaluate"),
                         ("question", "improve"), ("question", "evaluate")]
    assert [step for phase, step in steps if phase == "knowledge"] == [
        "plan", "queries", "web", "extract", "update", "evaluate"]   # no knowledge base asked
    assert [step for phase, step in steps if phase == "answer"] == [
        "plan", "draft", "evaluate", "refine", "checked"]     # the sources are checked last
    assert events[0]["type"] == "status" and events[0]["status"] == "running"
    assert events[-1]["type"] == "complete" and events[-1]["progress"] == 100
    final = events[-1]["result"]
    assert final["answer"].endswith("(refined 1).")
    # the seed orchestrator's context names, as its clients read them
    assert final["final_answer"] == final["answer"]
    assert final["draft_answer"] == "Pitch the narrow end into the wind."
    assert final["kb_plan"] == "Find pitching technique and anchoring."
    assert final["search_queries"] == ["pitching a tent in wind", "tent guy lines"]
    assert (final["question_iterations"], final["kb_iterations"],
            final["answer_iterations"]) == (2, 1, 1)
    assert set(events[-1]["phases"]) == {"question", "knowledge", "answer"}


async def test_a_failing_phase_is_an_error_event_and_keeps_the_earlier_phases(
        research_model, knowledge, storage_url):
    model, _ = research_model(fail="extract")
    handle = await start_research("tent wind?", **research_options(model, knowledge, storage_url))
    run = await handle.wait()
    result = research_result(run)
    assert run.status == "failed" and result.status == "failed"
    assert result.failed_phase == "knowledge"
    assert "the scripted extract model is down" in result.error
    assert list(result.phases) == ["question"] and result.question
    assert result.answer is None
    translator = ResearchEvents(run.run_id)
    events = [out for event in run.events for out in translator.translate(event)]
    last = events[-1]
    assert last["type"] == "error" and last["status"] == "failed"
    assert last["phase"] == "knowledge" and "extract model is down" in last["error"]["message"]
    assert list(last["phases"]) == ["question"]
    assert [e["type"] for e in events].count("error") == 1


async def test_cancel_in_the_knowledge_phase_ends_cancelled_with_the_question_kept(
        research_model, knowledge, storage_url):
    holder = {}

    async def cancel_on_extract(role, n):
        if role == "extract":
            holder["handle"].cancel()
            await asyncio.sleep(5)             # cancelled while the model "works"

    model, played = research_model(hook=cancel_on_extract)
    handle = await start_research("tent wind?", **research_options(model, knowledge, storage_url))
    holder["handle"] = handle
    result = research_result(await asyncio.wait_for(handle.wait(), 30))
    assert result.status == "cancelled"
    assert list(result.phases) == ["question"] and result.answer is None
    assert "update" not in played.order and "draft" not in played.order


async def test_thresholds_and_caps_reach_every_phase(research_model, knowledge, storage_url):
    model, played = research_model({"question_eval": [0.5], "kb_eval": [0.5], "answer_eval": [0.5]})
    result = await research("tent wind?", threshold=0.4, max_iterations=2,
                            **research_options(model, knowledge, storage_url))
    assert result.iterations == {"question": 1, "knowledge": 1, "answer": 1}
    model, played = research_model({"question_eval": [0.5], "kb_eval": [0.5], "answer_eval": [0.5]})
    result = await research("tent wind?", threshold=0.6, max_iterations=2,
                            **research_options(model, knowledge, storage_url))
    assert result.iterations == {"question": 2, "knowledge": 2, "answer": 2}
    assert {p["stopped_by"] for p in result.phases.values()} == {"max_iterations"}


async def test_an_empty_question_is_refused_before_running(storage_url):
    from flowforge.errors import InputError

    with pytest.raises(InputError, match="the question is empty"):
        await research("  ", storage=storage_url)
