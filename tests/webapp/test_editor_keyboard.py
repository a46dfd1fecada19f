"""The editor from the keyboard, in Chromium: Tab leaves the YAML pane (no
focus trap, per CodeMirror's accessibility guidance; the hint says how to
indent), a block's "Runs after" choices draw `after:` edges without a
pointer, and focus goes to what was just made: the new workflow's heading,
a block picked from the palette, the saved version's notice.
Screenshots (FLOWFORGE_SCREENSHOTS=1): tests/webapp/screenshots/keyboard-*.png."""

from __future__ import annotations

from playwright.async_api import expect

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_canvas import editor_text, node, wait_for_text
from tests.webapp.test_editor_structure import add_from_palette, axe_at_both_widths

NEW = "version: 1\nid: my-workflow\nname: My workflow\nblocks: []\n"


async def test_tab_leaves_the_yaml_runs_after_from_the_keyboard_and_focus_follows(web, page):
    await sign_in(page, web)
    await page.get_by_role("button", name="New workflow").click()
    await expect(page.get_by_role("heading", name="New workflow")).to_be_focused()

    # Tab in the YAML moves on and types nothing
    await page.locator(".cm-line", has_text="name: My workflow").click()
    for _ in range(3):
        await page.keyboard.press("Tab")
    assert not await page.evaluate("document.activeElement.closest('.cm-content') !== null")
    assert await editor_text(page) == NEW
    await expect(page.get_by_text("Tab moves on to the next control")).to_be_visible()

    # a block picked from the palette takes the focus
    await add_from_palette(page, "set")
    await expect(node(page, "set")).to_be_focused()
    await add_from_palette(page, "llm")
    await expect(node(page, "llm")).to_be_focused()
    await page.keyboard.press("Enter")
    form = page.get_by_role("form", name="Settings of llm")
    runs_after = form.get_by_role("group", name="Runs after")
    await runs_after.get_by_label("set").check()
    await wait_for_text(page, "after: [set]")
    await page.wait_for_function("document.querySelectorAll('.react-flow__edge').length === 1")
    await runs_after.get_by_label("set").uncheck()
    await page.wait_for_function("document.querySelectorAll('.react-flow__edge').length === 0")
    assert "after:" not in await editor_text(page)
    await runs_after.get_by_label("set").check()
    await wait_for_text(page, "after: [set]")
    await form.get_by_label("prompt (required)", exact=True).fill("Say hello")
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await shot(page, "keyboard-01-runs-after")
    await axe_at_both_widths(page)

    await page.get_by_role("button", name="Save the new workflow").click()
    await page.wait_for_url("**/workflows/my-workflow")
    await expect(page.get_by_role("heading", name="My workflow")).to_be_focused()
    await node(page, "llm").click()
    await page.get_by_role("form", name="Settings of llm").get_by_role(
        "group", name="Runs after").get_by_label("set").uncheck()
    await page.get_by_role("button", name="Save as a new version").click()
    await expect(page.get_by_text("Saved version 2.")).to_be_focused()
