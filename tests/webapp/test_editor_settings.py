"""The workflow settings form in Chromium: id, name, description, typed
inputs (added, renamed, typed, a default, required or not, removed),
variables and the default model (only models this user may use) are set
without typing YAML, each written into the author's text as one edit.
Screenshots (FLOWFORGE_SCREENSHOTS=1): tests/webapp/screenshots/settings-*.png."""

from __future__ import annotations

from typing import Any

import yaml
from playwright.async_api import expect

from tests.webapp.conftest import open_saved, shot, sign_in
from tests.webapp.test_canvas import editor_text, wait_for_text
from tests.webapp.test_editor_structure import axe_at_both_widths


async def commit(field: Any, value: str) -> None:
    await field.fill(value)
    await field.press("Enter")


async def test_the_settings_form_writes_id_name_inputs_variables_and_model(web, page):
    await sign_in(page, web)
    await page.get_by_role("button", name="New workflow").click()
    await page.get_by_role("heading", name="New workflow").wait_for()
    await page.get_by_role("button", name="Workflow settings").click()
    form = page.get_by_role("form", name="Workflow settings")
    await commit(form.get_by_label("Workflow id"), "desk")
    await commit(form.get_by_label("Name"), "Support desk")
    await commit(form.get_by_label("Description"), "Answers questions")

    await form.get_by_role("button", name="Add an input").click()
    await commit(form.get_by_role("group", name="Input input_1").get_by_label("name"), "query")
    await form.get_by_role("button", name="Add an input").click()
    top_k = form.get_by_role("group", name="Input input_1")
    await commit(top_k.get_by_label("name"), "top_k")
    top_k = form.get_by_role("group", name="Input top_k")
    await top_k.get_by_label("type").select_option("integer")
    await expect(top_k.get_by_label("default")).to_be_disabled()       # required: no default
    await top_k.get_by_label("required").uncheck()
    await commit(top_k.get_by_label("default"), "three")
    await expect(top_k.get_by_role("alert")).to_contain_text("not an integer")
    await commit(top_k.get_by_label("default"), "3")
    await form.get_by_role("button", name="Add an input").click()
    await form.get_by_role("button", name="Remove input input_1").click()
    await expect(form.get_by_role("group", name="Input input_1")).to_have_count(0)

    await form.get_by_role("button", name="Add a variable").click()
    variable = form.get_by_role("group", name="Variable var_1")
    await commit(variable.get_by_label("value"), "Acme")
    await commit(variable.get_by_label("name"), "company")

    model = form.get_by_label("Default model")
    offered = await model.locator("option").all_text_contents()
    assert "local/smollm2" in offered
    assert "openai/gpt-4o" not in offered          # paid with a key this server does not share
    await model.select_option("local/smollm2")
    await wait_for_text(page, "model: local/smollm2")
    await shot(page, "settings-01-form")
    await axe_at_both_widths(page)

    text = await editor_text(page)
    assert yaml.safe_load(text) == {
        "version": 1, "id": "desk", "name": "Support desk", "description": "Answers questions",
        "inputs": {"query": {"type": "string"}, "top_k": {"type": "integer", "default": 3}},
        "variables": {"company": "Acme"}, "defaults": {"model": "local/smollm2"}, "blocks": []}
    assert list(yaml.safe_load(text))[-1] == "blocks"          # written above the blocks
    assert "  query: {type: string}\n" in text and "  company: Acme\n" in text
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await page.get_by_role("button", name="Save the new workflow").click()
    await page.wait_for_url("**/workflows/desk")
    await page.get_by_role("heading", name="Support desk").wait_for()


RENAME_SOURCE = """\
version: 1
id: renames
name: Renames
inputs:
  # what the user asked
  query: {type: string}
  query_id: {type: string}   # kept as written
blocks:
  - id: ask
    type: set
    with: {q: "{{input.query}}", id: "{{ input.query_id }}", n: {expr: "len(input.query) + 1"}}
  - id: gate
    type: condition
    with:
      cases:
        - {when: "input.query != '' and input.query_id", goto: reply}
  - id: reply
    type: set
    with: {text: "Re: {{ input.query }}"}
  - id: again
    type: loop
    with: {times: 2}
    blocks:
      - id: step
        type: set
        with: {seen: "{{input.query}} {{loop.index}}"}
"""


async def test_renaming_an_input_rewrites_every_reference_in_one_edit(web, page):
    await open_saved(page, web, RENAME_SOURCE)
    await page.get_by_role("button", name="Workflow settings").click()
    form = page.get_by_role("form", name="Workflow settings")
    await commit(form.get_by_role("group", name="Input query", exact=True).get_by_label("name"),
                 "question")
    expected = (RENAME_SOURCE.replace("  query: {type", "  question: {type")
                .replace("input.query}}", "input.question}}")
                .replace("input.query }}", "input.question }}")
                .replace("len(input.query)", "len(input.question)")
                .replace("input.query != ''", "input.question != ''"))
    await wait_for_text(page, "Re: {{ input.question }}")
    assert await editor_text(page) == expected
    assert "input.query_id" in expected                  # another input, left alone
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await shot(page, "settings-02-input-renamed")
    # one edit: one undo brings every reference back
    await page.get_by_role("button", name="Undo").click()
    await wait_for_text(page, "Re: {{ input.query }}")
    assert await editor_text(page) == RENAME_SOURCE
