"""The research page with the scripted model (examples/scripted/research.rules.yaml,
the offline web of examples/web): a question asked in the browser runs the
three phases, shown completing in order at 33, 66 and 100 % with each phase's
result and the answer; cancelling during the knowledge phase shows the session
cancelled, the question phase kept."""

from __future__ import annotations

import re

import pytest_asyncio
import yaml
from playwright.async_api import expect

from tests.apps.conftest import knowledge, knowledge_path  # noqa: F401 - fixtures
from tests.server.conftest import start_server
from tests.webapp.conftest import SESSION_LOOP, EXAMPLES, shot, sign_in
from tests.webapp.test_accessibility import serious_violations

RULES = EXAMPLES / "scripted" / "research.rules.yaml"

#: records, in the page, each phase's status change and each progress value shown; the
#: progress shown when each phase completes
RECORD = """
window.__ffResearch = [];
window.__ffResearchDone = [];
new MutationObserver((mutations) => {
  for (const m of mutations) {
    const el = m.target;
    if (el.dataset && el.dataset.phase && m.attributeName === 'data-status')
      window.__ffResearch.push([el.dataset.phase, el.dataset.status]);
    if (el.dataset && el.dataset.phase && el.dataset.status === 'completed')
      window.__ffResearchDone.push([el.dataset.phase,
        Number(document.getElementById('research-progress').dataset.progress)]);
    if (el.id === 'research-progress' && m.attributeName === 'data-progress')
      window.__ffResearch.push(['progress', el.dataset.progress]);
  }
}).observe(document, {subtree: true, attributes: true,
                      attributeFilter: ['data-status', 'data-progress']});
"""


@pytest_asyncio.fixture(loop_scope=SESSION_LOOP)
async def research_web(tmp_path, knowledge, knowledge_path, monkeypatch):  # noqa: F811
    """A server per rules file: `await research_web(rules_path)`."""
    monkeypatch.setenv("FLOWFORGE_SECRET_KEY_FILE", str(tmp_path / "secret.key"))
    monkeypatch.setenv("FLOWFORGE_KNOWLEDGE_URL", f"sqlite:///{knowledge_path}")
    stops = []

    async def make(rules):
        live, stop = await start_server(f"sqlite:///{tmp_path / f'server{len(stops)}.db'}",
                                        model=f"scripted/{rules}")
        stops.append(stop)
        return live

    yield make
    for stop in reversed(stops):      # last started first: see tests/conftest.py
        await stop()


async def ask(page, live, question: str) -> str:
    await sign_in(page, live)
    await page.get_by_role("link", name="Research").click()
    await page.get_by_label("Question").fill(question)
    await page.get_by_label("Confidence threshold (0-1)").fill("0.8")
    await page.get_by_role("button", name="Start research").click()
    await page.wait_for_url(re.compile(r".*/research/[0-9a-f]+$"))
    return page.url.rsplit("/", 1)[1]


def slowed(rules_dir, latency_ms: int):
    """The research rules with every answer taking `latency_ms`: the events come
    apart as a real model's would (and leave room to cancel)."""
    rules = yaml.safe_load(RULES.read_text())
    rules["latency_ms"] = latency_ms
    path = rules_dir / f"research-{latency_ms}.rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    return path


async def test_the_three_phases_complete_in_order_with_their_results(research_web, page,
                                                                     tmp_path):
    live = await research_web(slowed(tmp_path, 150))
    await page.add_init_script(RECORD)
    session_id = await ask(page, live, "tent wind?")
    await page.locator("[aria-label='Session status'] .status-succeeded").wait_for(timeout=60_000)

    record = await page.evaluate("window.__ffResearch")
    completed = [phase for phase, status in record if status == "completed"]
    assert completed == ["question", "knowledge", "answer"]
    progress = [int(value) for kind, value in record if kind == "progress"]
    assert [p for p in progress if p in (33, 66, 100)] == [33, 66, 100], record
    assert progress == sorted(progress)
    # the progress shown as each phase completes
    assert await page.evaluate("window.__ffResearchDone") == [
        ["question", 33], ["knowledge", 66], ["answer", 100]]
    steps = [[phase, status] for phase, status in record if phase != "progress"]
    assert steps.index(["question", "completed"]) < steps.index(["knowledge", "started"]) \
        < steps.index(["knowledge", "completed"]) < steps.index(["answer", "completed"])

    question = page.get_by_role("region", name="Phase Question")
    assert "How should I pitch and anchor a tent in strong wind?" in \
        await question.get_by_label("Question result").text_content()
    scores = await question.locator(".scores li").all_text_contents()
    assert [s.split(" - ")[0] for s in scores] == [
        "Pass 1: question_improvement_confidence 0.60",
        "Pass 2: question_improvement_confidence 0.90"]
    knowledge_result = await page.get_by_label("Knowledge base result").text_content()
    assert "deadman anchors" in knowledge_result
    answer = page.get_by_role("region", name="Answer", exact=True)
    assert "bury the stakes horizontally as deadman anchors" in \
        await answer.get_by_role("paragraph").first.text_content()
    assert await answer.get_by_role("list", name="Sources").get_by_role("link").all_text_contents() \
        == ["https://trail-guide.example.net/pitching-a-tent-in-wind"]
    assert await page.locator("#research-progress").get_attribute("value") == "100"
    assert await serious_violations(page) == []
    await shot(page, "40-research-complete")

    async with live.client("alice") as alice:
        status = (await alice.get(f"/agent-workflow/{session_id}")).json()
    assert status["status"] == "succeeded" and status["progress"] == 100


