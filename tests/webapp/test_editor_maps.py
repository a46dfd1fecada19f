"""Mappings with free keys without YAML (issue 43): a set block's keys and a
knowledge block's filters are edited row by row in the block form (key,
value, and a type where the schema allows more than text), spliced into the
author's text (comments kept, a renamed key keeps its line), each change one
undo step; a key empty or used twice is flagged beside its row and not
written; a value the rows cannot show stays in the YAML textarea; a required
list emptied says so beside the field.  axe finds nothing serious at 1280
and 390 px.  Screenshots (FLOWFORGE_SCREENSHOTS=1): tests/webapp/screenshots/maps-*.png."""

from __future__ import annotations

import re

import yaml
from playwright.async_api import expect

from tests.webapp.conftest import open_saved, shot
from tests.webapp.test_canvas import editor_text, wait_for_text
from tests.webapp.test_editor_proof import commit, field, select
from tests.webapp.test_editor_structure import axe_at_both_widths

YAML = {"Content-Type": "application/yaml"}

SOURCE = """\
version: 1
id: maps
inputs:
  query: {type: string}
blocks:
  # find the policy passages
  - id: search
    type: knowledge
    with:
      knowledge_base: policies
      query: "{{input.query}}"   # what the customer asked
  - id: facts
    type: set
    with:
      label: Policy answer   # shown to the agent
  - id: grade
    type: evaluator
    with:
      content: "{{search.context}}"
      metrics: [{name: Accuracy}]
"""



async def test_a_set_blocks_keys_and_a_knowledge_filter_are_written_without_yaml(web, page):
    await open_saved(page, web, SOURCE)

    # the set block: its keys row by row; a template stays text, a number and a
    # list are chosen as such
    form = await select(page, "facts")
    first = form.get_by_role("group", name="with 1", exact=True)
    await expect(first.get_by_label("key")).to_have_value("label")
    await expect(first.get_by_label("value")).to_have_value("Policy answer")
    await form.get_by_role("button", name="Add a key to with").click()
    row = form.get_by_role("group", name="with 2", exact=True)
    await commit(row.get_by_label("key"), "context")
    await row.get_by_label("value").fill("{{search.context}}")
    await form.get_by_role("button", name="Add a key to with").click()
    row = form.get_by_role("group", name="with 3", exact=True)
    await commit(row.get_by_label("key"), "limit")
    await row.get_by_label("type").select_option(label="number")
    await commit(row.get_by_label("value"), "3")
    await form.get_by_role("button", name="Add a key to with").click()
    row = form.get_by_role("group", name="with 4", exact=True)
    await commit(row.get_by_label("key"), "topics")
    await row.get_by_label("type").select_option(label="list")
    await commit(row.get_by_label("value"), "refunds\n\nreturns ")
    await wait_for_text(page, "topics:")
    # a renamed key keeps its line and the author's comment there
    await commit(first.get_by_label("key"), "title")
    await wait_for_text(page, "title: Policy answer")
    assert re.search(r"^      title: Policy answer +# shown to the agent$", await editor_text(page), re.M)

    # the knowledge block's filters: a key whose value is a list
    form = await select(page, "search")
    await form.get_by_role("button", name="Add a key to filters").click()
    row = form.get_by_role("group", name="filters 1", exact=True)
    await commit(row.get_by_label("key"), "category")
    await row.get_by_label("type").select_option(label="list")
    await commit(row.get_by_label("value"), "policies\nlegal")
    await wait_for_text(page, "filters:")
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await shot(page, "maps-01-rows")
    await axe_at_both_widths(page)

    text = await editor_text(page)
    for kept in ("# find the policy passages", 'query: "{{input.query}}"   # what the customer asked'):
        assert kept in text
    document = yaml.safe_load(text)
    blocks = {b["id"]: b for b in document["blocks"]}
    assert blocks["facts"]["with"] == {"title": "Policy answer", "context": "{{search.context}}",
                                       "limit": 3, "topics": ["refunds", "returns"]}
    assert list(blocks["facts"]["with"]) == ["title", "context", "limit", "topics"]
    assert blocks["search"]["with"]["filters"] == {"category": ["policies", "legal"]}

    # each change is one undo step: undo takes back the filter's list, then its key
    await page.get_by_role("button", name="Undo").click()
    await page.wait_for_function(
        "() => [...document.querySelectorAll('.cm-content .cm-line')]"
        ".some(l => l.textContent.includes('category: []'))")
    await page.get_by_role("button", name="Redo").click()
    await wait_for_text(page, "category:")
    await page.get_by_text("No problems: the document is valid.").wait_for()

    await page.get_by_role("button", name="Save as a new version").click()
    await page.get_by_text("Saved version 2.").wait_for()
    async with web.client("alice") as alice:
        source = (await alice.get("/api/workflows/maps")).json()["source"]
        checked = (await alice.post("/api/validate", content=source, headers=YAML)).json()
    assert checked["valid"] is True and checked["problems"] == [], checked
    saved = {b["id"]: b for b in yaml.safe_load(source)["blocks"]}
    assert saved["search"]["with"]["filters"] == {"category": ["policies", "legal"]}
    assert saved["facts"]["with"]["limit"] == 3 and saved["facts"]["with"]["topics"] == ["refunds", "returns"]


