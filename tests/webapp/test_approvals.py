"""Approvals in the browser: a run started from the run form stops `waiting`
at its approval block (marked on the graph, `waiting` in the history); the
block's panel shows the message and data with Approve / Reject and a comment;
the decision resumes the run in the server process and the live view follows
it to its end, the decision (who, comment) in the block's panel.  A rejection
routes to `on_reject`."""

from __future__ import annotations

import re

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_accessibility import serious_violations

REFUND = {"id": "refund", "name": "Refund", "blocks": [
    {"id": "quote", "type": "set", "with": {"total": 120}},
    {"id": "manager", "type": "approval", "after": ["quote"],
     "with": {"message": "Refund {{quote.total}} EUR?",
              "data": {"total": "{{quote.total}}", "customer": "C-42"},
              "on_reject": "refused"}},
    {"id": "paid", "type": "response", "after": ["manager"],
     "with": {"message": "Refunded {{quote.total}} EUR"}},
    {"id": "refused", "type": "response", "after": ["manager"],
     "with": {"message": "Refund refused"}},
]}


async def start_and_wait(page, web) -> str:
    """Sign in on the refund workflow's run form, start a run and wait for it
    at the manager's approval; the run's id."""
    await sign_in(page, web, at="/workflows/refund/run")
    await page.get_by_role("button", name="Start the run").click()
    await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]+$"))
    await page.locator("[aria-label='Run status'] .status-waiting").wait_for()
    await page.locator("[data-block-id=manager][data-state=waiting]").wait_for()
    return page.url.rsplit("/", 1)[1]


