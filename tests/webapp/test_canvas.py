"""The workflow editor in Chromium, as someone coming from a canvas tool uses
it: a workflow built from nothing (blocks from the palette, connected by
dragging, settings in a form with `{{` completion) is saved, validates, runs,
and its YAML is what a person would write; a commented YAML edited on the
canvas keeps every comment and every line the edits did not touch; unsaved
work is not lost unasked; branch labels stay apart; no request leaves the
origin.  Screenshots (FLOWFORGE_SCREENSHOTS=1): tests/webapp/screenshots/canvas-*.png."""

from __future__ import annotations

import difflib
import re
from typing import Any

import yaml
from playwright.async_api import expect

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_accessibility import serious_violations

YAML = {"Content-Type": "application/yaml"}


def same_origin_only(page: Any, origin: str) -> list[str]:
    """Every request the page makes that leaves `origin` (none may)."""
    elsewhere: list[str] = []
    page.on("request", lambda request: None if request.url.startswith((origin + "/", "data:",
                                                                        "blob:"))
            else elsewhere.append(request.url))
    return elsewhere


async def drag(page: Any, source: Any, target: Any) -> None:
    """Press on `source`, move in steps (React Flow follows the pointer), release on `target`."""
    start, end = await source.bounding_box(), await target.bounding_box()
    await page.mouse.move(start["x"] + start["width"] / 2, start["y"] + start["height"] / 2)
    await page.mouse.down()
    await page.mouse.move(end["x"] + end["width"] / 2, end["y"] + end["height"] / 2, steps=12)
    await page.mouse.up()


def node(page: Any, block: str) -> Any:
    return page.locator(f".react-flow__node[data-id='{block}']")


async def editor_text(page: Any) -> str:
    return await page.evaluate(
        "() => [...document.querySelectorAll('.cm-content .cm-line')].map(l => l.textContent).join('\\n')")


async def wait_for_text(page: Any, fragment: str) -> None:
    await page.wait_for_function(
        "f => [...document.querySelectorAll('.cm-content .cm-line')].map(l => l.textContent)"
        ".join('\\n').includes(f)", arg=fragment)


