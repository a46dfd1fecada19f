"""The chat page: ask, see the answer with its sources marked KB or Web, the
session listed, continued and deleted (a scripted model plays the tool calls)."""

from __future__ import annotations

import re

from playwright.async_api import expect

import pytest_asyncio

from tests.apps.conftest import knowledge, knowledge_path, plan  # noqa: F401 - fixtures
from tests.apps.helpers import call
from tests.server.conftest import start_server
from tests.webapp.conftest import SESSION_LOOP, shot, sign_in
from tests.webapp.test_accessibility import serious_violations


@pytest_asyncio.fixture(loop_scope=SESSION_LOOP)
async def chat_web(tmp_path, knowledge, knowledge_path, plan, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{knowledge_path}")
    steps = []
    model, _ = plan(*[lambda messages: steps.pop(0)(messages)] * 50)
    live, stop = await start_server(f"sqlite:///{tmp_path / 'server.db'}", model=model)
    live.steps = steps
    yield live
    await stop()


def play(live, *answers):
    live.steps.extend((lambda messages, a=a: a) for a in answers)


async def test_ask_see_sources_and_sessions(chat_web, page):
    play(chat_web, call("knowledge_base_search", query="warranty", kb_id="policies"),
         call("generate_response", answer="Two years; Summit gear is lifetime.",
              sources=["Warranty"], confidence_score=0.9, used_internal_kb=True,
              used_external_kb=False))
    await sign_in(page, chat_web)
    await page.get_by_role("link", name="Chat").click()
    await page.get_by_label("Your question").fill("How long is the warranty?")
    await page.get_by_label("Knowledge base (optional)").fill("policies")
    await page.get_by_role("button", name="Ask").click()
    answer = page.locator(".message.assistant")
    await answer.wait_for()
    assert "Two years; Summit gear is lifetime." in await answer.text_content()
    source = answer.get_by_role("list", name="Sources").locator("li")
    assert re.sub(r"\s+", " ", await source.first.text_content()).strip() == "KB Warranty"
    await page.wait_for_url(re.compile(r".*/chat/[^/]+$"))
    sessions = page.get_by_role("navigation", name="Sessions").locator("li")
    await sessions.first.wait_for()
    await expect(sessions).to_have_count(1)
    await shot(page, "17-chat")
    assert await serious_violations(page) == []

    await page.reload()                                   # the session is stored
    await page.locator(".message.assistant").wait_for()
    await expect(page.locator(".message")).to_have_count(2)
    await page.get_by_role("button", name=re.compile("^Delete session")).click()
    await page.wait_for_url(re.compile(r".*/chat$"))
    await page.get_by_role("navigation", name="Sessions").get_by_text("New conversation").wait_for()
    await expect(sessions).to_have_count(0)


async def test_a_session_keeps_its_base_and_errors_speak_of_the_page(chat_web, page):
    play(chat_web, call("knowledge_base_search", query="warranty", kb_id="policies"),
         call("generate_response", answer="Two years.", sources=["Warranty"],
              confidence_score=0.9, used_internal_kb=True, used_external_kb=False),
         call("knowledge_base_search", query="summit warranty", kb_id="policies"),
         call("generate_response", answer="Summit gear is lifetime.", sources=["Warranty"],
              confidence_score=0.9, used_internal_kb=True, used_external_kb=False))
    await sign_in(page, chat_web, at="/chat")

    # a base that does not exist: said in the page's terms, the question kept
    await page.get_by_label("Your question").fill("How long is the warranty?")
    await page.get_by_label("Knowledge base (optional)").fill("nope")
    await page.get_by_role("button", name="Ask").click()
    alert = page.get_by_role("alert")
    await expect(alert).to_contain_text("There is no knowledge base named 'nope'")
    await expect(alert).to_contain_text("Knowledge base field")
    assert "flowforge kb" not in await alert.text_content()
    assert "--kb" not in await alert.text_content()
    await expect(page.get_by_label("Your question")).to_have_value("How long is the warranty?")
    await expect(page.locator(".message")).to_have_count(0)

    await page.get_by_label("Knowledge base (optional)").fill("policies")
    await page.get_by_role("button", name="Ask").click()
    await page.locator(".message.assistant").wait_for()
    await page.wait_for_url(re.compile(r".*/chat/[^/]+$"))
    # the page moved to the session's address and kept what it held
    await expect(page.get_by_label("Knowledge base (optional)")).to_have_value("policies")
    await page.get_by_label("Your question").fill("And Summit gear?")
    await page.get_by_role("button", name="Ask").click()
    await expect(page.locator(".message.assistant")).to_have_count(2)
    second = page.locator(".message.assistant").nth(1)
    assert "Summit gear is lifetime." in await second.text_content()
    await expect(page.get_by_role("alert")).to_have_count(0)
    # a reload finds the session's base again
    await page.reload()
    await expect(page.locator(".message")).to_have_count(4)
    await expect(page.get_by_label("Knowledge base (optional)")).to_have_value("policies")

    # the answer's run: the chat's own workflow drawn, its link showing the shipped file
    await page.get_by_role("link", name="the run").last.click()
    await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]+$"))
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for()
    await page.locator("[data-block-id=answer][data-state=succeeded]").wait_for()
    await expect(page.get_by_role("alert")).to_have_count(0)
    await shot(page, "52-chat-run-graph")
    await page.get_by_role("link", name="rag-chat").click()
    await page.wait_for_url("**/apps/rag-chat")
    await page.get_by_role("heading", name="RAG chat").wait_for()
    await page.locator("[data-block-id=answer]").wait_for()
    assert "id: rag-chat" in await page.get_by_label("Workflow source").text_content()
    assert await serious_violations(page) == []