async def test_approve_from_the_run_view_and_follow_the_run_to_its_end(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", json=REFUND)
        assert saved.status_code == 201, saved.text
    run_id = await start_and_wait(page, web)
    assert await page.locator("[data-block-id=quote]").get_attribute("data-state") == "succeeded"
    assert await page.locator("[data-block-id=paid]").get_attribute("data-state") == "pending"

    # the waiting approval opens by itself: what is asked, and the data
    panel = page.get_by_role("complementary", name="Block manager")
    approval = panel.get_by_role("region", name="Approval")
    await approval.get_by_text("Refund 120 EUR?").wait_for()
    data = await approval.get_by_label("Data to decide on").text_content()
    assert '"customer": "C-42"' in data and '"total": 120' in data
    assert await serious_violations(page) == []
    await shot(page, "30-approval-waiting")

    # the history shows it waiting, and filters by it
    await page.goto(web.url + "/runs?status=waiting")
    row = page.locator("tbody tr", has_text="refund")
    await row.locator(".status-waiting").wait_for()
    await shot(page, "31-history-waiting")
    await page.goto(web.url + f"/runs/{run_id}")

    approval = page.get_by_role("region", name="Approval")
    await approval.get_by_label("Comment (optional)").fill("within policy")
    await approval.get_by_role("button", name="Approve").click()
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for()
    await page.locator("[data-block-id=paid][data-state=succeeded]").wait_for()
    assert await page.locator("[data-block-id=refused]").get_attribute("data-state") == "skipped"
    decision = page.get_by_label("Decision")
    await decision.get_by_text("by alice").wait_for()
    assert "approved" in await decision.text_content()
    assert "within policy" in await decision.text_content()
    assert await approval.get_by_role("button", name="Approve").count() == 0
    await shot(page, "32-approval-approved")

    async with web.client("alice") as alice:
        run = (await alice.get(f"/api/runs/{run_id}")).json()
    assert run["status"] == "succeeded"
    assert run["blocks"]["manager"]["output"]["by"] == "alice"
    assert run["blocks"]["manager"]["output"]["comment"] == "within policy"

    # a reload replays both stops (waiting, then succeeded) and lands on the end
    await page.reload()
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for()
    await page.locator("[data-block-id=paid][data-state=succeeded]").wait_for()


async def test_a_rejection_routes_to_on_reject(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", json=REFUND)
        assert saved.status_code == 201, saved.text
    run_id = await start_and_wait(page, web)
    approval = page.get_by_role("region", name="Approval")
    await approval.get_by_label("Comment (optional)").fill("not covered")
    await approval.get_by_role("button", name="Reject").click()
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for()
    await page.locator("[data-block-id=refused][data-state=succeeded]").wait_for()
    assert await page.locator("[data-block-id=paid]").get_attribute("data-state") == "skipped"
    decision = page.get_by_label("Decision")
    assert "rejected" in await decision.text_content()
    assert "not covered" in await decision.text_content()
    await shot(page, "33-approval-rejected")
    async with web.client("alice") as alice:
        run = (await alice.get(f"/api/runs/{run_id}")).json()
    assert run["blocks"]["manager"]["output"]["decision"] == "reject"
    assert run["blocks"]["refused"]["output"]["message"] == "Refund refused"
    assert run["blocks"]["paid"]["status"] == "skipped"


async def test_cancel_a_waiting_run_from_the_run_view(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", json=REFUND)
        assert saved.status_code == 201, saved.text
    run_id = await start_and_wait(page, web)
    # the run's event that holds `paid` back comes after the one that `manager` waits
    await page.locator("[data-block-id=paid][title='pending: after manager']").wait_for()
    await page.get_by_role("button", name="Cancel the run").click()
    await page.locator("[aria-label='Run status'] .status-cancelled").wait_for()
    await page.locator("[data-block-id=manager][data-state=cancelled]").wait_for()
    assert await page.get_by_role("button", name="Approve").count() == 0
    async with web.client("alice") as alice:
        assert (await alice.get(f"/api/runs/{run_id}")).json()["status"] == "cancelled"


async def test_a_decision_made_elsewhere_shows_up_live(web, page):
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", json=REFUND)
        assert saved.status_code == 201, saved.text
    run_id = await start_and_wait(page, web)
    async with web.client("alice") as alice:          # the CLI, another tab...
        decided = await alice.post(f"/api/runs/{run_id}/approvals/manager",
                                   json={"decision": "approve", "comment": "from the API"})
        assert decided.status_code == 202, decided.text
    await page.locator("[aria-label='Run status'] .status-succeeded").wait_for()
    await page.locator("[data-block-id=paid][data-state=succeeded]").wait_for()
    await page.get_by_label("Decision").get_by_text("from the API").wait_for()


async def test_a_deadline_reads_as_one_and_a_cancel_leaves_no_block_pending(web, page):
    timed = {**REFUND, "blocks": [
        {"id": "quote", "type": "set", "with": {"total": 300.0}},
        {**REFUND["blocks"][1], "with": {**REFUND["blocks"][1]["with"],
                                         "timeout": 3600, "default": "reject"}},
        *REFUND["blocks"][2:]]}
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", json=timed)
        assert saved.status_code == 201, saved.text
    run_id = await start_and_wait(page, web)
    approval = page.get_by_role("complementary", name="Block manager").get_by_role(
        "region", name="Approval")
    await approval.get_by_text("Refund 300 EUR?", exact=True).wait_for()
    deadline = await approval.locator(".deadline").text_content()
    assert deadline.startswith("If nobody decides by ") and "rejected by default" in deadline
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", deadline), deadline      # no raw ISO time
    assert await approval.get_by_text(re.compile("decided by default", re.I)).count() == 0
    assert await page.get_by_label("Decision").count() == 0
    await shot(page, "53-approval-deadline")

    await page.get_by_role("button", name="Cancel the run").click()
    await page.locator("[aria-label='Run status'] .status-cancelled").wait_for()
    async with web.client("alice") as alice:
        run = (await alice.get(f"/api/runs/{run_id}")).json()
    for block in ("paid", "refused"):        # held behind the approval: cancelled with it
        assert run["blocks"][block]["status"] == "cancelled", run["blocks"][block]
        await page.locator(f"[data-block-id={block}][data-state=cancelled]").wait_for()
    assert await page.locator("[data-block-id][data-state=pending]").count() == 0
    await page.reload()                    # the same from the stored events alone
    await page.locator("[aria-label='Run status'] .status-cancelled").wait_for()
    for block in ("paid", "refused"):
        await page.locator(f"[data-block-id={block}][data-state=cancelled]").wait_for()


async def test_a_run_waiting_beside_a_failed_branch_says_so_and_can_still_be_decided(web, page):
    """The run stays `waiting` for its approval; the history marks it, since it
    will end failed once the approval is decided."""
    doc = {"id": "lookup-refund", "blocks": [
        {"id": "lookup", "type": "set", "with": {"v": {"expr": "1 / 0"}}},
        {"id": "manager", "type": "approval", "with": {"message": "Refund?"}},
        {"id": "paid", "type": "response", "after": ["manager"], "with": {"message": "paid"}}]}
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", json=doc)
        assert saved.status_code == 201, saved.text
        started = await alice.post("/api/workflows/lookup-refund/runs?wait=true", json={})
        run_id = started.json()["run_id"]
        assert started.json()["status"] == "waiting", started.text
    await sign_in(page, web, at="/runs?status=waiting")
    row = page.locator("tbody tr", has_text="lookup-refund")
    await row.locator(".status-waiting").wait_for()
    marked = row.locator(".branch-failed")
    assert (await marked.text_content()).strip() == "a branch failed"
    assert "division by zero" in await marked.get_attribute("title")

    await page.goto(web.url + f"/runs/{run_id}")
    await page.get_by_text("lookup: ExpressionError").first.wait_for()
    await page.get_by_role("region", name="Approval").get_by_role("button", name="Approve").click()
    await page.locator("[aria-label='Run status'] .status-failed").wait_for()
    await page.locator("[data-block-id=paid][data-state=succeeded]").wait_for()
