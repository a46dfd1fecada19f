"""Issue 43's proof, in Chromium: the support desk (examples/support.yaml:
knowledge search -> agent -> evaluator -> router -> two responses), plus a
loop with two children, a parallel map and a condition whose two branches a
later block joins, is built from nothing as a person builds it, without typing
YAML: blocks from the palette, their forms (the evaluator's metrics and the
condition's cases item by item, the knowledge block's sources one per line
and its filters key by key),
"Runs after" choices and one edge dragged between handles, a block added with
the loop selected, one dropped onto the parallel, inputs, a variable and the
server's deterministic (scripted) model in the settings form.  It is saved,
has no problems, runs, and every block ends as the route says: succeeded, or
skipped on the branches not taken.  axe finds nothing serious on the editor at
1280 and 390 px.  Screenshots (FLOWFORGE_SCREENSHOTS=1):
tests/webapp/screenshots/proof-*.png."""

from __future__ import annotations

import re
from typing import Any

import yaml
from playwright.async_api import expect

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_canvas import drag, editor_text, node, wait_for_text
from tests.webapp.test_editor_structure import add_from_palette, axe_at_both_widths, drag_to

YAML = {"Content-Type": "application/yaml"}
QUESTION = "Can I get a refund on an order I placed three weeks ago?"


def field(scope: Any, name: str) -> Any:
    """A form field by its label, whether or not the label says "(required)"."""
    return scope.get_by_label(re.compile(rf"^{re.escape(name)}( \(required\))?$"))


async def commit(control: Any, value: str) -> None:
    """A field written when it is left (numbers, lists): fill it, then leave it."""
    await control.fill(value)
    await control.blur()


async def add(page: Any, kind: str, block_id: str) -> Any:
    """A block from the palette (it is selected as added), renamed in its id
    field; its settings form."""
    await add_from_palette(page, kind)
    form = page.get_by_role("form", name=re.compile(r"^Settings of "))
    ident = form.get_by_label("id", exact=True)
    await ident.fill(block_id)
    await ident.press("Enter")
    form = page.get_by_role("form", name=f"Settings of {block_id}")
    await form.wait_for()
    return form


async def select(page: Any, block_id: str) -> Any:
    """Click a block on the canvas (near its head: a container's middle holds
    its children); its settings form."""
    await node(page, block_id).click(position={"x": 12, "y": 8})
    form = page.get_by_role("form", name=f"Settings of {block_id}")
    await form.wait_for()
    return form


async def close_panel(page: Any, block_id: str) -> None:
    await page.get_by_role("complementary", name=f"Block {block_id}").get_by_role(
        "button", name="Close").click()


