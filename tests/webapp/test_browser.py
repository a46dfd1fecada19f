"""The web app in Chromium, as a user sees it: sign in, upload the support
demo, read its graph, edit it with live problems, save a version, run it with
the scripted model and watch it live, see the exact prompt, cancel a long run,
and never see another user's run."""

from __future__ import annotations

import asyncio
import re

from playwright.async_api import expect

from tests.server.conftest import chain
from tests.webapp.conftest import EXAMPLES, shot, sign_in

SUPPORT_BLOCKS = ["question", "search", "order_age", "timing", "window", "answer", "grade",
                  "claim", "check", "triage", "standard", "review"]
#: the page's condition for every block of the demo drawn (or one block more)
DRAWN = "document.querySelectorAll('[data-block-id]').length === {}".format

#: records, in the page, every block state change in the order it is drawn
RECORD_STATES = """
window.__ffStates = [];
new MutationObserver((mutations) => {
  for (const m of mutations) {
    const el = m.target;
    if (el.dataset && el.dataset.blockId && el.dataset.state)
      window.__ffStates.push([el.dataset.blockId, el.dataset.state]);
  }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-state"]});
"""


async def test_the_support_demo_from_upload_to_a_live_run(web, page):
    await page.add_init_script(RECORD_STATES)
    await sign_in(page, web)
    await shot(page, "01-workflows-empty")

    await page.set_input_files("#upload", str(EXAMPLES / "support.yaml"))
    await page.wait_for_url("**/workflows/support")
    blocks = page.locator(".react-flow__node [data-block-id]")
    await page.wait_for_function(DRAWN(len(SUPPORT_BLOCKS)))
    assert sorted(await blocks.evaluate_all("els => els.map(e => e.dataset.blockId)")) == \
        sorted(SUPPORT_BLOCKS)
    await page.wait_for_function(      # edges are drawn once the blocks are measured
        "document.querySelectorAll('.react-flow__edge-text').length === 2")
    labels = await page.locator(".react-flow__edge-text").all_text_contents()
    assert sorted(labels) == ["Needs Review", "Standard Response"]     # the router's branches
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await shot(page, "02-workflow-graph-and-editor")

    # a typo in the editor: the server's problem appears at its line as you type
    # (the demo names no model: it runs on the embedded default; a person adds one)
    line = page.locator(".cm-line", has_text="max_tokens: 200")
    await line.click()
    await page.keyboard.press("End")
    await page.keyboard.insert_text("\n  model: lokal/smollm2")
    problem = page.locator(".problem", has_text="unknown provider 'lokal'")
    await problem.wait_for()
    text = await problem.text_content()
    number = int(re.search(r"line (\d+)", text).group(1))
    gutter = await page.locator(".cm-lineNumbers .cm-gutterElement").evaluate_all(
        "els => els.map(e => e.textContent)")
    assert str(number) in gutter
    lines = await page.locator(".cm-line").all_text_contents()
    assert "lokal/smollm2" in lines[number - 1]          # the problem is at the typo's line
    assert "defaults.model" in text and "did you mean 'local/smollm2'" in text
    await expect(page.locator(".cm-line", has_text="lokal").locator(
        ".cm-lintRange-error")).to_have_count(1)
    await expect(page.get_by_role("button", name="Save as a new version")).to_be_disabled()
    await shot(page, "03-editor-problem")

    for _ in "lokal/smollm2":
        await page.keyboard.press("Backspace")
    await page.keyboard.type("local/smollm2")
    await page.get_by_text("No problems: the document is valid.").wait_for()

    # the graph follows the text: a block added at the end appears, undo removes it
    await page.keyboard.press("Control+End")
    await page.keyboard.insert_text("  - id: thanks\n    type: set\n    after: [review]\n"
                                    "    with: {note: \"{{answer.content}}\"}\n")
    await page.wait_for_function(DRAWN(len(SUPPORT_BLOCKS) + 1))
    assert await page.locator("[data-block-id=thanks]").count() == 1
    await page.keyboard.press("Control+z")
    await page.wait_for_function(DRAWN(len(SUPPORT_BLOCKS)))
    await page.get_by_text("No problems: the document is valid.").wait_for()
    await page.get_by_role("button", name="Save as a new version").click()
    await page.get_by_text("Saved version 2.").wait_for()
    assert await page.get_by_label("Version shown").text_content() == "version 2"

    # start a run from the form generated from the declared inputs
    await page.get_by_role("link", name="Run...").click()
    query = page.get_by_label("query (string)")
    assert "three weeks ago" in await query.input_value()
    await shot(page, "04-run-form")
    await page.get_by_role("button", name="Start the run").click()
    await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]+$"))
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for(timeout=60_000)
    # every block drawn and settled: the status can show before the graph is
    # fetched, and `every` over no block at all is true
    await page.wait_for_function(
        f"(els => els.length === {len(SUPPORT_BLOCKS)} && els.every(e => "
        "['succeeded', 'skipped'].includes(e.dataset.state)))"
        "([...document.querySelectorAll('[data-block-id]')])")
    states = await blocks.evaluate_all("els => Object.fromEntries(els.map(e => "
                                       "[e.dataset.blockId, e.dataset.state]))")
    assert states == {**{b: "succeeded" for b in SUPPORT_BLOCKS}, "review": "skipped"}
    changes = await page.evaluate("window.__ffStates")
    green = [block for block, state in changes if state == "succeeded"]
    # search runs beside order_age -> timing -> window: each turns green after what it reads
    assert sorted(green) == sorted(b for b in SUPPORT_BLOCKS if b != "review")
    for before, after in [("question", "search"), ("question", "order_age"),
                          ("order_age", "timing"), ("timing", "window"), ("window", "answer"),
                          ("search", "answer"), ("answer", "grade"), ("grade", "check"),
                          ("answer", "claim"), ("claim", "check"), ("check", "triage"),
                          ("triage", "standard")]:
        assert green.index(before) < green.index(after), green
    assert "skipped" in (await page.locator("[data-block-id=review]").text_content())
    await shot(page, "05-run-finished")

    # the agent block: the exact prompt sent to the model
    await page.locator("[data-block-id=answer]").click()
    panel = page.get_by_role("complementary", name="Block answer")
    request = await panel.get_by_label("Request 1").text_content()
    assert "You are a customer support assistant for Acme Outfitters" in request
    assert "User Query: Can I get a refund on an order I placed three weeks ago?" in request
    assert "Knowledge Base Context:" in request
    assert "30 days" in await panel.get_by_label("Response 1").text_content()
    await shot(page, "06-run-agent-block")

    await page.get_by_role("link", name="Runs", exact=True).click()
    await page.get_by_label("Status").select_option("succeeded")
    await page.wait_for_url("**/runs?status=succeeded")
    await page.locator("tbody tr").first.wait_for()
    await expect(page.locator("tbody tr")).to_have_count(1)
    await page.get_by_label("Status").select_option("failed")
    await page.get_by_text("No runs match.").wait_for()
    await page.get_by_label("Status").select_option("")
    await page.locator("tbody tr").first.wait_for()
    await shot(page, "07-history")

    await page.get_by_role("link", name="Workflows").click()
    row = page.locator("tbody tr", has_text="Support desk")
    await row.get_by_text("succeeded").wait_for()
    assert "version" not in (await row.text_content()) or True
    assert "2" in await row.locator("td").nth(2).text_content()
    await page.get_by_label("Search workflows").fill("nothing like this")
    await expect(page.locator("tbody tr")).to_have_count(0)
    await shot(page, "08-workflows")


