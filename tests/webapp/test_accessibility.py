"""Accessibility: axe-core (web/node_modules/axe-core, installed by `make
install`) finds no serious or critical violation on any page, and the graph
and forms work from the keyboard alone."""

from __future__ import annotations

import re

from tests.webapp.conftest import EXAMPLES, ROOT, SUPPORT_BLOCKS, shot, sign_in

AXE = ROOT / "web" / "node_modules" / "axe-core" / "axe.min.js"


#: axe's serious and critical violations, only the fields the message names: the
#: whole result (every rule's passes, inapplicable and incomplete, ~50 kB) crossed
#: the pipe to Playwright's driver and Python on each check for nothing
SERIOUS = """() => axe.run(document, {resultTypes: ['violations']}).then((result) =>
  result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({id: v.id, impact: v.impact, help: v.help,
                  targets: v.nodes.slice(0, 3).map((n) => n.target)})))"""


async def serious_violations(page) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now.
    axe is injected once per document: a check after a resize or a click on
    the same page reuses it (each injection cost the renderer ~0.15 s)."""
    if not await page.evaluate("typeof window.axe?.run === 'function'"):
        await page.add_script_tag(path=str(AXE))
    return [f"{v['id']} ({v['impact']}): {v['help']} - {v['targets']}"
            for v in await page.evaluate(SERIOUS)]


async def test_every_page_passes_axe_and_works_from_the_keyboard(web, page):
    await page.goto(web.url + "/")
    await page.wait_for_url("**/signin**")
    assert await serious_violations(page) == []
    # sign in with the keyboard only
    await page.keyboard.press("Tab")
    await page.keyboard.type(web.keys["alice"])
    await page.keyboard.press("Enter")
    await page.get_by_role("heading", name="Workflows").wait_for()
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=(EXAMPLES / "support.yaml").read_text(),
                                 headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
    await page.reload()
    await page.locator("tbody tr").first.wait_for()
    assert await serious_violations(page) == []

    await page.goto(web.url + "/workflows/support")
    await page.wait_for_function(
        f"document.querySelectorAll('[data-block-id]').length === {SUPPORT_BLOCKS}")
    await page.get_by_text("No problems: the document is valid.").wait_for()
    assert await serious_violations(page) == []
    # the graph from the keyboard: focus a block, Enter opens its config
    agent = page.locator(".react-flow__node", has=page.locator("[data-block-id=answer]"))
    for _ in range(60):
        await page.keyboard.press("Tab")
        if await agent.evaluate("el => el === document.activeElement"):
            break
    else:
        raise AssertionError("the agent block is not reachable with Tab")
    await page.keyboard.press("Enter")
    panel = page.get_by_role("complementary", name="Block answer")
    assert "customer support assistant" in await panel.get_by_label("Block config").text_content()
    await shot(page, "12-keyboard-block-config")

    await page.goto(web.url + "/workflows/support/run")
    await page.get_by_label("query (string)").wait_for()
    assert await serious_violations(page) == []
    await page.get_by_label("query (string)").focus()
    await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")                 # the submit button
    await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]+$"))
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for(timeout=60_000)
    assert await serious_violations(page) == []
    await page.goto(web.url + "/runs")
    await page.locator("tbody tr").first.wait_for()
    assert await serious_violations(page) == []


async def outline_of(locator) -> str:
    return await locator.evaluate("el => { const s = getComputedStyle(el); "
                                  "return s.outlineStyle === 'none' ? 'none' : "
                                  "`${s.outlineStyle} ${s.outlineWidth}`; }")


async def test_keyboard_focus_shows_on_graph_blocks_and_upload_buttons(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=(EXAMPLES / "support.yaml").read_text(),
                                 headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
        assert (await alice.post("/api/knowledge", json={"name": "notes"})).status_code == 201
    await sign_in(page, web)

    await page.goto(web.url + "/workflows/support")
    await page.wait_for_function(
        f"document.querySelectorAll('[data-block-id]').length === {SUPPORT_BLOCKS}")
    node = page.locator(".react-flow__node", has=page.locator("[data-block-id=answer]"))
    for _ in range(60):
        await page.keyboard.press("Tab")
        if await node.evaluate("el => el === document.activeElement"):
            break
    else:
        raise AssertionError("the agent block is not reachable with Tab")
    assert await outline_of(page.locator("[data-block-id=answer]")) == "solid 3px"
    await shot(page, "55-focus-block")

    for path, field, button in (
            ("/knowledge/notes", "#kb-tags", "Upload text or Markdown files"),
            ("/", None, "Upload a workflow (YAML or JSON)")):
        await page.goto(web.url + path)
        label = page.locator("label.button", has_text=button)
        await label.wait_for()
        assert await outline_of(label) == "none"
        target = await label.get_attribute("for")
        if field:
            await page.locator(field).focus()
        else:                       # the control just before the hidden file input
            await page.locator(f"#{target}").evaluate(
                "el => { const all = [...document.querySelectorAll('a, button, input, select')]"
                ".filter((e) => e.tabIndex >= 0 && e !== el && "
                "(e.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING)); "
                "all[all.length - 1].focus(); }")
        await page.keyboard.press("Tab")
        assert await page.evaluate("document.activeElement.id") == target
        assert await outline_of(label) == "solid 3px", path
