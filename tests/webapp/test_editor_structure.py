"""The editor's structure edits in Chromium, as a Sim or Dify user makes
them without typing YAML: a block from the palette has a valid id as added
(`loop_1`, never the reserved `loop`); the block form's id field renames a
block and every place that names it follows (after, templates, expressions,
goto, default, on_reject, nested blocks, the saved layout), in one edit that
keeps the author's comments and untouched lines.  Screenshots
(FLOWFORGE_SCREENSHOTS=1): tests/webapp/screenshots/structure-*.png."""

from __future__ import annotations

from typing import Any

import yaml
from playwright.async_api import expect

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_accessibility import serious_violations
from tests.webapp.test_canvas import editor_text, node, wait_for_text

YAML = {"Content-Type": "application/yaml"}

SOURCE = """\
version: 1
id: rename-me
name: Rename me
inputs:
  query: {type: string}
blocks:
  # where every answer starts
  - id: seed
    type: set
    with: {q: "{{input.query}}"}   # the question as asked
  - id: gate
    type: condition
    with:
      cases:
        - {when: "seed.q != ''", goto: draft}
      default: fallback
  - id: draft
    type: set
    with: {text: "Re: {{ seed.q }}"}
  - id: fallback
    type: set
    with: {text: nothing asked}
  - id: check
    type: approval
    after: [draft]
    with: {message: "Send {{draft.text}}?", on_reject: redo}
  - id: redo
    type: set
    with: {text: again}
  - id: send
    type: set
    after: [check, seed]
    with: {text: "{{draft.text}}"}
  - id: refine
    type: loop
    after: [seed]
    with: {times: 2}
    blocks:
      - id: step
        type: set
        with: {seen: "{{seed.q}} {{loop.index}}"}
metadata:
  layout:
    seed: {x: 10, y: 20}
    draft: {x: 300, y: 20}
"""


async def axe_at_both_widths(page: Any) -> None:
    """axe finds nothing serious or critical at 1280 px and at 390 px."""
    for width, height in ((1280, 900), (390, 844)):
        await page.set_viewport_size({"width": width, "height": height})
        await page.wait_for_timeout(150)
        assert await serious_violations(page) == [], f"at {width} px"
    await page.set_viewport_size({"width": 1500, "height": 1000})


async def add_from_palette(page: Any, kind: str) -> None:
    await page.get_by_role("button", name="Add block").click()
    await page.get_by_role("dialog", name="Add a block").get_by_role(
        "list", name="Block types").get_by_role("button", name=kind, exact=True).click()


async def rename(page: Any, block: str, to: str) -> None:
    """Select the block from the keyboard (focus it, Enter) and rename it in its form.
    With the form docked the canvas is ~430 px wide and some blocks lie beyond its
    visible part: a mouse click made Playwright scroll the canvas to reach the block,
    React Flow scrolled it back (it keeps its pane unscrolled), and under load that
    came between the button going down on `redo` and coming up on `send` (both
    recorded), so nothing was selected.  A person pans to a block they cannot see;
    the keyboard reaches it wherever it lies."""
    await node(page, block).focus()
    await page.keyboard.press("Enter")
    field = page.get_by_role("form", name=f"Settings of {block}").get_by_label("id", exact=True)
    await field.fill(to)
    await field.press("Enter")


