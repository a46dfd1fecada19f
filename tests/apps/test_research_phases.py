"""The research orchestrator's three phase workflows, each run alone with a
scripted model: every loop ends by its threshold and by its iteration cap,
each pass sees the previous pass's feedback, and every pass's score is in
the result."""

from __future__ import annotations

import pytest

from flowforge.apps.research import RESEARCH_DIR
from flowforge.service.runs import run
from tests.apps.research_script import WEB_URL



async def phase(file, inputs, model, knowledge):
    result = await run(RESEARCH_DIR / file, inputs, model=model, storage=False,
                       services={"knowledge": knowledge})
    assert result.status == "succeeded", result.error
    return result.outputs["result"]


async def test_question_loop_stops_at_the_threshold_with_the_feedback_passed_on(
        research_model, knowledge):
    model, played = research_model({"question_eval": [0.5, 0.9, 0.95]})
    result = await phase("question.yaml", {"question": "tent wind?", "threshold": 0.8},
                         model, knowledge)
    assert result["stopped_by"] == "threshold" and result["iteration_count"] == 2
    assert [i["question_improvement_confidence"] for i in result["iterations"]] == [0.5, 0.9]
    assert result["question"] == "How should a tent be pitched in strong wind (version 2)?"
    assert result["original_question"] == "tent wind?"
    assert result["question_improvement_confidence"] == 0.9
    second = played.calls["improve"][1]
    assert "Current version: How should a tent be pitched in strong wind (version 1)?" in second
    assert "question_eval feedback 1" in second
    assert "none yet" in played.calls["improve"][0]


async def test_question_loop_stops_at_the_cap(research_model, knowledge):
    model, played = research_model({"question_eval": [0.3, 0.4, 0.99]})
    result = await phase("question.yaml", {"question": "tent wind?", "max_iterations": 2},
                         model, knowledge)
    assert result["stopped_by"] == "max_iterations" and result["iteration_count"] == 2
    assert [i["question_improvement_confidence"] for i in result["iterations"]] == [0.3, 0.4]
    assert len(played.calls["improve"]) == 2


async def test_knowledge_loop_searches_web_and_kb_and_stops_at_the_threshold(
        research_model, knowledge):
    model, played = research_model({"kb_eval": [0.4, 0.85]})
    result = await phase("knowledge.yaml", {"question": "How to pitch a tent in wind?",
                                            "kb": "policies", "threshold": 0.8},
                         model, knowledge)
    assert result["stopped_by"] == "threshold" and result["iteration_count"] == 2
    assert [i["kb_completeness_score"] for i in result["iterations"]] == [0.4, 0.85]
    assert result["iterations"][0]["gaps"] == ["anchoring in sand"]
    assert result["iterations"][0]["pages"] >= 1
    assert result["knowledge"][0]["sources"] == [WEB_URL]
    assert played.order[:6] == ["kb_plan", "queries", "extract", "update", "kb_eval", "queries"]
    # the seed's names: the plan, every query, the passes
    assert result["kb_plan"] == "Find pitching technique and anchoring."
    assert result["search_queries"] == ["pitching a tent in wind", "tent guy lines"] * 2
    assert result["kb_iterations"] == 2
    # the plan reaches the extraction, and the evaluation's gaps the next queries
    assert "Plan: Find pitching technique and anchoring." in played.calls["extract"][0]
    # the second pass's queries are written from the gaps the first pass left
    assert "anchoring in sand" in played.calls["queries"][1]
    assert "nothing is known yet" in played.calls["queries"][0]
    # extraction saw the web pages with their addresses and the knowledge base's passages
    extract = played.calls["extract"][0]
    assert WEB_URL in extract
    assert '"documentName"' in extract
    # the knowledge base so far is carried into the next update
    assert "Face the narrow end into the wind." in played.calls["update"][1].split(
        "New findings")[0]


async def test_knowledge_loop_stops_at_the_cap_and_searches_only_the_web_without_kb(
        research_model, knowledge):
    model, played = research_model({"kb_eval": [0.2, 0.3]})
    result = await phase("knowledge.yaml", {"question": "How to pitch a tent in wind?",
                                            "max_iterations": 1}, model, knowledge)
    assert result["stopped_by"] == "max_iterations" and result["iteration_count"] == 1
    assert [i["kb_completeness_score"] for i in result["iterations"]] == [0.2]
    extract = played.calls["extract"][0]
    assert WEB_URL in extract and '"documentName"' not in extract


async def test_answer_passing_at_once_is_still_refined_before_the_decision(research_model, knowledge):
    """As in the seed orchestrator, every pass refines before the decision."""
    model, played = research_model({"answer_eval": [0.9]})
    page = {"title": "Pitching a tent in wind", "url": WEB_URL, "snippet": "Face the wind."}
    result = await phase("answer.yaml", {"question": "How to pitch a tent in wind?",
                                         "knowledge": [{"topic": "t", "information": "i",
                                                        "sources": [WEB_URL]}],
                                         "passages": [page]},
                         model, knowledge)
    assert result["stopped_by"] == "threshold" and result["iteration_count"] == 1
    assert result["answer"].endswith("(refined 1).") and result["sources"] == [WEB_URL]
    assert result["draft_answer"] == "Pitch the narrow end into the wind."
    assert result["final_answer"] == result["answer"] and result["answer_iterations"] == 1
    assert played.order == ["answer_plan", "draft", "answer_eval", "refine"]


async def test_answer_refined_until_the_threshold(research_model, knowledge):
    model, played = research_model({"answer_eval": [0.4, 0.95]})
    result = await phase("answer.yaml", {"question": "q?"}, model, knowledge)
    assert result["stopped_by"] == "threshold" and result["iteration_count"] == 2
    assert [i["answer_confidence"] for i in result["iterations"]] == [0.4, 0.95]
    assert [i["refined"] for i in result["iterations"]] == [True, True]
    assert result["answer"].endswith("(refined 2).")
    assert "answer_eval feedback 1" in played.calls["refine"][0]
    # the second evaluation reviews the refined answer, not the draft
    assert "(refined 1)" in played.calls["answer_eval"][1]


async def test_answer_loop_stops_at_the_cap_with_the_last_refinement(research_model, knowledge):
    model, played = research_model({"answer_eval": [0.3, 0.5, 0.99]})
    result = await phase("answer.yaml", {"question": "q?", "max_iterations": 2},
                         model, knowledge)
    assert result["stopped_by"] == "max_iterations" and result["iteration_count"] == 2
    assert [i["answer_confidence"] for i in result["iterations"]] == [0.3, 0.5]
    assert len(played.calls["refine"]) == 2
    assert result["answer"].endswith("(refined 2).")
    assert result["answer_confidence"] == 0.5