async def test_a_workflow_built_from_nothing_on_the_canvas_saves_validates_and_runs(web, page):
    async with web.client("alice") as alice:
        added = await alice.post("/api/blocks", json={
            "id": "shout", "name": "Shout", "description": "Upper-cases a text",
            "execution_type": "python",
            "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
            "source_code": "async def execute(inputs, context):\n"
                           "    return {'text': inputs['text'].upper()}\n"})
        assert added.status_code == 201, added.text
    elsewhere = same_origin_only(page, web.url)
    await sign_in(page, web)
    await page.get_by_role("button", name="New workflow").click()
    await page.wait_for_url("**/new-workflow")
    await page.get_by_role("heading", name="New workflow").wait_for()

    # the id, written in the YAML pane
    line = page.locator(".cm-line", has_text="id: my-workflow")
    await line.click()
    await page.keyboard.press("End")
    for _ in "my-workflow":
        await page.keyboard.press("Backspace")
    await page.keyboard.type("returns")

    # the palette lists every block type of the schema, each with its description
    async with web.client("alice") as alice:
        schema = (await alice.get("/api/schema")).json()
    kinds = {entry["const"]: entry["description"]
             for entry in schema["$defs"]["BlockSpec"]["properties"]["type"]["oneOf"]}
    await page.get_by_role("button", name="Add block").click()
    palette = page.get_by_role("dialog", name="Add a block")
    types = palette.get_by_role("list", name="Block types")
    listed = await types.get_by_role("button").all_text_contents()
    assert sorted(listed) == sorted(set(kinds) - {"registry"})     # registry blocks: by their id
    assert kinds["approval"] in await types.text_content()
    await shot(page, "canvas-01-palette")
    assert await serious_violations(page) == []
    registry = palette.get_by_role("list", name="Registry blocks")
    assert "Upper-cases a text" in await registry.text_content()     # and the registry's
    await palette.get_by_label("Search block types").fill("approve")
    await expect(types.get_by_role("button")).to_have_text(["approval"])
    await expect(registry).to_have_count(0)
    await palette.get_by_label("Search block types").fill("upper-case")
    await expect(registry.get_by_role("button")).to_have_text(["shout"])
    await palette.get_by_label("Search block types").fill("")
    await types.get_by_role("button", name="input", exact=True).click()
    for kind in ("llm", "response"):
        await page.get_by_role("button", name="Add block").click()
        await page.get_by_role("dialog", name="Add a block").get_by_role(
            "list", name="Block types").get_by_role("button", name=kind, exact=True).click()
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 3")

    # connected by dragging from a block's lower handle to the next one's upper handle
    await drag(page, node(page, "input").locator(".react-flow__handle.source"),
               node(page, "llm").locator(".react-flow__handle.target"))
    await wait_for_text(page, "after: [input]")
    await drag(page, node(page, "llm").locator(".react-flow__handle.source"),
               node(page, "response").locator(".react-flow__handle.target"))
    await wait_for_text(page, "after: [llm]")
    await page.wait_for_function("document.querySelectorAll('.react-flow__edge').length === 2")

    # the llm block's settings in its form: required fields said, problems shown as you type
    await node(page, "llm").click()
    form = page.get_by_role("form", name="Settings of llm")
    prompt = form.get_by_label("prompt (required)", exact=True)
    assert await prompt.get_attribute("aria-required") == "true"
    await expect(form.locator(".field-problem").first).to_be_visible()   # prompt is missing
    await form.get_by_label("system", exact=True).fill("You are a customer support assistant.")
    await prompt.fill("Can I return my order after three weeks?")
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await expect(form.locator(".field-problem")).to_have_count(0)
    assert "temperature" not in await editor_text(page)           # no default written in
    await shot(page, "canvas-02-llm-form")

    # the response's message: `{{` offers what the blocks upstream give
    await node(page, "response").click()
    message = page.get_by_role("form", name="Settings of response").get_by_label(
        "message", exact=True)
    await message.click()
    await message.type("{{ll")
    options = page.get_by_role("listbox", name="References").get_by_role("option")
    await expect(options.first).to_have_text("{{llm.content}}")
    assert "{{response" not in " ".join(await options.all_text_contents())  # not itself
    await shot(page, "canvas-03-completion")
    assert await serious_violations(page) == []
    await page.keyboard.press("Enter")
    await expect(message).to_have_value("{{llm.content}}")
    await page.get_by_text("No problems: the document is valid.").wait_for()

    await page.get_by_role("button", name="Save the new workflow").click()
    await page.wait_for_url("**/workflows/returns")
    await expect(page.get_by_label("Version shown")).to_have_text("version 1")
    async with web.client("alice") as alice:
        source = (await alice.get("/api/workflows/returns")).json()["source"]
        checked = (await alice.post("/api/validate", content=source, headers=YAML)).json()
    assert checked["valid"] is True, checked["problems"]
    layout = re.search(r"\nmetadata:\n  layout:\n((?:    \w+: \{x: -?\d+, y: -?\d+\}\n){3})$",
                       source)
    assert layout, source
    assert source[:layout.start() + 1] == (
        "version: 1\n"
        "id: returns\n"
        "name: My workflow\n"
        "blocks:\n"
        "  - id: input\n"
        "    type: input\n"
        "  - id: llm\n"
        "    type: llm\n"
        "    after: [input]\n"
        "    with:\n"
        "      system: You are a customer support assistant.\n"
        "      prompt: Can I return my order after three weeks?\n"
        "  - id: response\n"
        "    type: response\n"
        "    after: [llm]\n"
        "    with:\n"
        "      message: \"{{llm.content}}\"\n")
    await shot(page, "canvas-04-saved")

    # a block moved on the canvas keeps its place across a save and a reload
    before = await node(page, "response").bounding_box()
    llm_box = await node(page, "llm").bounding_box()
    await page.mouse.move(before["x"] + 20, before["y"] + 12)
    await page.mouse.down()
    await page.mouse.move(before["x"] + 320, before["y"] + 12, steps=10)
    await page.mouse.up()
    await page.get_by_role("status").filter(has_text="Unsaved changes").wait_for()
    moved = yaml.safe_load(await editor_text(page))["metadata"]["layout"]["response"]
    assert moved != yaml.safe_load(source)["metadata"]["layout"]["response"]

    # unsaved work: leaving asks first, and "stay" stays
    asked: list[str] = []

    async def stay(dialog: Any) -> None:
        asked.append(dialog.type)
        await dialog.dismiss()

    page.on("dialog", stay)
    await page.get_by_role("link", name="Workflows").click()
    assert asked == ["confirm"]
    assert page.url.endswith("/workflows/returns")
    await page.close(run_before_unload=True)             # a reload or a closed tab asks too
    await page.wait_for_timeout(300)
    assert asked == ["confirm", "beforeunload"] and not page.is_closed()
    page.remove_listener("dialog", stay)

    await page.get_by_role("button", name="Save as a new version").click()
    await page.get_by_text("Saved version 2.").wait_for()
    await page.reload()
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 3")
    after_box, llm_after = await node(page, "response").bounding_box(), \
        await node(page, "llm").bounding_box()
    # (each block was added beside the one selected: the gap to llm grew by the drag)
    assert (after_box["x"] - llm_after["x"]) - (before["x"] - llm_box["x"]) > 100

    # it runs
    await page.get_by_role("link", name="Run...").click()
    await page.get_by_role("button", name="Start the run").click()
    await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]+$"))
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for(timeout=60_000)
    run_id = page.url.rsplit("/", 1)[1]
    async with web.client("alice") as alice:
        run = (await alice.get(f"/api/runs/{run_id}")).json()
    assert "30 days" in str(run["outputs"]["response"])
    await shot(page, "canvas-05-run")
    assert elsewhere == []


