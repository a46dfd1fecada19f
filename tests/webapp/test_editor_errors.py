"""Problems on the canvas, in Chromium: a block with a problem carries a
badge saying how many (its messages on hover, its count in its accessible
name), and the edges of a cycle are drawn in the error colour and named so;
fixing the cause clears both.  Screenshots (FLOWFORGE_SCREENSHOTS=1):
tests/webapp/screenshots/errors-*.png."""

from __future__ import annotations

from playwright.async_api import expect

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_canvas import node
from tests.webapp.test_editor_structure import add_from_palette, axe_at_both_widths

SOURCE = """\
version: 1
id: loops
name: Loops
blocks:
  - id: a
    type: set
    after: [b]
    with: {x: 1}
  - id: b
    type: set
    after: [a]
    with: {y: 1}
  - id: c
    type: set
    after: [b]
    with: {z: 1}
"""

ERROR_RED = "rgb(180, 35, 24)"


async def test_problem_badges_on_blocks_and_cycle_edges_in_the_error_colour(web, page):
    await sign_in(page, web)
    await page.get_by_role("button", name="New workflow").click()
    await page.locator(".cm-content").click()
    await page.keyboard.press("Control+a")
    await page.keyboard.insert_text(SOURCE)
    await expect(page.get_by_role("list", name="Problems")).to_contain_text("cycle: ")
    badges = page.locator(".react-flow__node .block-problems")
    await expect(badges).to_have_count(1)
    await expect(badges).to_have_text("1 problem")
    assert await node(page, "c").locator(".block-problems").count() == 0
    for source, target in (("a", "b"), ("b", "a")):
        edge = page.get_by_label(f"Edge from {source} to {target}, part of a cycle")
        await expect(edge).to_have_count(1)
        stroke = await edge.locator(".react-flow__edge-path").evaluate(
            "el => getComputedStyle(el).stroke")
        assert stroke == ERROR_RED
    calm = page.get_by_label("Edge from b to c", exact=True)
    assert await calm.locator(".react-flow__edge-path").evaluate(
        "el => getComputedStyle(el).stroke") != ERROR_RED
    await shot(page, "errors-01-cycle")
    await axe_at_both_widths(page)

    # the cycle broken from the form: the red and the badge go
    await node(page, "a").click()
    await page.get_by_role("form", name="Settings of a").get_by_role(
        "group", name="Runs after").get_by_label("b").uncheck()
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await expect(badges).to_have_count(0)
    await expect(page.get_by_label("Edge from b to a, part of a cycle")).to_have_count(0)

    # a block added without its required prompt: a badge on it alone
    await add_from_palette(page, "llm")
    await expect(node(page, "llm").locator(".block-problems")).to_have_text("1 problem")
    await expect(badges).to_have_count(1)
    await expect(node(page, "llm")).to_have_attribute("aria-label", "llm (llm), 1 problem(s)")


BROKEN = """\
version: 1
id: broken
name: Broken
blocks:
  - id: a
    type: set
    with: {x: "{{ input.n + }}"}
  - id: b
    type: set
    with: {y: "{{a.x}}"}
"""


async def test_a_broken_template_expression_gets_a_badge_and_its_line(web, page):
    await sign_in(page, web)
    await page.get_by_role("button", name="New workflow").click()
    await page.locator(".cm-content").click()
    await page.keyboard.press("Control+a")
    await page.keyboard.insert_text(BROKEN)
    problems = page.get_by_role("list", name="Problems")
    await expect(problems).to_contain_text("{{ input.n + }} is not a reference")
    await expect(problems.locator("li")).to_have_count(1)
    await expect(problems.locator("li")).to_contain_text("line 7")
    await expect(node(page, "a").locator(".block-problems")).to_have_text("1 problem")
    assert await node(page, "b").locator(".block-problems").count() == 0
    await shot(page, "errors-02-broken-template")