async def test_a_key_used_twice_or_missing_is_flagged_beside_its_row_and_not_written(web, page):
    await open_saved(page, web, SOURCE)
    form = await select(page, "facts")
    await form.get_by_role("button", name="Add a key to with").click()
    row = form.get_by_role("group", name="with 2", exact=True)
    await commit(row.get_by_label("key"), "label")
    await expect(row.get_by_role("alert")).to_have_text("the key 'label' is used twice: rename one")
    await expect(row.get_by_label("key")).to_have_attribute("aria-invalid", "true")
    await row.get_by_label("value").fill("Second")
    await page.wait_for_timeout(300)
    assert "Second" not in await editor_text(page)        # the YAML keeps its last good state
    await shot(page, "maps-02-duplicate")
    await axe_at_both_widths(page)

    # a key cleared with a value left: flagged too; a key given: written
    await commit(row.get_by_label("key"), "")
    await expect(row.get_by_role("alert")).to_have_text("this row has no key: type one, or remove the row")
    await commit(row.get_by_label("key"), "note")
    await wait_for_text(page, "note: Second")
    await expect(row.get_by_role("alert")).to_have_count(0)
    await form.get_by_role("button", name="Remove with 2").click()
    await page.wait_for_function(
        "() => ![...document.querySelectorAll('.cm-content .cm-line')]"
        ".some(l => l.textContent.includes('note:'))")


async def test_a_value_the_rows_cannot_show_stays_yaml_and_an_emptied_list_says_so_beside_it(web, page):
    await open_saved(page, web, SOURCE)
    # an expression value ({expr: ...}) is not a row: the whole `with` stays YAML
    form = await select(page, "facts")
    await form.get_by_role("button", name="Add a key to with").click()
    row = form.get_by_role("group", name="with 2", exact=True)
    await commit(row.get_by_label("key"), "twice")
    await wait_for_text(page, 'twice: ""')
    text = (await editor_text(page)).replace('twice: ""', 'twice: {expr: "2 * 3"}')
    async with web.client("alice") as alice:
        saved = await alice.put("/api/workflows/maps", content=text, headers=YAML)
        assert saved.status_code == 200, saved.text
    await page.reload()
    form = await select(page, "facts")
    await expect(form.get_by_role("button", name="Add a key to with")).to_have_count(0)
    await expect(field(form, "with")).to_have_value('label: Policy answer\ntwice:\n  expr: 2 * 3')

    # the evaluator's one metric removed: "required" beside the metrics field
    form = await select(page, "grade")
    await form.get_by_role("button", name="Remove metrics 1").click()
    metrics = form.locator(".field").filter(has=page.get_by_role("group", name=re.compile("^metrics")))
    await expect(metrics.get_by_role("alert")).to_contain_text("required")
    await shot(page, "maps-03-emptied")