COMMENTED = """\
# Refunds: small ones pass at once, large ones wait for a person.
version: 1
id: refunds
name: Refunds   # shown in the list
inputs:
  amount: {type: number, default: 50}   # euros
blocks:
  # how much is asked
  - id: assess
    type: set
    with: {amount: "{{input.amount}}"}   # a raw number
  - id: gate          # big or small?
    type: condition
    with:
      cases:
        - {when: "assess.amount >= 1000", goto: big}   # a person decides
      default: small
  # the two ways
  - id: big
    type: approval
    with: {message: "Refund {{assess.amount}} EUR?", on_reject: refused}
  - id: small
    type: response
    with:
      message: Refunded.   # at once
  - id: paid
    type: response
    after: [big]
    with: {message: Refunded after approval.}
  - id: refused
    type: response
    with: {message: Refused.}
# end of the blocks
"""


def overlap(a: dict, b: dict) -> bool:
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"] or
                a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])


async def test_a_commented_workflow_edited_on_the_canvas_keeps_every_comment(web, page):
    async with web.client("alice") as alice:
        saved = await alice.put("/api/workflows/refunds", content=COMMENTED, headers=YAML)
        assert saved.status_code == 201, saved.text
    elsewhere = same_origin_only(page, web.url)
    await sign_in(page, web, at="/workflows/refunds")
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 6")
    await page.get_by_text("No problems: the document is valid.").wait_for()

    # branch labels: a condition's case and default apart, an approval's approve / reject
    await page.wait_for_function("document.querySelectorAll('.react-flow__edge-text').length === 4")
    labels = page.locator(".react-flow__edge-text")
    assert sorted(await labels.all_text_contents()) == \
        ["approve", "assess.amount >= 1000", "default", "reject"]
    boxes = [await label.bounding_box() for label in await labels.all()]
    assert not any(overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]), boxes
    await shot(page, "canvas-06-commented-workflow")

    # a block from the palette, connected by dragging
    await page.get_by_role("button", name="Add block").click()
    await page.get_by_role("dialog", name="Add a block").get_by_role(
        "button", name="progress", exact=True).click()
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 7")
    form = page.get_by_role("form", name="Settings of progress")     # a new block is selected
    await form.get_by_label("percent (required)", exact=True).fill("100")
    await form.get_by_label("percent (required)", exact=True).press("Enter")
    await wait_for_text(page, "percent: 100")
    await page.get_by_role("complementary", name="Block progress").get_by_role(
        "button", name="Close").click()
    await drag(page, node(page, "small").locator(".react-flow__handle.source"),
               node(page, "progress").locator(".react-flow__handle.target"))
    await wait_for_text(page, "after: [small]")

    # a field changed in its form: the line's comment stays
    await node(page, "small").click()
    await page.get_by_role("form", name="Settings of small").get_by_label(
        "message", exact=True).fill("Refunded at once.")
    await wait_for_text(page, "message: Refunded at once.")

    # an edge deleted with the keyboard, a block with the panel's button
    await page.locator("[aria-label^='Edge from big to paid']").click()
    await page.get_by_role("complementary", name="Edge big to paid").wait_for()
    await page.keyboard.press("Delete")
    await page.wait_for_function("!document.querySelector(\"[aria-label^='Edge from big to paid']\")")
    await node(page, "refused").click()
    await page.get_by_role("button", name="Delete the block").click()
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 6")
    # a block moved
    box = await node(page, "assess").bounding_box()
    await page.mouse.move(box["x"] + 20, box["y"] + 12)
    await page.mouse.down()
    await page.mouse.move(box["x"] - 180, box["y"] + 12, steps=8)
    await page.mouse.up()
    await wait_for_text(page, "assess: {x:")
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await shot(page, "canvas-07-commented-edited")
    await page.get_by_role("button", name="Save as a new version").click()
    await page.get_by_text("Saved version 2.").wait_for()

    async with web.client("alice") as alice:
        source = (await alice.get("/api/workflows/refunds")).json()["source"]
    comments = [line[line.index("#"):] for line in COMMENTED.splitlines() if "#" in line]
    assert [c for c in comments if c not in source] == []
    changes = list(difflib.ndiff(COMMENTED.splitlines(), source.splitlines()))
    assert [line[2:] for line in changes if line.startswith("- ")] == [  # exactly what was edited
        '    with: {message: "Refund {{assess.amount}} EUR?", on_reject: refused}',
        "      message: Refunded.   # at once",
        "    after: [big]",
        "  - id: refused",
        "    type: response",
        "    with: {message: Refused.}"]
    assert [line[2:] for line in changes if line.startswith("+ ")][:3] == [
        '    with: {message: "Refund {{assess.amount}} EUR?"}',
        "      message: Refunded at once. # at once",
        "  - id: progress"]
    document = yaml.safe_load(source)
    assert [b["id"] for b in document["blocks"]] == \
        ["assess", "gate", "big", "small", "paid", "progress"]
    assert document["blocks"][-1] == {"id": "progress", "type": "progress",
                                      "with": {"percent": 100}, "after": ["small"]}
    assert set(document["metadata"]["layout"]) == {"progress", "assess"}
    assert elsewhere == []


