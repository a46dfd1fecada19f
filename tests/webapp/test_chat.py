"""The chat page: ask, see the answer with its sources marked KB or Web, the
session listed, continued and deleted (a scripted model plays the tool calls)."""

from __future__ import annotations

import re

from playwright.async_api import expect

import pytest

from tests.apps.conftest import knowledge, knowledge_path, plan  # noqa: F401 - fixtures
from tests.apps.helpers import call
from tests.server.conftest import start_server
from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_accessibility import serious_violations


@pytest.fixture
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
