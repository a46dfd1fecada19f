"""Every page on a phone (390 px wide) and on a desktop: nothing scrolls
sideways, the navigation stays inside the dark header, axe-core reports no
serious or critical violation, and no request leaves the server's origin
(the API's own page, /docs, included)."""

from __future__ import annotations

import pytest_asyncio

from tests.webapp.conftest import SESSION_LOOP, EXAMPLES, shot, sign_in
from tests.webapp.test_accessibility import serious_violations

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1500, "height": 1000}

#: (path, what shows once the page has loaded); `{run}` is a finished run's id
PAGES = [
    ("/", "tbody tr"),
    ("/workflows/support", "[data-block-id]"),
    ("/workflows/support/run", "form"),
    ("/runs/{run}", "[aria-label='Run status'] .status-succeeded"),
    ("/runs", "tbody tr"),
    ("/chat", "#question"),
    ("/knowledge", "tbody tr"),
    ("/knowledge/notes", "tbody tr"),
    ("/research", "#research-question"),
    ("/apps/rag-chat", "[data-block-id]"),
]


@pytest_asyncio.fixture(loop_scope=SESSION_LOOP)
async def filled(web):
    """alice's support workflow with a finished run, and a knowledge base of hers."""
    async with web.client("alice") as alice:
        saved = await alice.post("/api/workflows", content=(EXAMPLES / "support.yaml").read_text(),
                                 headers={"Content-Type": "application/yaml"})
        assert saved.status_code == 201, saved.text
        started = await alice.post("/api/workflows/support/runs?wait=true", json={
            "inputs": {"query": "Can I get a refund on an order I placed three weeks ago?"}})
        assert started.status_code in (200, 201, 202), started.text
        run_id = started.json()["run_id"]
        made = await alice.post("/api/knowledge", json={"name": "notes"})
        assert made.status_code == 201, made.text
        added = await alice.post("/api/knowledge/notes/documents", json={
            "name": "a-very-long-document-name-about-returns-and-refunds-policy.md",
            "text": "Returns are accepted within 30 days.", "tags": {"category": ["returns"]}})
        assert added.status_code == 201, added.text
    return run_id


async def sideways(page) -> int:
    """How far the document scrolls sideways (0: not at all)."""
    return await page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth")


async def test_every_page_fits_a_phone_and_passes_axe_at_both_widths(web, filled, browser):
    for viewport in (PHONE, DESKTOP):
        context = await browser.new_context(viewport=viewport, bypass_csp=True)
        page = await context.new_page()
        page.set_default_timeout(30_000)
        elsewhere: list[str] = []
        page.on("request", lambda request: None if request.url.startswith(
            (web.url, "data:", "blob:")) else elsewhere.append(request.url))
        try:
            await page.goto(web.url + "/")
            await page.wait_for_url("**/signin**")
            assert await sideways(page) == 0, "sign-in"
            assert await serious_violations(page) == [], "sign-in"
            await sign_in(page, web)
            for path, ready in PAGES:
                await page.goto(web.url + path.format(run=filled))
                await page.locator(ready).first.wait_for()
                where = f"{path} at {viewport['width']} px"
                assert await sideways(page) == 0, where
                assert await serious_violations(page) == [], where
                # every link and button of the main navigation is inside the header
                outside = await page.evaluate("""() => {
                  const header = document.querySelector('header.top').getBoundingClientRect();
                  return [...document.querySelectorAll('header.top nav a, header.top nav button')]
                    .filter((el) => { const r = el.getBoundingClientRect();
                      return r.bottom > header.bottom || r.right > header.right; })
                    .map((el) => el.textContent); }""")
                assert outside == [], where
                if viewport is PHONE:
                    await shot(page, f"50-phone{path.replace('/', '-').replace('{run}', 'run')}")
            if viewport is PHONE:
                # the workflow page's graph and editor are stacked, each the full width
                await page.goto(web.url + "/workflows/support")
                await page.locator("[data-block-id]").first.wait_for()
                graph = await page.locator(".graph-pane").bounding_box()
                assert graph["width"] > 330, graph
            await page.goto(web.url + "/docs")
            await page.wait_for_load_state("networkidle")
        finally:
            await context.close()
        assert elsewhere == [], f"requests that left the server at {viewport['width']} px"
