"""YAML fields of a block's form are checked as they are typed, in Chromium:
a draft that does not parse, or whose shape the block refuses (an evaluator
metric with no `name`, a condition case with no `goto`, a list written as a
mapping), is shown under the field while the author types, before leaving
it, and never written; a valid draft is written a moment later, without
leaving the field.  Screenshots (FLOWFORGE_SCREENSHOTS=1):
tests/webapp/screenshots/live-*.png."""

from __future__ import annotations

import re

import yaml
from playwright.async_api import expect

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_canvas import editor_text, node, wait_for_text

SOURCE = """\
version: 1
id: live
name: Live
blocks:
  - id: answer
    type: set
    with: {content: hello}
  - id: grade
    type: evaluator
    with:
      content: "{{answer.content}}"
      metrics:
        - {name: Accuracy, range: [0, 10]}
  - id: gate
    type: condition
    with:
      cases:
        - {when: "grade.accuracy >= 8", goto: done}
  - {id: done, type: set, with: {ok: true}}
"""


async def test_yaml_fields_show_parse_and_shape_problems_while_typing(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=SOURCE,
                                 headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
    await sign_in(page, web)
    await page.goto(web.url + "/workflows/live")
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 4")
    await page.get_by_text("No problems: the document is valid.").wait_for()

    await node(page, "grade").click()
    form = page.get_by_role("form", name="Settings of grade")
    metrics = form.get_by_role("textbox", name=re.compile(r"^metrics"))
    alert = form.locator(".field", has=page.get_by_role("textbox", name=re.compile(r"^metrics"))).get_by_role("alert")
    await metrics.fill("- {name: Clarity")                     # focus stays in the field
    await expect(alert).to_contain_text("metrics: ")
    await expect(metrics).to_have_attribute("aria-invalid", "true")
    await expect(metrics).to_be_focused()
    await metrics.fill("- {description: no name}")
    await expect(alert).to_have_text("metrics[0]: 'name' is missing")
    await metrics.fill("name: Clarity")
    await expect(alert).to_have_text("metrics: should be an array, not an object")
    await shot(page, "live-01-shape-problem")
    assert await editor_text(page) == SOURCE                   # nothing invalid was written
    await metrics.fill("- {name: Accuracy, range: {min: 0, max: 5}}\n- {name: Clarity}")
    await wait_for_text(page, "name: Clarity")
    await expect(alert).to_have_count(0)
    await expect(metrics).to_be_focused()
    assert yaml.safe_load(await editor_text(page))["blocks"][1]["with"]["metrics"] == [
        {"name": "Accuracy", "range": {"min": 0, "max": 5}}, {"name": "Clarity"}]
    await page.get_by_text("No problems: the document is valid.").wait_for()

    await node(page, "gate").click()
    form = page.get_by_role("form", name="Settings of gate")
    cases = form.get_by_role("textbox", name=re.compile(r"^cases"))
    await cases.fill("- {when: 'grade.accuracy >= 9'}")
    await expect(form.locator(".field", has=page.get_by_role("textbox", name=re.compile(r"^cases"))).get_by_role("alert")).to_have_text(
        "cases[0]: 'goto' is missing")
    assert "goto: done" in await editor_text(page)