async def test_palette_ids_are_valid_and_the_id_field_renames_every_reference(web, page):
    await sign_in(page, web)
    await page.get_by_role("button", name="New workflow").click()
    await page.get_by_role("heading", name="New workflow").wait_for()
    await add_from_palette(page, "loop")
    await add_from_palette(page, "loop")
    await wait_for_text(page, "id: loop_2")
    text = await editor_text(page)
    assert "id: loop_1" in text and "id: loop\n" not in text + "\n"
    await expect(page.get_by_text("reserved template namespace")).to_have_count(0)

    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=SOURCE, headers=YAML)
        assert saved.status_code == 201, saved.text
    page.on("dialog", lambda dialog: dialog.accept())            # leave the unsaved new one
    await page.goto(web.url + "/workflows/rename-me")
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 9")
    await page.get_by_text("No problems: the document is valid.").wait_for()

    # a refused id says why, in the form, and changes nothing
    await rename(page, "seed", "loop")
    form = page.get_by_role("form", name="Settings of seed")
    await expect(form.get_by_role("alert")).to_contain_text("reserved template namespace")
    await form.get_by_label("id", exact=True).fill("draft")
    await form.get_by_label("id", exact=True).press("Enter")
    await expect(form.get_by_role("alert")).to_contain_text("exists already")
    assert await editor_text(page) == SOURCE
    await shot(page, "structure-01-refused-id")
    await axe_at_both_widths(page)

    for old, new in (("seed", "start"), ("draft", "reply"), ("redo", "retry"),
                     ("fallback", "other")):
        await rename(page, old, new)
        await page.get_by_role("form", name=f"Settings of {new}").wait_for()
    expected = (SOURCE
                .replace("id: seed", "id: start").replace("seed.q", "start.q")
                .replace("[check, seed]", "[check, start]").replace("after: [seed]", "after: [start]")
                .replace("    seed: {x", "    start: {x")
                .replace("id: draft", "id: reply").replace("goto: draft", "goto: reply")
                .replace("after: [draft]", "after: [reply]").replace("draft.text", "reply.text")
                .replace("    draft: {x", "    reply: {x")
                .replace("id: redo", "id: retry").replace("on_reject: redo", "on_reject: retry")
                .replace("id: fallback", "id: other").replace("default: fallback", "default: other"))
    await wait_for_text(page, "default: other")
    assert await editor_text(page) == expected
    await page.get_by_text("No problems: the document is valid.").wait_for()
    # the renamed block kept its place on the canvas
    assert yaml.safe_load(expected)["metadata"]["layout"]["start"] == {"x": 10, "y": 20}
    await expect(node(page, "start")).to_be_visible()
    await shot(page, "structure-02-renamed")
    await page.get_by_role("button", name="Save as a new version").click()
    await page.get_by_text("Saved version 2.").wait_for()
    async with web.client("alice") as alice:
        assert (await alice.get("/api/workflows/rename-me")).json()["source"] == expected


async def drag_to(page: Any, source: Any, x: float, y: float) -> None:
    """Press on `source`'s head, move in steps, release at (x, y)."""
    box = await source.bounding_box()
    await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 12)
    await page.mouse.down()
    await page.mouse.move(x, y, steps=15)
    await page.mouse.up()


def shape(text: str) -> dict[str, list[str]]:
    """Container id (or '') -> the ids of its blocks, from the editor's YAML."""
    out: dict[str, list[str]] = {}

    def walk(blocks: list[dict[str, Any]], parent: str) -> None:
        out[parent] = [block["id"] for block in blocks]
        for block in blocks:
            if "blocks" in block:
                walk(block["blocks"], block["id"])

    walk(yaml.safe_load(text)["blocks"], "")
    return out


async def test_blocks_go_into_loops_and_parallels_and_out_again_on_the_canvas(web, page):
    await sign_in(page, web)
    await page.get_by_role("button", name="New workflow").click()
    await page.get_by_role("heading", name="New workflow").wait_for()
    # added with the container selected: a child
    await add_from_palette(page, "loop")
    await page.get_by_role("complementary", name="Block loop_1").wait_for()
    await add_from_palette(page, "set")
    await wait_for_text(page, "      - id: set")
    assert shape(await editor_text(page)) == {"": ["loop_1"], "loop_1": ["set"]}
    await add_from_palette(page, "parallel")
    await page.get_by_role("complementary", name="Block parallel").get_by_role(
        "button", name="Close").click()
    await add_from_palette(page, "llm")
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 4")
    assert shape(await editor_text(page)) == {"": ["loop_1", "parallel", "llm"],
                                              "loop_1": ["set"]}
    await shot(page, "structure-03-child-added")

    # dropped onto a container: a child of it
    target = await node(page, "parallel").bounding_box()
    await drag_to(page, node(page, "llm"), target["x"] + target["width"] / 2,
                  target["y"] + target["height"] / 2)
    await wait_for_text(page, "      - id: llm")
    assert shape(await editor_text(page)) == {"": ["loop_1", "parallel"], "loop_1": ["set"],
                                              "parallel": ["llm"]}
    await expect(node(page, "llm")).to_be_visible()

    # dragged out onto the open canvas: top level again, where it was dropped
    pane = await page.locator(".react-flow").bounding_box()
    await drag_to(page, node(page, "set"), pane["x"] + pane["width"] - 110,
                  pane["y"] + pane["height"] - 50)
    await page.wait_for_function(
        "() => [...document.querySelectorAll('.cm-content .cm-line')].map(l => l.textContent)"
        ".join('\\n').includes('\\n  - id: set')")
    text = await editor_text(page)
    assert shape(text) == {"": ["loop_1", "parallel", "set"], "parallel": ["llm"]}
    assert "set" in yaml.safe_load(text)["metadata"]["layout"]
    await shot(page, "structure-04-nested-and-out")
    await axe_at_both_widths(page)
