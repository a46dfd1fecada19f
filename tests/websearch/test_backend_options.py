"""A `web_search` tool's per-back-end options: `validate` checks them with the
function the run uses (`websearch.backend_options`), so a document it accepts
runs (issue 41: `{backend: offline, search_depth: advanced}` validated and
failed the run)."""

from __future__ import annotations

import pytest

import flowforge
from flowforge.errors import ToolError, ValidationFailed
from flowforge.websearch import backend_options, make_backend


def agent(web: dict) -> dict:
    return {"id": "t", "blocks": [{"id": "ask", "type": "agent", "with": {
        "prompt": "hi", "model": "scripted/x", "tools": [{"web_search": web}]}}]}


@pytest.mark.parametrize("web, words", [
    ({"backend": "offline", "search_depth": "advanced"},
     ["blocks[0].with.tools[0].web_search", "web_search (offline): unknown option(s) "
      "search_depth (`search_depth` is tavily's); the offline back end takes: backend, "
      "folder, knowledge_base, max_results, min_similarity, mode"]),
    ({"search_depth": "advanced"}, ["web_search (offline): unknown option(s) search_depth"]),
    ({"backend": "perplexity", "search_depth": "advanced", "folder": "web"},
     ["web_search (perplexity): unknown option(s) search_depth (`search_depth` is tavily's)"]),
    ({"backend": "tavily", "model": "sonar"},
     ["web_search (tavily): unknown option(s) model (`model` is perplexity's)"]),
])
def test_an_option_the_back_end_does_not_take_is_a_validate_problem(web, words):
    with pytest.raises(ValidationFailed) as caught:
        flowforge.load(agent(web))
    for word in words:
        assert word in str(caught.value)
    with pytest.raises(ToolError) as refused:                  # and the run says the same
        make_backend(web, env={"TAVILY_API_KEY": "k", "PERPLEXITY_API_KEY": "k"})
    assert words[-1].split("; the")[0] in str(refused.value)


@pytest.mark.parametrize("web", [
    {"backend": "tavily", "search_depth": "advanced", "folder": "web"},   # offline: dropped
    {"backend": "perplexity", "model": "sonar-pro", "timeout": 5},
    {"backend": "offline", "knowledge_base": "web", "max_results": 3},
    {"backend": "{{input.web}}", "search_depth": "advanced"},    # known at run time
])
def test_what_validate_accepts_the_back_end_takes(web):
    flowforge.load(agent(web))
    if "{{" not in web["backend"]:
        backend, kept = backend_options(web)
        assert backend == web["backend"] and "max_results" not in kept