async def test_the_support_desk_with_a_loop_a_map_and_a_join_built_without_yaml_runs(web, page):
    await sign_in(page, web)
    await page.get_by_role("button", name="New workflow").click()
    await page.get_by_role("heading", name="New workflow").wait_for()

    # the workflow's settings: id, name, the question as an input, a variable, the model
    await page.get_by_role("button", name="Workflow settings").click()
    settings = page.get_by_role("form", name="Workflow settings")
    for label, value in (("Workflow id", "desk"), ("Name", "Support desk")):
        await settings.get_by_label(label).fill(value)
        await settings.get_by_label(label).press("Enter")
    await settings.get_by_role("button", name="Add an input").click()
    await settings.get_by_role("group", name="Input input_1").get_by_label("name").fill("query")
    await settings.get_by_role("group", name="Input input_1").get_by_label("name").press("Enter")
    await settings.get_by_role("group", name="Input query").wait_for()
    await settings.get_by_role("button", name="Add a variable").click()
    variable = settings.get_by_role("group", name="Variable var_1")
    await variable.get_by_label("value").fill("Acme Outfitters")
    await variable.get_by_label("value").press("Enter")
    await variable.get_by_label("name").fill("company")
    await variable.get_by_label("name").press("Enter")
    model = settings.get_by_label("Default model")
    scripted = [m for m in await model.locator("option").all_text_contents()
                if m.startswith("scripted/")]
    assert len(scripted) == 1, "the server's deterministic model is offered"
    await model.select_option(scripted[0])
    await wait_for_text(page, "model: scripted/")

    # knowledge search: the policies folder, its sources one per line
    form = await add(page, "knowledge", "search")
    await field(form, "knowledge_base").fill("policies")
    await field(form, "query").fill("{{input.query}}")
    await commit(field(form, "top_k"), "3")
    await commit(field(form, "sources"), "policies")
    await wait_for_text(page, "sources:")
    # its filters, as the shipped demo has them: a key whose value is a list
    await form.get_by_role("button", name="Add a key to filters").click()
    row = form.get_by_role("group", name="filters 1", exact=True)
    await commit(row.get_by_label("key"), "category")
    await row.get_by_label("type").select_option(label="list")
    await commit(row.get_by_label("value"), "policies\nlegal")
    await wait_for_text(page, "filters: {category: [policies, legal]}")

    # a parallel map over what the search found; its child dropped onto it
    form = await add(page, "parallel", "cite")
    await field(form, "for_each").fill("{{search.results}}")
    await commit(field(form, "max_concurrency"), "2")
    await close_panel(page, "cite")
    form = await add(page, "progress", "source")
    await commit(field(form, "percent"), "40")
    await close_panel(page, "source")
    target = await node(page, "cite").bounding_box()
    await drag_to(page, node(page, "source"), target["x"] + target["width"] / 2,
                  target["y"] + target["height"] / 2)
    await wait_for_text(page, "      - id: source")
    form = await select(page, "source")
    await field(form, "message").fill("Read {{loop.item.documentName}}")
    await close_panel(page, "source")

    # the support agent answers from the passages
    form = await add(page, "agent", "answer")
    await field(form, "name").fill("Support Agent")
    await field(form, "system").fill(
        "You are a customer support assistant for {{vars.company}}. Base your answer on "
        "the context from the knowledge base; answer briefly and specifically.")
    await field(form, "prompt").fill(
        "User Query: {{input.query}}\nKnowledge Base Context:\n{{search.context}}")

    # the quality check: three metrics, item by item
    form = await add(page, "evaluator", "grade")
    await field(form, "content").fill(
        "Sources: {{search.context}}\nCustomer question: {{input.query}}\n"
        "Support answer: {{answer.content}}")
    metrics = (("Accuracy", "The answer agrees with the sources"),
               ("Completeness", "The answer addresses the whole question"),
               ("Clarity", "The answer is clear and easy to follow"))
    for index, (name, about) in enumerate(metrics, 1):
        await form.get_by_role("button", name="Add to metrics").click()
        metric = form.get_by_role("group", name=f"metrics {index}", exact=True)
        await field(metric, "name").fill(name)
        await field(metric, "description").fill(about)
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await shot(page, "proof-01-metrics")
    await axe_at_both_widths(page)

    # the router and its two responses: one edge dragged, one chosen in "Runs after"
    form = await add(page, "router", "triage")
    await field(form, "prompt").fill(
        "Choose Standard Response when accuracy, completeness and clarity are all 7 or more; "
        "otherwise choose Needs Review. Accuracy: {{grade.accuracy}}, completeness: "
        "{{grade.completeness}}, clarity: {{grade.clarity}}.")
    form = await add(page, "response", "standard")
    await field(form, "name").fill("Standard Response")
    await field(form, "message").fill("{{answer.content}}")
    await close_panel(page, "standard")
    await drag(page, node(page, "triage").locator(".react-flow__handle.source"),
               node(page, "standard").locator(".react-flow__handle.target"))
    await wait_for_text(page, "after: [triage]")
    form = await add(page, "response", "review")
    await field(form, "name").fill("Needs Review")
    await field(form, "message").fill(
        "Thanks for your patience - a member of our team will check your question and reply shortly.")
    await form.get_by_role("group", name="Runs after").get_by_label("triage").check()

    # a loop, twice, after the answer: its two children added with it selected
    form = await add(page, "loop", "refine")
    await commit(field(form, "times"), "2")
    await form.get_by_role("group", name="Runs after").get_by_label("answer").check()
    form = await add(page, "agent", "polish")
    await field(form, "system").fill("You are a customer support assistant: tighten the draft.")
    await field(form, "prompt").fill("{{answer.content}}")
    await select(page, "refine")
    form = await add(page, "progress", "tick")
    await commit(field(form, "percent"), "60")
    await field(form, "message").fill("Polished, pass {{loop.index}}")
    await form.get_by_role("group", name="Runs after").get_by_label("polish").check()
    await close_panel(page, "tick")

    # a condition on the accuracy, its two branches joined by a later block
    form = await add(page, "condition", "gate")
    await form.get_by_role("group", name="Runs after").get_by_label("grade").check()
    form = await add(page, "template", "confident")
    await field(form, "template").fill("The answer scored well.")
    form = await add(page, "template", "cautious")
    await field(form, "template").fill("The answer needs a second look.")
    form = await select(page, "gate")
    await form.get_by_role("button", name="Add to cases").click()
    case = form.get_by_role("group", name="cases 1", exact=True)
    await field(case, "when").fill("grade.accuracy >= 8")
    await field(case, "goto").fill("confident")
    await field(form, "default").fill("cautious")
    await close_panel(page, "gate")
    form = await add(page, "progress", "wrapup")
    await commit(field(form, "percent"), "100")
    await field(form, "message").fill("Checked and routed")
    runs_after = form.get_by_role("group", name="Runs after")
    await runs_after.get_by_label("confident").check()
    await runs_after.get_by_label("cautious").check()
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await shot(page, "proof-02-built")

    # what was built is the workflow meant, written as a person writes it
    document = yaml.safe_load(await editor_text(page))
    blocks = {b["id"]: b for b in document["blocks"]}
    assert list(blocks) == ["search", "cite", "answer", "grade", "triage", "standard", "review",
                            "refine", "gate", "confident", "cautious", "wrapup"]
    assert [b["id"] for b in blocks["cite"]["blocks"]] == ["source"]
    assert [b["id"] for b in blocks["refine"]["blocks"]] == ["polish", "tick"]
    assert blocks["search"]["with"]["sources"] == ["policies"]
    assert blocks["search"]["with"]["filters"] == {"category": ["policies", "legal"]}
    assert [m["name"] for m in blocks["grade"]["with"]["metrics"]] == \
        ["Accuracy", "Completeness", "Clarity"]
    assert blocks["gate"]["with"] == {"cases": [{"when": "grade.accuracy >= 8",
                                                 "goto": "confident"}], "default": "cautious"}
    assert blocks["wrapup"]["after"] == ["confident", "cautious"]
    assert document["inputs"] == {"query": {"type": "string"}}
    assert document["variables"] == {"company": "Acme Outfitters"}
    assert "```" not in await editor_text(page)

    await page.get_by_role("button", name="Save the new workflow").click()
    await page.wait_for_url("**/workflows/desk")
    await expect(page.get_by_label("Version shown")).to_have_text("version 1")
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await shot(page, "proof-03-saved")
    await axe_at_both_widths(page)
    async with web.client("alice") as alice:
        source = (await alice.get("/api/workflows/desk")).json()["source"]
        checked = (await alice.post("/api/validate", content=source, headers=YAML)).json()
    assert checked["valid"] is True and checked["problems"] == [], checked

    # it runs on the scripted model: every block as the routes say
    await page.get_by_role("link", name="Run...").click()
    await page.get_by_label(re.compile("^query")).fill(QUESTION)
    await page.get_by_role("button", name="Start the run").click()
    await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]+$"))
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for(timeout=60_000)
    expected = {"search": "succeeded", "cite": "succeeded", "answer": "succeeded",
                "grade": "succeeded", "triage": "succeeded", "standard": "succeeded",
                "review": "skipped", "refine": "succeeded", "gate": "succeeded",
                "confident": "succeeded", "cautious": "skipped", "wrapup": "succeeded"}
    for block, state in expected.items():
        await page.locator(f"[data-block-id={block}][data-state={state}]").wait_for()
    await shot(page, "proof-04-run")
    run_id = page.url.rsplit("/", 1)[1]
    async with web.client("alice") as alice:
        run = (await alice.get(f"/api/runs/{run_id}")).json()
    assert run["status"] == "succeeded"
    assert {b: run["blocks"][b]["status"] for b in expected} == expected
    assert "30 days" in run["outputs"]["standard"]["message"]
    assert run["blocks"]["refine"]["output"]["count"] == 2
    found = len(run["blocks"]["search"]["output"]["results"])
    assert found >= 1 and len(run["blocks"]["cite"]["output"]["results"]) == found
    passes: dict[str, list[str]] = {}
    for child in run["scoped_blocks"]:
        passes.setdefault(child["block_id"], []).append(child["status"])
    assert passes == {"polish": ["succeeded"] * 2, "tick": ["succeeded"] * 2,
                      "source": ["succeeded"] * found}, run["scoped_blocks"]