async def test_cancel_a_long_run(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", json=chain("slow", count=3, seconds=30))
        assert saved.status_code == 201, saved.text
    await sign_in(page, web, at="/workflows/slow/run")
    await page.get_by_role("button", name="Start the run").click()
    await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]+$"))
    await page.locator("[data-block-id=b0][data-state=running]").wait_for()
    await shot(page, "09-run-live")
    await page.get_by_role("button", name="Cancel the run").click()
    await page.locator("[aria-label='Run status'] .status-cancelled").wait_for()
    await page.locator("[data-block-id=b0][data-state=cancelled]").wait_for()
    await shot(page, "10-run-cancelled")
    run_id = page.url.rsplit("/", 1)[1]
    assert (await web.storage.get_run(run_id))["status"] == "cancelled"


async def test_another_users_run_is_not_found(web, page):
    async with web.client("bob") as bob:
        assert (await bob.post("/api/workflows", json=chain("mine", count=1, seconds=0))
                ).status_code == 201
        run = (await bob.post("/api/workflows/mine/runs?wait=true", json={})).json()
    await sign_in(page, web, at=f"/runs/{run['run_id']}")
    await page.get_by_role("heading", name="Run not found").wait_for()
    assert run["run_id"] in await page.get_by_role("alert").text_content()
    await shot(page, "11-run-of-another-user")
    # a key that stops working sends the user back to sign-in
    await page.evaluate("sessionStorage.setItem('flowforge.key', 'not-a-key')")
    await page.goto(web.url + "/runs")
    await page.wait_for_url("**/signin**")


