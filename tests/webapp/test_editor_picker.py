"""The `{{` picker in Chromium: it offers every block's declared outputs
(an agent's `content`, `tokens`...; GET /api/block-outputs, the declaration
validation reads), an open output (a function's) as a whole, loop.index
inside a loop, nothing downstream; it works while the document is invalid
(normal mid-build) and inserts a whole reference, closed.
Screenshots (FLOWFORGE_SCREENSHOTS=1): tests/webapp/screenshots/picker-*.png."""

from __future__ import annotations

from playwright.async_api import TimeoutError as PlaywrightTimeoutError, expect

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_canvas import node
from tests.webapp.test_editor_structure import axe_at_both_widths

SOURCE = """\
version: 1
id: picker
name: Picker
inputs:
  query: {type: string}
blocks:
  - id: answer
    type: agent
    with: {prompt: "{{input.query}}"}
  - id: risky
    type: function
    with: {function: not_registered}
  - id: draft
    type: llm
  - id: reply
    type: response
    after: [answer, risky]
  - id: each
    type: loop
    with: {times: 2}
    blocks:
      - id: step
        type: response
"""


async def test_the_picker_offers_declared_outputs_while_invalid_and_inserts_whole_references(
        web, page):
    async with web.client("alice") as alice:
        outputs = (await alice.get("/api/block-outputs")).json()["types"]
    assert [o["name"] for o in outputs["agent"]["outputs"]][:2] == ["content", "model"]
    await sign_in(page, web)
    await page.get_by_role("button", name="New workflow").click()
    await page.locator(".cm-content").click()
    await page.keyboard.press("Control+a")
    await page.keyboard.insert_text(SOURCE)
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 6")
    await expect(page.get_by_role("list", name="Problems")).to_contain_text("prompt")   # invalid

    await node(page, "reply").click()
    message = page.get_by_role("form", name="Settings of reply").get_by_label("message", exact=True)
    await message.click()
    await message.type("{{ans")
    options = page.get_by_role("listbox", name="References").get_by_role("option")
    await expect(options.first).to_have_text("{{answer.content}}")
    offered = await options.all_text_contents()
    assert "{{answer.tokens}}" in offered and "{{answer}}" not in offered
    await shot(page, "picker-01-agent-fields")
    await axe_at_both_widths(page)
    await page.keyboard.press("Enter")
    await expect(message).to_have_value("{{answer.content}}")
    await message.type(" {{ris")
    await expect(options).to_have_text(["{{risky}}"])        # open output: the whole of it
    await page.keyboard.press("Enter")
    await expect(message).to_have_value("{{answer.content}} {{risky}}")
    await message.type(" {{rep")
    await expect(options).to_have_count(0)                   # not itself

    # inside a loop: the loop's index and item.  The click that leaves the field also
    # commits it, and the canvas is drawn again from the new document; a click that
    # lands in that redraw selected nothing once in three suite runs, so it is given again
    step = page.get_by_role("form", name="Settings of step")
    for attempt in range(3):
        await node(page, "step").click()
        try:
            await step.wait_for(timeout=5_000)
            break
        except PlaywrightTimeoutError:
            if attempt == 2:
                raise
    field = step.get_by_label("message", exact=True)
    await field.click()
    await field.type("{{loop.")
    await expect(options).to_have_text(["{{loop.index}}", "{{loop.item}}", "{{loop.previous}}"])