LISTS = """\
version: 1
id: lists
blocks:
  - id: search
    type: knowledge
    with: {knowledge_base: policies, query: refunds}
  - id: grade
    type: evaluator
    with:
      content: "{{search.context}}"
      metrics:
        - {name: Accuracy, range: [0, 5]}
"""


async def test_list_fields_are_edited_item_by_item_and_one_text_per_line(web, page):
    """The editor defect the proof found: a condition's cases, an evaluator's
    metrics and a knowledge block's sources could only be typed as YAML."""
    async with web.client("alice") as alice:
        saved = await alice.put("/api/workflows/lists", content=LISTS, headers=YAML)
        assert saved.status_code == 201, saved.text
    await sign_in(page, web, at="/workflows/lists")
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 2")

    # a list of texts: one per line, blank lines dropped; emptied, the field goes
    form = await select(page, "search")
    await commit(field(form, "sources"), "policies\n\n  legal ")
    await wait_for_text(page, "sources: [policies, legal]")
    await commit(field(form, "sources"), "")
    await page.wait_for_function(
        "() => ![...document.querySelectorAll('.cm-content .cm-line')]"
        ".some(l => l.textContent.includes('sources'))")

    # a list of objects: each item its fields, added and removed with buttons
    form = await select(page, "grade")
    first = form.get_by_role("group", name="metrics 1", exact=True)
    await expect(field(first, "name")).to_have_value("Accuracy")
    await expect(field(first, "range")).to_have_value("- 0\n- 5")
    await form.get_by_role("button", name="Add to metrics").click()
    second = form.get_by_role("group", name="metrics 2", exact=True)
    name = field(second, "name")
    await expect(name).to_have_attribute("aria-invalid", "true")      # empty: said under it
    await name.click()
    await page.keyboard.type("Clarity")                               # the focus stays
    await expect(name).to_have_value("Clarity")
    await expect(name).to_be_focused()
    await wait_for_text(page, "name: Clarity")
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await form.get_by_role("button", name="Remove metrics 1").click()
    await expect(field(form.get_by_role("group", name="metrics 1", exact=True), "name")) \
        .to_have_value("Clarity")
    text = await editor_text(page)
    assert yaml.safe_load(text)["blocks"][1]["with"]["metrics"] == [{"name": "Clarity"}]
    await form.get_by_role("button", name="Remove metrics 1").click()
    await page.wait_for_function(
        "() => ![...document.querySelectorAll('.cm-content .cm-line')]"
        ".some(l => l.textContent.includes('metrics'))")
    # the evaluator needs a metric: the document is no longer valid
    await expect(page.get_by_text("No problems: the document is valid.")).to_have_count(0)
    await shot(page, "proof-05-lists")
