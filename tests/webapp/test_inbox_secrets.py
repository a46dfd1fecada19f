"""The approvals inbox and the secrets page, reached from the menu: the inbox
lists the approvals that wait for this user's decision (not another user's)
and decides them with the run view's route; the secrets page lists names
only, adds and deletes, and never shows a value back."""

from __future__ import annotations

from tests.webapp.conftest import shot, sign_in
from tests.webapp.test_approvals import REFUND
from tests.webapp.test_run_view import axe_at_both_widths


async def start_waiting(client) -> str:
    started = await client.post("/api/workflows/refund/runs?wait=true", json={})
    assert started.json()["status"] == "waiting", started.text
    return started.json()["run_id"]


async def test_the_inbox_lists_and_decides_the_approvals_waiting_for_me(web, page):
    async with web.client("alice") as alice, web.client("bob") as bob:
        for who in (alice, bob):
            assert (await who.post("/api/workflows", json=REFUND)).status_code == 201
        first, second = await start_waiting(alice), await start_waiting(alice)
        bobs = await start_waiting(bob)
    await sign_in(page, web)
    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Approvals").click()
    await page.get_by_role("heading", name="Approvals", exact=True).wait_for()
    items = page.get_by_role("article")
    await items.first.wait_for()
    assert await items.count() == 2                         # bob's run is not alice's to decide
    assert await page.locator(f"a[href='/runs/{bobs}']").count() == 0

    def approval_of(run: str):                 # the one whose link opens that run
        return items.filter(has=page.get_by_role("link", name=f"run {run[:12]}")).filter(
            has=page.locator(f"a[href='/runs/{run}']"))
    one, other = approval_of(first), approval_of(second)
    assert await one.get_attribute("aria-label") == f"Approval manager of refund (run {first[:12]})"
    await one.get_by_role("heading", name="Refund 120 EUR?").wait_for()
    assert '"customer": "C-42"' in await one.get_by_label("Data to decide on", exact=False).text_content()
    await axe_at_both_widths(page, "the approvals inbox")
    await shot(page, "61-approvals-inbox")

    await one.get_by_label("Comment (optional)").fill("within policy")
    await one.get_by_role("button", name="Approve").click()
    await page.get_by_role("status").get_by_text("Approved manager of refund").wait_for()
    await other.get_by_role("button", name="Reject").click()
    await page.get_by_text("No approvals wait for you.").wait_for()
    await shot(page, "62-approvals-inbox-empty")
    async with web.client("alice") as alice:
        ran = [(await alice.get(f"/api/runs/{run}?wait=true")).json() for run in (first, second)]
        for _ in range(50):
            if all(r["status"] == "succeeded" for r in ran):
                break
            ran = [(await alice.get(f"/api/runs/{run}")).json() for run in (first, second)]
    assert [r["status"] for r in ran] == ["succeeded", "succeeded"]
    assert ran[0]["blocks"]["manager"]["output"]["comment"] == "within policy"
    assert ran[0]["blocks"]["paid"]["status"] == "succeeded"
    assert ran[1]["blocks"]["manager"]["output"]["decision"] == "reject"
    assert ran[1]["blocks"]["refused"]["status"] == "succeeded"
    # the run link opens the run view of the run decided there
    await page.reload()
    await page.get_by_text("No approvals wait for you.").wait_for()


async def test_secrets_are_listed_by_name_added_and_deleted_never_shown(web, page):
    await sign_in(page, web)
    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Secrets").click()
    await page.get_by_role("heading", name="Secrets", exact=True).wait_for()
    await page.get_by_text("You have no secrets yet.").wait_for()
    await axe_at_both_widths(page, "the secrets page, empty")

    name, value = page.get_by_label("Name"), page.get_by_label("Value")
    save = page.get_by_role("button", name="Save the secret")
    await name.fill("9LIVES")
    await value.fill("whatever")
    await page.get_by_text("Use letters, digits and _").wait_for()
    assert await save.is_disabled()
    await name.fill("OPENAI_API_KEY")
    await value.fill("sk-test-very-secret")
    assert await value.get_attribute("type") == "password"
    await save.click()
    await page.get_by_role("status").get_by_text("Saved OPENAI_API_KEY.").wait_for()
    table = page.get_by_role("region", name="Your secrets")
    await table.get_by_role("cell", name="OPENAI_API_KEY", exact=True).wait_for()
    assert await value.input_value() == ""
    assert "sk-test-very-secret" not in await page.content()
    await name.fill("SEARCH_TOKEN")
    await value.fill("t0ken")
    await save.click()
    await table.get_by_role("cell", name="SEARCH_TOKEN", exact=True).wait_for()
    await axe_at_both_widths(page, "the secrets page")
    await shot(page, "63-secrets")
    async with web.client("alice") as alice:
        listed = (await alice.get("/api/secrets")).json()["secrets"]
    assert [s["name"] for s in listed] == ["OPENAI_API_KEY", "SEARCH_TOKEN"]

    await table.get_by_role("button", name="Delete OPENAI_API_KEY").click()
    await table.get_by_role("button", name="Yes, delete OPENAI_API_KEY").click()
    await page.get_by_role("status").get_by_text("Deleted OPENAI_API_KEY.").wait_for()
    await table.get_by_role("cell", name="OPENAI_API_KEY", exact=True).wait_for(state="detached")
    async with web.client("alice") as alice:
        listed = (await alice.get("/api/secrets")).json()["secrets"]
    assert [s["name"] for s in listed] == ["SEARCH_TOKEN"]


async def test_the_menu_links_to_the_manual(web, page):
    await sign_in(page, web)
    manual = page.get_by_role("navigation", name="Main").get_by_role("link", name="Manual")
    assert await manual.get_attribute("href") == "/manual/"
    await manual.click()
    await page.wait_for_url("**/manual/")
    # the manual's front page, or (no `make docs` run here) the page saying how to build it
    assert "flowforge" in (await page.title()).lower()
