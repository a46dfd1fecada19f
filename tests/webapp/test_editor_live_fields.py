"""YAML fields of a block's form are checked as they are typed, in Chromium:
a draft that does not parse is shown under the field while the author types,
before leaving it, and never written; a valid draft is written a moment
later, without leaving the field.  Lists of items (a condition's `cases`, an
evaluator's `metrics`) are edited item by item (tests/webapp/test_editor_proof.py);
a value inside an item that is not plain text (a metric's `range`) is such
a YAML field.  Screenshots (FLOWFORGE_SCREENSHOTS=1): tests/webapp/screenshots/live-*.png."""

from __future__ import annotations

import re

import yaml
from playwright.async_api import expect

from tests.webapp.conftest import open_saved, shot
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
    await open_saved(page, web, SOURCE)

    await node(page, "grade").click()
    form = page.get_by_role("form", name="Settings of grade")
    metric = form.get_by_role("group", name="metrics 1")
    value_range = metric.get_by_role("textbox", name=re.compile(r"^range"))
    alert = metric.locator(".field", has=page.get_by_role("textbox", name=re.compile(r"^range"))).get_by_role("alert")
    await value_range.fill("[0, 10")                          # focus stays in the field
    await expect(alert).to_contain_text("range: ")
    await expect(value_range).to_have_attribute("aria-invalid", "true")
    await expect(value_range).to_be_focused()
    await shot(page, "live-01-parse-problem")
    assert await editor_text(page) == SOURCE                   # nothing invalid was written
    await value_range.fill("[0, 5]")
    await wait_for_text(page, "5]")
    await expect(alert).to_have_count(0)
    await expect(value_range).to_be_focused()
    assert yaml.safe_load(await editor_text(page))["blocks"][1]["with"]["metrics"] == [
        {"name": "Accuracy", "range": [0, 5]}]
    await page.get_by_text("No problems: the document is valid.").wait_for()
