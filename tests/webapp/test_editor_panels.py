"""The block panels of the editor fit their width, in Chromium: a router's
and an evaluator's settings (long model names, route hints, metrics, the
buttons under them) once made the panel scroll sideways at 1280 px and at
390 px; nothing in it may now be wider than the panel.  Screenshots
(FLOWFORGE_SCREENSHOTS=1): tests/webapp/screenshots/panels-*.png."""

from __future__ import annotations

from typing import Any

from playwright.async_api import TimeoutError as PlaywrightTimeout

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_canvas import node

YAML = {"Content-Type": "application/yaml"}

SOURCE = """\
version: 1
id: panels
name: Panels
inputs:
  query: {type: string}
blocks:
  - id: answer
    type: set
    with: {content: "{{input.query}}"}
  - id: grade
    type: evaluator
    with:
      content: "{{answer.content}}"
      metrics:
        - {name: Accuracy, description: Correct per the sources and nothing invented, range: [0, 10]}
        - {name: Helpfulness_of_the_answer_to_the_customer_question, description: Useful, range: [0, 5]}
  - id: triage
    type: router
    with:
      prompt: "Standard Response if accuracy >= 8, else Needs Review. Accuracy: {{grade.accuracy}}"
  - {id: standard, type: set, after: [triage], with: {message: "{{answer.content}}"}}
  - {id: review, type: set, after: [triage], with: {message: Flagged for review}}
"""

#: the panel's elements wider than the panel, for the message when it fails
WIDEST = """panel => {
  const limit = panel.getBoundingClientRect().right + 1;
  return [...panel.querySelectorAll('*')]
    .filter(el => el.getBoundingClientRect().right > limit)
    .slice(0, 8).map(el => el.tagName + '.' + el.className + ' ' + Math.round(el.getBoundingClientRect().right - limit) + 'px')
}"""


async def overflow(panel: Any) -> tuple[int, int, list[str]]:
    sizes = await panel.evaluate("p => [p.scrollWidth, p.clientWidth]")
    return sizes[0], sizes[1], await panel.evaluate(WIDEST)


async def select(page: Any, block: str, form: Any) -> None:
    """Click the block until its form shows: the canvas may still be settling
    (fitting its view to the panel just opened) when the click lands, on a
    loaded machine, and a click on the empty canvas selects nothing."""
    for _ in range(3):
        await node(page, block).click()
        try:
            await form.wait_for(timeout=5_000)
            return
        except PlaywrightTimeout:
            continue
    await form.wait_for()


async def test_router_and_evaluator_panels_never_scroll_sideways(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=SOURCE, headers=YAML)
        assert saved.status_code == 201, saved.text
    await sign_in(page, web)
    for width, height in ((1280, 900), (390, 844)):
        await page.set_viewport_size({"width": width, "height": height})
        await page.goto(web.url + "/workflows/panels")
        await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 5")
        for block in ("triage", "grade"):
            panel = page.get_by_role("complementary", name=f"Block {block}")
            await select(page, block, panel.get_by_role("form", name=f"Settings of {block}"))
            await panel.locator("details").first.evaluate("d => d.open = true")   # As YAML
            await page.wait_for_timeout(100)
            scroll, client, widest = await overflow(panel)
            await shot(page, f"panels-{block}-{width}")
            assert scroll <= client, f"{block} at {width} px: {scroll} > {client}: {widest}"
            for form_part in await panel.locator("form > *").all():
                box = await form_part.bounding_box()
                outer = await panel.bounding_box()
                if box:
                    assert box["x"] + box["width"] <= outer["x"] + outer["width"] + 1, \
                        f"{block} at {width} px"
