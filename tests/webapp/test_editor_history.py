"""Undo and redo, duplicate, auto-layout, placement and the minimap in the
editor, in Chromium: every canvas and form edit is one step of the
document's one history (buttons, Ctrl+Z, Ctrl+Shift+Z); a loop duplicated
comes with its children, freshly named and reading each other; a new block
goes beside the selected one; Auto-layout drops the dragged positions.
Screenshots (FLOWFORGE_SCREENSHOTS=1): tests/webapp/screenshots/history-*.png."""

from __future__ import annotations

import yaml
from playwright.async_api import expect

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_canvas import editor_text, node, wait_for_text
from tests.webapp.test_editor_structure import add_from_palette, axe_at_both_widths, rename

YAML = {"Content-Type": "application/yaml"}

SOURCE = """\
version: 1
id: history
name: History
blocks:
  - id: first
    type: set
    with: {text: hello}
  - id: refine
    type: loop
    after: [first]
    with: {times: 2}
    blocks:
      - id: draft
        type: set
        with: {text: "{{first.text}} {{loop.index}}"}
      - id: judge
        type: set
        with: {verdict: "{{draft.text}}"}
metadata:
  layout:
    first: {x: 0, y: 0}
"""


async def test_undo_redo_duplicate_auto_layout_and_placement(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=SOURCE, headers=YAML)
        assert saved.status_code == 201, saved.text
    await sign_in(page, web, at="/workflows/history")
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 4")
    undo, redo = page.get_by_role("button", name="Undo"), page.get_by_role("button", name="Redo")
    await expect(undo).to_be_disabled()
    await expect(page.get_by_role("img", name="Minimap of the workflow")).to_be_visible()

    # a new block goes beside the selected one
    await node(page, "first").click()
    # (a `response` block: valid as added, so the document's checks below are
    # about the edits, not about a block left half-filled)
    await add_from_palette(page, "response")
    await wait_for_text(page, "id: response")
    first, added = (await node(page, "first").bounding_box(),
                    await node(page, "response").bounding_box())
    assert added["x"] > first["x"] + first["width"] and abs(added["y"] - first["y"]) < 5

    # the keys, outside any text field
    await page.get_by_role("heading", name="History").click()
    await page.keyboard.press("Control+z")
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 4")
    assert await editor_text(page) == SOURCE
    await page.keyboard.press("Control+Shift+z")
    await wait_for_text(page, "id: response")

    # a form edit (a rename) is one step too: the buttons
    await rename(page, "first", "start")
    await wait_for_text(page, "after: [start]")
    await undo.click()
    await wait_for_text(page, "after: [first]")
    assert "id: start" not in await editor_text(page)
    await redo.click()
    await wait_for_text(page, "after: [start]")

    # a loop duplicated with its children: fresh ids, reading each other
    await node(page, "refine").click(position={"x": 30, "y": 12})
    await page.get_by_role("button", name="Duplicate the block").click()
    await wait_for_text(page, "id: refine_2")
    blocks = yaml.safe_load(await editor_text(page))["blocks"]
    copy = next(block for block in blocks if block["id"] == "refine_2")
    assert copy["after"] == ["start"]
    assert [(b["id"], b["with"]) for b in copy["blocks"]] == [
        ("draft_2", {"text": "{{start.text}} {{loop.index}}"}),
        ("judge_2", {"verdict": "{{draft_2.text}}"})]
    await page.get_by_role("complementary", name="Block refine_2").wait_for()
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await shot(page, "history-01-duplicated")

    # auto-layout: the dragged positions go; undo brings them back
    await page.get_by_role("button", name="Auto-layout").click()
    await page.wait_for_function(
        "() => ![...document.querySelectorAll('.cm-content .cm-line')].some(l => "
        "l.textContent.startsWith('metadata:'))")
    await undo.click()
    await wait_for_text(page, "metadata:")
    await axe_at_both_widths(page)
