"""*Test this block* in Chromium: the block's panel lists what the block
reads, filled from the latest run of the workflow; a changed sample runs the
agent alone and shows its output and the prompt as sent (the scripted model),
without a new run in the history; *Use last run* fills the fields again; a
block that cannot run alone says why; axe finds nothing serious at 1280 and
390 px, in light and dark mode.
Screenshots (FLOWFORGE_SCREENSHOTS=1): tests/webapp/screenshots/block-test-*.png."""

from __future__ import annotations

from playwright.async_api import expect

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_canvas import node
from tests.webapp.test_editor_structure import axe_at_both_widths

SOURCE = """\
version: 1
id: tester
name: Tester
inputs:
  query: {type: string}
blocks:
  - id: topic
    type: set
    with: {label: "about {{input.query}}"}
  - id: answer
    type: agent
    with:
      system: You are a customer support assistant.
      prompt: "Question ({{topic.label}}): {{input.query}}"
  - id: check
    type: approval
    after: [answer]
    with: {message: "Send it?"}
"""


async def open_block_test(page, web):
    """Sign in, open the saved workflow, select the agent and unfold its
    "Test this block" section: the form of the values it reads."""
    await sign_in(page, web, at="/workflows/tester")
    await page.get_by_role("heading", name="Tester").wait_for()
    await node(page, "answer").click()
    panel = page.get_by_role("complementary", name="Block answer")
    await panel.get_by_text("Test this block").click()
    return panel, panel.get_by_role("form", name="Values block answer reads")


async def test_an_agent_block_runs_alone_from_its_panel(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=SOURCE,
                                 headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
        run = await alice.post("/api/workflows/tester/runs?wait=true",
                               json={"inputs": {"query": "can I return boots"}})
        assert run.json()["status"] == "waiting", run.text
    panel, values = await open_block_test(page, web)
    query = values.get_by_label("input.query")
    label = values.get_by_label("topic.label")
    await expect(query).to_have_value("can I return boots")          # the latest run's
    await expect(label).to_have_value("about can I return boots")

    await query.fill("is the sale final")
    await label.fill("sales")
    await values.get_by_role("button", name="Run this block").click()
    await expect(panel.get_by_role("status")).to_contain_text("succeeded")
    await expect(panel.get_by_label("Test output")).to_contain_text(
        "Yes, you can return it within 30 days")
    prompt = panel.get_by_role("list", name="Prompt 1 messages")
    await expect(prompt).to_contain_text("You are a customer support assistant.")
    await expect(prompt).to_contain_text("Question (sales): is the sale final")
    await expect(panel.get_by_text("Tokens", exact=True)).to_be_visible()
    await shot(page, "block-test-01-result")
    await axe_at_both_widths(page)

    await values.get_by_role("button", name="Use last run").click()
    await expect(query).to_have_value("can I return boots")
    async with web.client("alice") as alice:
        assert len((await alice.get("/api/runs")).json()["runs"]) == 1    # nothing stored

    await panel.get_by_role("button", name="Close").click()
    await node(page, "check").click()
    other = page.get_by_role("complementary", name="Block check")
    await other.get_by_text("Test this block").click()
    await expect(other.get_by_text("an approval waits for a person's decision")).to_be_visible()


async def test_the_test_panel_passes_axe_in_dark_mode_on_a_phone(web, browser):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=SOURCE,
                                 headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
    context = await browser.new_context(viewport={"width": 390, "height": 844},
                                        color_scheme="dark", bypass_csp=True)
    page = await context.new_page()
    page.set_default_timeout(30_000)
    try:
        panel, values = await open_block_test(page, web)
        await values.get_by_label("input.query").fill("where is my parcel")
        await values.get_by_label("topic.label").fill("delivery")
        await values.get_by_role("button", name="Run this block").click()
        await expect(panel.get_by_role("status")).to_contain_text("succeeded")
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways: {width} px"
        await shot(page, "block-test-02-dark-phone")
        from tests.webapp.test_accessibility import serious_violations
        assert await serious_violations(page) == []
    finally:
        await context.close()