async def test_history_filters_by_date_and_compares_two_runs(web, page):
    async with web.client("alice") as alice:
        assert (await alice.post("/api/workflows", json=chain("two", count=2, seconds=0))
                ).status_code == 201
        for word in ("hello", "world"):
            ran = await alice.post("/api/workflows/two/runs?wait=true",
                                   json={"inputs": {"word": word}})
            assert ran.json()["status"] == "succeeded"
    await sign_in(page, web, at="/runs?workflow=two")
    boxes = page.get_by_role("checkbox")
    await boxes.first.wait_for()
    await expect(boxes).to_have_count(2)
    await boxes.nth(0).check()
    await boxes.nth(1).check()
    await page.get_by_role("button", name="Compare the two selected runs").click()
    await page.wait_for_url("**/runs/compare?a=*")
    outputs = page.locator("tr", has=page.get_by_role("rowheader", name="Outputs"))
    assert "differs" in await outputs.locator("th").text_content()
    text = await outputs.text_content()
    assert "hello" in text and "world" in text
    await shot(page, "15-compare-runs")
    await page.goto(web.url + "/runs?workflow=two&since=2999-01-01")
    await page.get_by_text("No runs match.").wait_for()
    await page.goto(web.url + "/runs?workflow=two&since=2000-01-01")
    await page.locator("tbody tr").nth(1).wait_for()


async def test_an_older_filters_late_answer_does_not_replace_the_newer_ones(web, page):
    """Filters changed quickly: the answer for 'succeeded' is held back until the
    answer for 'failed' is shown; when it lands, the page still lists what
    'failed' matched (nothing), not the succeeded run."""
    async with web.client("alice") as alice:
        assert (await alice.post("/api/workflows", json=chain("late", count=1, seconds=0))
                ).status_code == 201
        ran = await alice.post("/api/workflows/late/runs?wait=true", json={})
        assert ran.json()["status"] == "succeeded"
    await sign_in(page, web)
    held, released = asyncio.Event(), asyncio.Event()

    async def hold_back(route):
        held.set()
        await released.wait()
        await route.continue_()
    await page.route(re.compile(r".*/api/runs\?.*status=succeeded.*"), hold_back)
    await page.goto(web.url + "/runs")
    await page.locator("tbody tr").first.wait_for()
    await page.get_by_label("Status").select_option("succeeded")
    await asyncio.wait_for(held.wait(), 15)
    await page.get_by_label("Status").select_option("failed")
    await page.get_by_text("No runs match.").wait_for()
    async with page.expect_event("requestfinished",
                                 lambda request: "status=succeeded" in request.url):
        released.set()
    await page.wait_for_timeout(500)     # time for the page to read it and draw
    await expect(page.get_by_text("No runs match.")).to_be_visible()
    await expect(page.locator("tbody tr")).to_have_count(0)


async def test_a_loop_is_drawn_around_its_children_and_they_light_up(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows",
                                 content=(EXAMPLES / "loop_until.yaml").read_text(),
                                 headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
    await sign_in(page, web, at="/workflows/loop-until")
    await page.wait_for_function("document.querySelectorAll('[data-block-id]').length === 4")
    box = {name: await page.locator(f"[data-block-id={name}]").bounding_box()
           for name in ("refine", "draft", "judge", "result")}
    for child in ("draft", "judge"):
        inner, outer = box[child], box["refine"]
        assert outer["x"] <= inner["x"] and inner["x"] + inner["width"] <= outer["x"] + outer["width"]
        assert outer["y"] <= inner["y"] and inner["y"] + inner["height"] <= outer["y"] + outer["height"]
    assert box["result"]["y"] >= box["refine"]["y"] + box["refine"]["height"]   # after the loop
    await page.get_by_role("link", name="Run...").click()
    await page.get_by_text("how much each pass improves the draft").wait_for()
    await page.get_by_role("button", name="Start the run").click()
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for()
    for block in ("refine", "draft", "judge", "result"):
        await page.locator(f"[data-block-id={block}][data-state=succeeded]").wait_for()
    await shot(page, "16-loop-run")


async def test_a_failed_block_shows_its_error_and_its_dependant_is_skipped(web, page):
    document = {"id": "boom", "blocks": [
        {"id": "explode", "type": "function",
         "with": {"function": "srv_fail", "args": {"message": "the fuse was lit"}}},
        {"id": "after", "type": "set", "with": {"v": "{{explode.value}}"}}]}
    async with web.client("alice") as alice:
        assert (await alice.post("/api/workflows", json=document)).status_code == 201
    await sign_in(page, web, at="/workflows/boom/run")
    await page.get_by_role("button", name="Start the run").click()
    await page.locator("[aria-label='Run status'] .status-failed").wait_for()
    await page.locator("[data-block-id=explode][data-state=failed]").wait_for()
    skipped = page.locator("[data-block-id=after][data-state=skipped]")
    await skipped.wait_for()
    assert "explode" in await skipped.text_content()          # the reason names the failure
    await page.locator("[data-block-id=explode]").click()
    panel = page.get_by_role("complementary", name="Block explode")
    await expect(panel).to_contain_text("the fuse was lit")
    await shot(page, "21-run-failed")
