"""Copy and paste of blocks in the editor, in Chromium, as a Sim user does
it: Ctrl+C on a selected block, Ctrl+V pastes it beside the selection (into
it when it is a loop or parallel) with fresh ids, the copies reading each
other, one undo step; the pasted block is selected and focused.  Edges to
blocks outside the copy (`after:`) are dropped, as Sim copies only the edges
between the copied blocks; template references stay.  In a text field the
keys keep their text meaning.  Screenshots (FLOWFORGE_SCREENSHOTS=1):
tests/webapp/screenshots/clipboard-*.png."""

from __future__ import annotations

from typing import Any

import yaml
from playwright.async_api import expect

from tests.webapp.conftest import open_saved, shot
from tests.webapp.test_canvas import editor_text, node, wait_for_text
from tests.webapp.test_editor_structure import axe_at_both_widths, shape


SOURCE = """\
version: 1
id: clip
name: Clip
inputs:
  query: {type: string}
  topics: {type: array}
blocks:
  # where it starts
  - id: search
    type: set
    with: {context: "{{input.query}}"}
  - id: summarise
    type: set
    after: [search]
    with: {text: "Summary of {{search.context}}"}   # kept as written
  - id: refine
    type: loop
    after: [summarise]
    with: {times: 2}
    blocks:
      - id: draft
        type: set
        with: {text: "{{summarise.text}} {{loop.index}}"}
      - id: judge
        type: set
        after: [draft]
        with: {verdict: "{{draft.text}}"}
  - id: each
    type: parallel
    with: {for_each: "{{input.topics}}"}
    blocks:
      - id: twice
        type: set
        with: {v: "{{loop.item}}"}
metadata:
  layout:
    search: {x: 0, y: 0}
    summarise: {x: 0, y: 160}
"""


def blocks_of(text: str) -> dict[str, Any]:
    """Every block of the document by id, containers' children included."""
    out: dict[str, Any] = {}

    def walk(blocks: list[dict[str, Any]]) -> None:
        for block in blocks:
            out[block["id"]] = block
            walk(block.get("blocks", []))

    walk(yaml.safe_load(text)["blocks"])
    return out


async def focused_block(page: Any) -> str | None:
    return await page.evaluate(
        "() => document.activeElement?.closest('.react-flow__node')?.dataset.id ?? null")


async def test_a_block_is_copied_and_pasted_with_its_children_fresh_ids_and_one_undo(web, page):
    await open_saved(page, web, SOURCE)
    paste = page.get_by_role("button", name="Paste block")
    await expect(paste).to_be_disabled()

    # a plain block: pasted right after it, beside it, its outside `after:` dropped
    await node(page, "summarise").click()
    await page.keyboard.press("Control+c")
    await page.get_by_text("Copied block summarise").wait_for()
    await expect(paste).to_be_enabled()
    await page.keyboard.press("Control+v")
    await wait_for_text(page, "id: summarise_2")
    text = await editor_text(page)
    assert shape(text)[""] == ["search", "summarise", "summarise_2", "refine", "each"]
    assert blocks_of(text)["summarise_2"] == {
        "id": "summarise_2", "type": "set", "with": {"text": "Summary of {{search.context}}"}}
    assert "# kept as written" in text and "  # where it starts\n" in text
    await page.get_by_role("complementary", name="Block summarise_2").wait_for()
    await page.wait_for_function(
        "() => document.activeElement?.closest('.react-flow__node')?.dataset.id === 'summarise_2'")
    first, pasted = await node(page, "summarise").bounding_box(), await node(page, "summarise_2").bounding_box()
    assert pasted["x"] > first["x"] + first["width"]
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await shot(page, "clipboard-01-pasted")

    # one edit: one undo takes the whole paste back
    await page.keyboard.press("Control+z")
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 7")
    assert await editor_text(page) == SOURCE

    # a loop pasted into a selected parallel: a child, with fresh children reading each other
    await node(page, "refine").click(position={"x": 30, "y": 12})
    await page.keyboard.press("Control+c")
    await page.get_by_text("Copied block refine").wait_for()
    await node(page, "each").click(position={"x": 30, "y": 12})
    await page.keyboard.press("Control+v")
    await wait_for_text(page, "id: refine_2")
    text = await editor_text(page)
    assert shape(text) == {"": ["search", "summarise", "refine", "each"], "refine": ["draft", "judge"],
                           "each": ["twice", "refine_2"], "refine_2": ["draft_2", "judge_2"]}
    copy = blocks_of(text)
    assert "after" not in copy["refine_2"]                        # `summarise` is outside the copy
    assert copy["draft_2"]["with"] == {"text": "{{summarise.text}} {{loop.index}}"}
    assert copy["judge_2"]["after"] == ["draft_2"]
    assert copy["judge_2"]["with"] == {"verdict": "{{draft_2.text}}"}
    await page.get_by_role("complementary", name="Block refine_2").wait_for()
    assert await focused_block(page) == "refine_2"

    # in a text field Ctrl+V is the field's own paste: no block is pasted
    before = await editor_text(page)
    field = page.get_by_role("form", name="Settings of refine_2").get_by_label("name", exact=True)
    await field.click()
    await page.keyboard.press("Control+v")
    await page.keyboard.press("Control+c")
    await page.wait_for_timeout(300)
    assert await editor_text(page) == before

    # the button, nothing selected: at the end of the top level, numbered on
    await page.get_by_role("complementary", name="Block refine_2").get_by_role(
        "button", name="Close").click()
    await paste.click()
    await wait_for_text(page, "id: refine_3")
    text = await editor_text(page)
    assert shape(text)[""] == ["search", "summarise", "refine", "each", "refine_3"]
    assert shape(text)["refine_3"] == ["draft_3", "judge_3"]
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await shot(page, "clipboard-02-into-a-parallel")
    await axe_at_both_widths(page)