BRANCHES = """\
version: 1
id: branches
inputs:
  n: {type: number, default: 3}
blocks:
  - id: gate
    type: condition
    with:
      cases:
        - {when: "input.n > 2", goto: big}
  - id: big
    type: set
    with: {size: big}
  - id: huge
    type: set
    with: {size: huge}
  - id: small
    type: set
    with: {size: small}
"""


async def test_a_condition_is_wired_from_its_handles_and_the_form_follows_the_yaml(web, page):
    async with web.client("alice") as alice:
        saved = await alice.put("/api/workflows/branches", content=BRANCHES, headers=YAML)
        assert saved.status_code == 201, saved.text
    elsewhere = same_origin_only(page, web.url)
    await sign_in(page, web, at="/workflows/branches")
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 4")
    gate = node(page, "gate")
    await drag(page, gate.locator("[data-outlet='new-case']"),
               node(page, "huge").locator(".react-flow__handle.target"))
    await wait_for_text(page, '- {when: "", goto: huge}')
    await drag(page, gate.locator("[data-outlet='default']"),
               node(page, "small").locator(".react-flow__handle.target"))
    await wait_for_text(page, "default: small")
    text = await editor_text(page)
    assert text.count("when:") == 2 and "- {when: \"input.n > 2\", goto: big}" in text
    # the new case's `when` is empty: the form says so under that case's field, as you type
    await gate.click()
    form = page.get_by_role("form", name="Settings of gate")
    when = form.get_by_role("group", name="cases 2", exact=True).get_by_label(
        "when (required)", exact=True)
    await expect(when).to_have_attribute("aria-invalid", "true")
    await expect(form.get_by_role("group", name="cases 1", exact=True).get_by_label(
        "goto (required)", exact=True)).to_have_value("big")

    # typing in the YAML: the form follows
    await page.locator(".cm-line", has_text="default: small").click()
    await page.keyboard.press("End")
    for _ in "small":
        await page.keyboard.press("Backspace")
    await page.keyboard.type("big")
    await expect(form.get_by_label("default", exact=True)).to_have_value("big")

    # and the form writes the YAML: an expression that does not parse is said at once
    await when.fill("input.n >")
    await wait_for_text(page, '{when: "input.n >", goto: huge}')
    await expect(form.locator(".field-problem", has_text="input.n >")).not_to_have_count(0)
    await when.fill("input.n > 9")
    await form.get_by_label("default", exact=True).fill("small")
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await expect(when).not_to_have_attribute("aria-invalid", "true")
    await page.wait_for_function("document.querySelectorAll('.react-flow__edge-text').length === 3")
    assert sorted(await page.locator(".react-flow__edge-text").all_text_contents()) == \
        ["default", "input.n > 2", "input.n > 9"]
    await shot(page, "canvas-08-condition")
    assert elsewhere == []