async def test_cancel_during_the_knowledge_phase_shows_cancelled(research_web, page, tmp_path):
    live = await research_web(slowed(tmp_path, 700))
    session_id = await ask(page, live, "tent wind?")
    await page.locator("[data-phase=question][data-status=completed]").wait_for(timeout=60_000)
    await page.locator("[data-phase=knowledge][data-status=started]").wait_for()
    await page.get_by_role("button", name="Cancel the research").click()
    await page.locator("[aria-label='Session status'] .status-cancelled").wait_for()
    assert await page.locator("[data-phase=question]").get_attribute("data-status") == \
        "completed"
    assert await page.locator("[data-phase=knowledge]").get_attribute("data-status") == \
        "cancelled"
    assert await page.locator("[data-phase=answer]").get_attribute("data-status") == "pending"
    assert await page.get_by_role("button", name="Cancel the research").count() == 0
    assert "How should I pitch" in await page.get_by_label("Question result").text_content()
    await shot(page, "41-research-cancelled")
    async with live.client("alice") as alice:
        status = (await alice.get(f"/agent-workflow/{session_id}")).json()
    assert status["status"] == "cancelled" and list(status["phases"]) == ["question"]


async def test_the_research_websocket_is_allowed_by_the_content_security_policy(
        research_web, browser):
    live = await research_web(RULES)
    context = await browser.new_context(viewport={"width": 1500, "height": 1000})
    page = await context.new_page()
    messages: list[str] = []
    page.on("console", lambda message: messages.append(message.text))
    page.on("pageerror", lambda error: messages.append(str(error)))
    try:
        await ask(page, live, "tent wind?")
        await page.locator("[aria-label='Session status'] .status-succeeded").wait_for(
            timeout=60_000)
    finally:
        await context.close()
    assert not [m for m in messages if "Content Security Policy" in m or "Refused" in m], messages


async def test_the_form_takes_what_the_server_takes_and_the_key_never_goes_in_a_url(
        research_web, page):
    live = await research_web(RULES)
    urls: list[str] = []
    sockets: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    page.on("websocket", lambda socket: sockets.append(socket.url))
    posted: list[str] = []
    page.on("request", lambda request: posted.append(request.url)
            if request.method == "POST" and "/agent-workflow" in request.url else None)
    await sign_in(page, live, at="/research")
    threshold = page.get_by_label("Confidence threshold (0-1)")
    iterations = page.get_by_label(re.compile("^Maximum iterations"))
    await page.get_by_label("Question").fill("tent wind?")

    # 0.99 is a threshold the field takes (its step no longer refuses it)
    await threshold.fill("0.99")
    assert await threshold.evaluate("el => el.validity.valid") is True
    # more passes than the server allows: said in the form's words, nothing sent
    await iterations.fill("20")
    await page.get_by_role("button", name="Start research").click()
    alert = page.get_by_role("alert")
    await expect(alert).to_have_text(
        "Maximum iterations: 20 is not a whole number from 1 to 10.")
    assert await iterations.get_attribute("max") == "10"
    assert posted == []

    await iterations.fill("2")
    await page.get_by_role("button", name="Start research").click()
    await page.wait_for_url(re.compile(r".*/research/[0-9a-f]+$"))
    await page.locator("[aria-label='Session status'] .status-succeeded").wait_for(timeout=60_000)
    assert len(posted) == 1
    assert sockets and all("/ws/agent-workflow/" in url for url in sockets)
    key = live.keys["alice"]
    assert not [url for url in urls + sockets if key in url or "token=" in url]

    # its run: the research orchestrator drawn, the link showing the shipped workflow
    await page.get_by_role("link", name="Its run, block by block").click()
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for()
    await page.locator("[data-block-id=question][data-state=succeeded]").wait_for()
    await expect(page.get_by_role("alert")).to_have_count(0)
    await page.get_by_role("link", name="research", exact=True).click()
    await page.wait_for_url("**/apps/research")
    await page.get_by_role("heading", name="Research orchestrator").wait_for()
